//go:build amd64

package kernels

import (
	"fmt"

	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// Row dots of dot2_amd64.s, with the Go references' signature.

//go:noescape
func vdQ4_1VNNI(n int, w, x []byte) float32

//go:noescape
func vdQ5_0VNNI(n int, w, x []byte) float32

//go:noescape
func vdQ5_0RowsVNNI(n int, w []byte, ldw int, x []byte, dst []float32)

// q5_0Rows is the dotImpl.rows of vdQ5_0VNNI, checking the operands so the
// assembly never reads past a slice.
func q5_0Rows(n int, w []byte, ldw int, x []byte, dst []float32) {
	nb := n / 32
	if len(dst) == 0 {
		return
	}
	if n%32 != 0 || ldw < nb*22 || len(w) < (len(dst)-1)*ldw+nb*22 || len(x) < nb*34 {
		panic(fmt.Sprintf("kernels: Q5_0 rows: %d rows of %d values at stride %d: weights %d bytes, activations %d", len(dst), n, ldw, len(w), len(x)))
	}
	vdQ5_0RowsVNNI(n, w, ldw, x, dst)
}

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
// step from three vector loads: L0 = bytes 0-63, L1 = 64-127, L2 = 128-135,
// in two groups of four blocks with four int32 lanes each.
var (
	// mx8W[g] gathers (VPERMI2B) the 16 code bytes of blocks 4g..4g+3
	// from L0:L1 (g = 0) or L1:L2 (g = 1); index i is byte i of the pair.
	mx8W [2][64]byte
	// mx8XLo and mx8XHi gather the activations of values 0-15 and 16-31
	// of four Q8_0 blocks (34 bytes each, quants after a 2-byte scale)
	// from the 128 bytes at the group's start (mx8XLo) or 8 bytes on.
	mx8XLo, mx8XHi [64]byte
	// mx8Perm[g] spreads the block scales 4g..4g+3 over four lanes each.
	mx8Perm [2][16]int32
	// mx8Exp puts the exponent byte of block i (byte 17i of L0:L1) in the
	// low byte of dword i; the other bytes are masked to zero.
	mx8Exp [64]byte
	// mx8Abs is |MXFP4 value| for a 6-bit VPERMB index: the low nibble is
	// the code, so the table repeats every 16 bytes and whatever the
	// nibble above left in bits 4-5 does not matter.
	mx8Abs [64]byte
)

func init() {
	for g := 0; g < 2; g++ {
		for i := 0; i < 4; i++ {
			for j := 0; j < 16; j++ {
				mx8W[g][16*i+j] = byte(17*(4*g+i) + 1 + j - 64*g)
			}
		}
		for l := 0; l < 16; l++ {
			mx8Perm[g][l] = int32(4*g + l/4)
		}
	}
	for i := 0; i < 4; i++ {
		for j := 0; j < 16; j++ {
			mx8XLo[16*i+j] = byte(34*i + 2 + j)
			mx8XHi[16*i+j] = byte(34*i + 18 + j - 8)
		}
	}
	for i := 0; i < 8; i++ {
		mx8Exp[4*i] = byte(17 * i)
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
			// Each column as the row dot computes it, edges by the row
			// dot (see Q8_0 in dot_amd64.go).
			d.mm, d.mmRows, d.mmCols, d.exactTiles = k.mm, 4, 4, true
		}
		if k.t == quant.Q5_0 {
			d.rows = q5_0Rows
		}
		registerFast(k.t, vnni, d)
		registerFast(k.t, avx2, &dotImpl{name: "avx2", act: k.act, dot: k.avx2})
	}
	avx512 := x.HasAVX512F && x.HasAVX512BW
	// The BF16 tiles are like the F16 ones (dot_amd64.go): decode keeps
	// the row dots, exact products of few vectors the row dot per vector.
	registerFast(quant.BF16, avx512 && x.HasAVX512BF16, &dotImpl{name: "avx512bf16", act: quant.BF16, dot: vdBF16AVX512BF16,
		mmWide: mmBF16Wide, wideAct: roundBF16, wideKind: "bf16", mmRows: 64, mmCols: 1 << 30})
	registerFast(quant.BF16, avx512, &dotImpl{name: "avx512", act: quant.BF16, dot: vdBF16AVX512,
		mmWide: mmBF16Wide, wideAct: roundBF16, wideKind: "bf16", mmRows: 64, mmCols: 1 << 30})
	registerFast(quant.BF16, x.HasAVX2 && x.HasFMA, &dotImpl{name: "avx2", act: quant.BF16, dot: vdBF16AVX2})
}
