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

// Prefill tiles (mm_amd64.s): dst[c*ldd+r] for a 4x4 tile, nb even.

//go:noescape
func mmQ8_0VNNI(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

//go:noescape
func mmQ4_0VNNI(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

func mmQ8_0(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	if nb := n / 32; rows == 4 && cols == 4 && nb%2 == 0 && nb > 0 {
		mmQ8_0VNNI(&w[0], ldw, &x[0], ldx, &dst[0], ldd, nb)
		return
	}
	mmByDot(vdQ8_0VNNI, n, w, ldw, x, ldx, dst, ldd, rows, cols)
}

func mmQ4_0(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	if nb := n / 32; rows == 4 && cols == 4 && nb%2 == 0 && nb > 0 {
		mmQ4_0VNNI(&w[0], ldw, &x[0], ldx, &dst[0], ldd, nb)
		return
	}
	mmByDot(vdQ4_0VNNI, n, w, ldw, x, ldx, dst, ldd, rows, cols)
}

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
	// The 4x4 tiles run each column's block sums, scales and
	// accumulation as the row dot does (exactTiles, checked by
	// TestExactEveryFormat); their edges are the row dot.
	registerFast(quant.Q8_0, vnni, &dotImpl{name: "avx512vnni", act: quant.Q8_0, dot: vdQ8_0VNNI,
		mm: mmQ8_0, mmRows: 4, mmCols: 4, exactTiles: true})
	registerFast(quant.Q4_0, vnni, &dotImpl{name: "avx512vnni", act: quant.Q8_0, dot: vdQ4_0VNNI,
		mm: mmQ4_0, mmRows: 4, mmCols: 4, exactTiles: true})
	// The float tiles (mmf16_amd64.s) run one multiply-add chain per row
	// and column and the same reduction whatever their shape, so one-vector
	// products on the one-column tile would make every column exact; but
	// decode on them streams four rows at once, and a llama-1b F16 decoded
	// at 0.5-0.65x the row dots' speed (4 interleaved rounds), so decode
	// keeps the row dots and exact products of few vectors the row dot
	// per vector (SetExactColumns).
	// F32 weights take no tiles in MatMul: a batch of decode steps (the
	// server's slots, the choices of n > 1) then gives each sequence the
	// bits it gets alone, as on AVX2, where the float32 tiles' single
	// multiply-add chain per row and column would round apart from the
	// row dot's four. F32 weight matrices are rare and small (tiny models,
	// a few side tensors); their prefill reads each chunk of rows once
	// from memory and runs the row dot per vector from cache. The tiles
	// stay MatMulF32's (f32Tiles), for layers' own small products.
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasF16C && x.HasFMA
	registerFast(quant.F32, avx512, &dotImpl{name: "avx512", act: quant.F32, dot: vdF32AVX512})
	registerFast(quant.F16, avx512, &dotImpl{name: "avx512", act: quant.F16, dot: vdF16AVX512,
		mmWide: mmF16Wide, wideAct: roundF16Fast, wideKind: "f16", mmRows: 64, mmCols: 1 << 30})
	avx2 := x.HasAVX2 && x.HasFMA && x.HasF16C
	registerFast(quant.F32, avx2, &dotImpl{name: "avx2", act: quant.F32, dot: vdF32AVX2})
	registerFast(quant.F16, avx2, &dotImpl{name: "avx2", act: quant.F16, dot: vdF16AVX2})
	registerFast(quant.Q8_0, avx2, &dotImpl{name: "avx2", act: quant.Q8_0, dot: vdQ8_0AVX2})
	registerFast(quant.Q4_0, avx2, &dotImpl{name: "avx2", act: quant.Q8_0, dot: vdQ4_0AVX2})
}
