package kernels

import "braid/internal/quant"

// The MXFP4 x8 layout. A group of eight rows keeps, for each 32-value
// block b, 136 bytes (eight plain 17-byte blocks' worth) at b*136, in the
// order the kernel reads them:
//
//	[0:128)    the codes: for the chunk k of four bytes (values 4k..4k+3
//	           in the low nibbles, 16+4k.. in the high ones), 32 bytes at
//	           32k, row r's plain qs[4k:4k+4] at 4r
//	[128:136)  the E8M0 exponents of rows 0..7, row r at 128+r
//
// so that one 32-byte load gives four code bytes of the eight rows (eight
// values each) and one VPMOVZXBD the eight rows' exponents.
const (
	mxfp4Block   = 17
	mxfp4X8Block = 8 * mxfp4Block
	mxfp4X8E     = 128
)

// mxfp4TabU12 is the codebook plus 12, unsigned, for the x8 kernels'
// VPMADDUBSW (which takes one operand unsigned): they subtract 12 times
// the activations' sums after, so that every product is exact, -128
// included.
var mxfp4TabU12 [16]uint8

func init() {
	for i, v := range quant.MXFP4Values {
		mxfp4TabU12[i] = uint8(int(v) + 12)
	}
	x8Generic[quant.MXFP4] = &x8Format{name: "generic", act: quant.Q8_0, block: mxfp4Block,
		pack: packMXFP4X8, unpack: unpackMXFP4X8, dot8: dotMXFP4X8Ref, ref: dotMXFP4Canon}
}

func packMXFP4X8(dst, src []byte, nb int) {
	rb := nb * mxfp4Block
	for b := 0; b < nb; b++ {
		o := dst[b*mxfp4X8Block : (b+1)*mxfp4X8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*mxfp4Block : r*rb+(b+1)*mxfp4Block]
			scatter4(o, s[1:], r, 4)
			o[mxfp4X8E+r] = s[0]
		}
	}
}

func unpackMXFP4X8(dst, src []byte, nb int) {
	rb := nb * mxfp4Block
	for b := 0; b < nb; b++ {
		o := src[b*mxfp4X8Block : (b+1)*mxfp4X8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*mxfp4Block : r*rb+(b+1)*mxfp4Block]
			gather4(s[1:], o, r, 4)
			s[0] = o[mxfp4X8E+r]
		}
	}
}

// The canonical arithmetic of MXFP4 is the plain AVX2 row dot's
// (vdMXFP4AVX2), as for Q8_0 (repack_q80.go): each of eight float32
// lanes takes the exact integer sum of four values of every block (lane
// k values 4k..4k+3: the low nibbles of qs[4k:4k+4] for k < 4, the high
// nibbles of qs[4k-16:4k-12] after) times the exponent's half scale times
// dx, fused, and the lanes are added in HSUM_Y0's tree. So a repacked
// matrix gives the plain kernel's bits, and the gpt-oss models' outputs
// do not move with the layout. (The plain kernel's VPMADDUBSW sign trick
// is wrong for an activation of -128 under a negative code, which the
// Q8_0 quantizer never writes; the canonical sum is exact for every
// byte.)

// mxfp4D is a block's dw*dx as vdMXFP4AVX2 rounds it: the half scale of
// the exponent (exact, a power of two) times dx, rounded once.
func mxfp4D(e uint8, xb []byte) float32 {
	return float32(e8m0Half(e) * kqF16(xb))
}

// dotMXFP4Canon is the MXFP4 row dot in the x8 kernels' arithmetic, on a
// plain row: the rows after a matrix's last group of eight, and the
// oracle.
func dotMXFP4Canon(n int, w, x []byte) float32 {
	nb := n / 32
	if n%32 != 0 || len(w) < nb*mxfp4Block || len(x) < nb*q80Block {
		panic("kernels: MXFP4 dot operand shorter than n values or n not a multiple of 32")
	}
	var acc q80Lanes
	for b := 0; b < nb; b++ {
		wb, xb := w[b*mxfp4Block:(b+1)*mxfp4Block], x[b*q80Block:(b+1)*q80Block]
		var isum [8]int32
		for j := 0; j < 16; j++ {
			q := wb[1+j]
			isum[j/4] += int32(mxfp4Values[q&15]) * int32(int8(xb[2+j]))
			isum[4+j/4] += int32(mxfp4Values[q>>4]) * int32(int8(xb[18+j]))
		}
		acc.add(&isum, mxfp4D(wb[0], xb))
	}
	return acc.sum()
}

// dotMXFP4X8Ref is dot8 in pure Go, reading the x8 layout as the assembly
// does.
func dotMXFP4X8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*mxfp4X8Block || len(x) < nb*q80Block {
		panic("kernels: MXFP4 x8 dot operand shorter than its blocks")
	}
	var acc [8]q80Lanes
	for b := 0; b < nb; b++ {
		o := w[b*mxfp4X8Block : (b+1)*mxfp4X8Block]
		xb := x[b*q80Block : (b+1)*q80Block]
		for r := 0; r < 8; r++ {
			var isum [8]int32
			for j := 0; j < 16; j++ {
				q := o[32*(j/4)+4*r+j%4]
				isum[j/4] += int32(mxfp4Values[q&15]) * int32(int8(xb[2+j]))
				isum[4+j/4] += int32(mxfp4Values[q>>4]) * int32(int8(xb[18+j]))
			}
			acc[r].add(&isum, mxfp4D(o[mxfp4X8E+r], xb))
		}
	}
	for r := range dst {
		dst[r] = acc[r].sum()
	}
}
