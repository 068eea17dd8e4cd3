//go:build amd64

package kernels

import (
	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// Assembly row dots (dot_amd64.s). They take the Go references' signature so
// they can be registered as they are; MatMul guarantees the slice lengths.

//go:noescape
func vdQ8_0VNNI(n int, w, x []byte) float32

//go:noescape
func vdQ4_0VNNI(n int, w, x []byte) float32

//go:noescape
func vdF32AVX512(n int, w, x []byte) float32

//go:noescape
func vdF16AVX512(n int, w, x []byte) float32

//go:noescape
func vdF32AVX2(n int, w, x []byte) float32

//go:noescape
func vdF16AVX2(n int, w, x []byte) float32

//go:noescape
func vdQ8_0AVX2(n int, w, x []byte) float32

//go:noescape
func vdQ4_0AVX2(n int, w, x []byte) float32

//go:noescape
func readSumAVX2(a []int64) int64

func init() {
	x := &cpu.X86
	if x.HasAVX2 {
		readSum = func(a []int64) int64 {
			m := len(a) &^ 15
			return readSumAVX2(a[:m]) + readSumGeneric(a[m:])
		}
	}
	// The AVX-512 kernels use byte/word ops (BW), 256-bit EVEX forms for the
	// odd last block (VL) and VPDPBUSD (VNNI); F16C converts the scales.
	vnni := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasF16C && x.HasFMA
	registerFast(quant.Q8_0, vnni, &dotImpl{name: "avx512vnni", act: quant.Q8_0, dot: vdQ8_0VNNI})
	registerFast(quant.Q4_0, vnni, &dotImpl{name: "avx512vnni", act: quant.Q8_0, dot: vdQ4_0VNNI})
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasF16C && x.HasFMA
	registerFast(quant.F32, avx512, &dotImpl{name: "avx512", act: quant.F32, dot: vdF32AVX512})
	registerFast(quant.F16, avx512, &dotImpl{name: "avx512", act: quant.F16, dot: vdF16AVX512})
	avx2 := x.HasAVX2 && x.HasFMA && x.HasF16C
	registerFast(quant.F32, avx2, &dotImpl{name: "avx2", act: quant.F32, dot: vdF32AVX2})
	registerFast(quant.F16, avx2, &dotImpl{name: "avx2", act: quant.F16, dot: vdF16AVX2})
	registerFast(quant.Q8_0, avx2, &dotImpl{name: "avx2", act: quant.Q8_0, dot: vdQ8_0AVX2})
	registerFast(quant.Q4_0, avx2, &dotImpl{name: "avx2", act: quant.Q8_0, dot: vdQ4_0AVX2})
}
