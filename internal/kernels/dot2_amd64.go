//go:build amd64

package kernels

import (
	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// Row dots of dot2_amd64.s, with the Go references' signature.

//go:noescape
func vdQ4_1VNNI(n int, w, x []byte) float32

//go:noescape
func vdQ5_0VNNI(n int, w, x []byte) float32

//go:noescape
func vdQ5_1VNNI(n int, w, x []byte) float32

//go:noescape
func vdIQ4NLVNNI(n int, w, x []byte) float32

//go:noescape
func vdMXFP4VNNI(n int, w, x []byte) float32

//go:noescape
func vdBF16AVX512BF16(n int, w, x []byte) float32

//go:noescape
func vdBF16AVX512(n int, w, x []byte) float32

//go:noescape
func vdBF16AVX2(n int, w, x []byte) float32

//go:noescape
func vdQ4_1AVX2(n int, w, x []byte) float32

//go:noescape
func vdQ5_0AVX2(n int, w, x []byte) float32

//go:noescape
func vdQ5_1AVX2(n int, w, x []byte) float32

//go:noescape
func vdIQ4NLAVX2(n int, w, x []byte) float32

//go:noescape
func vdMXFP4AVX2(n int, w, x []byte) float32

//go:noescape
func roundF16AVX512(dst []byte, src []float32)

// roundF16Fast is roundF16 with the bulk converted by VCVTPS2PH/VCVTPH2PS.
func roundF16Fast(dst []byte, src []float32) {
	m := len(src) &^ 15
	if m > 0 {
		roundF16AVX512(dst[:4*m], src[:m])
	}
	roundF16(dst[4*m:], src[m:])
}

func init() {
	x := &cpu.X86
	// As in dot_amd64.go: BW for byte ops and mask moves, VL for the
	// 256-bit EVEX forms of the odd last block, VNNI for VPDPBUSD.
	vnni := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasF16C && x.HasFMA
	avx2 := x.HasAVX2 && x.HasFMA && x.HasF16C
	type tile = func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	for _, k := range []struct {
		t          quant.Type
		act        quant.Type
		vnni, avx2 func(n int, w, x []byte) float32
		mm         tile // VNNI prefill tile, 4x4
	}{
		{quant.Q4_1, quant.Q8_1, vdQ4_1VNNI, vdQ4_1AVX2, nil},
		{quant.Q5_0, quant.Q8_0, vdQ5_0VNNI, vdQ5_0AVX2, mmQ5_0},
		{quant.Q5_1, quant.Q8_1, vdQ5_1VNNI, vdQ5_1AVX2, nil},
		{quant.IQ4_NL, quant.Q8_0, vdIQ4NLVNNI, vdIQ4NLAVX2, mmIQ4NL},
		{quant.MXFP4, quant.Q8_0, vdMXFP4VNNI, vdMXFP4AVX2, mmMXFP4},
	} {
		d := &dotImpl{name: "avx512vnni", act: k.act, dot: k.vnni}
		if k.mm != nil {
			d.mm, d.mmRows, d.mmCols = k.mm, 4, 4
		}
		registerFast(k.t, vnni, d)
		registerFast(k.t, avx2, &dotImpl{name: "avx2", act: k.act, dot: k.avx2})
	}
	avx512 := x.HasAVX512F && x.HasAVX512BW
	registerFast(quant.BF16, avx512 && x.HasAVX512BF16, &dotImpl{name: "avx512bf16", act: quant.BF16, dot: vdBF16AVX512BF16,
		mmWide: mmBF16Wide, wideAct: roundBF16, wideKind: "bf16", mmRows: 64, mmCols: 1 << 30})
	registerFast(quant.BF16, avx512, &dotImpl{name: "avx512", act: quant.BF16, dot: vdBF16AVX512,
		mmWide: mmBF16Wide, wideAct: roundBF16, wideKind: "bf16", mmRows: 64, mmCols: 1 << 30})
	registerFast(quant.BF16, x.HasAVX2 && x.HasFMA, &dotImpl{name: "avx2", act: quant.BF16, dot: vdBF16AVX2})
}
