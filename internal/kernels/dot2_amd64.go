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
func vdMXFP4VBMI(n int, w, x []byte) float32

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

// Tables of vdMXFP4VBMI, which takes eight MXFP4 blocks (136 bytes) per
// step from three vector loads: L0 = bytes 0-63, L1 = 64-127, L2 = 128-135.
var (
	// mx8Pair[k] gathers (VPERMI2B) the code bytes of blocks 2k and 2k+1
	// into the 128-bit lanes [2k, 2k, 2k+1, 2k+1] from L0:L1 (k < 2) or
	// L1:L2 (k >= 2); index i picks byte i of the pair of registers.
	mx8Pair [4][64]byte
	// mx8Exp puts the exponent byte of block i (byte 17i of L0:L1) in the
	// low byte of dword i; the other bytes are masked to zero.
	mx8Exp [64]byte
	// mx8Perm[k] spreads the block scales 2k, 2k+1 over the two halves of
	// a zmm (VPERMPS), matching the lanes of pair k.
	mx8Perm [4][16]int32
	// mx8XOff are the byte offsets of the eight Q8_0 scales (VPGATHERDD).
	mx8XOff [8]int32
	// mx8Abs is |MXFP4 value| for a 6-bit VPERMB index: the low nibble is
	// the code, so the table repeats every 16 bytes and whatever the
	// nibble above left in bits 4-5 does not matter.
	mx8Abs [64]byte
)

func init() {
	for k := range mx8Pair {
		base := 0
		if k >= 2 {
			base = 64
		}
		for l, blk := range [4]int{2 * k, 2 * k, 2*k + 1, 2*k + 1} {
			for j := 0; j < 16; j++ {
				mx8Pair[k][16*l+j] = byte(17*blk + 1 + j - base)
			}
		}
		for j := 0; j < 16; j++ {
			mx8Perm[k][j] = int32(2*k + j/8)
		}
	}
	for i := 0; i < 8; i++ {
		mx8Exp[4*i] = byte(17 * i)
		mx8XOff[i] = int32(34 * i)
	}
	for i := range mx8Abs {
		v := quant.MXFP4Values[i%16]
		mx8Abs[i] = byte(max(v, -v))
	}
}

func init() {
	x := &cpu.X86
	// As in dot_amd64.go: BW for byte ops and mask moves, VL for the
	// 256-bit EVEX forms of the odd last block, VNNI for VPDPBUSD.
	vnni := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasF16C && x.HasFMA
	avx2 := x.HasAVX2 && x.HasFMA && x.HasF16C
	type tile = func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
	// MXFP4's eight-block dot cuts blocks with VPERMB/VPERMI2B (VBMI).
	registerFast(quant.MXFP4, vnni && x.HasAVX512VBMI, &dotImpl{name: "avx512vbmi", act: quant.Q8_0, dot: vdMXFP4VBMI,
		mm: mmMXFP4, mmRows: 4, mmCols: 4})
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
