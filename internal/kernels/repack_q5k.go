package kernels

import (
	"braid/internal/quant"
)

// The Q5_K x8 layout: Q4_K's (repack_q4k.go) with the fifth bits between
// the scales and the codes. A group block is 1408 bytes:
//
//	[0:16)      d of rows 0..7, f16, row r at 2r
//	[16:32)     dmin of rows 0..7
//	[32:128)    scale bytes 0..3, 4..7 and 8..11 of each row, 32 bytes each
//	[128:384)   the fifth bits: for the chunk k of four values (bit j of
//	            qh[4k+i] belongs to sub-block j), 32 bytes at 128+32k, row
//	            r's qh[4k:4k+4] at 4r
//	[384:1408)  the low four bits, as Q4_K's codes at its offset 128
const (
	q5kX8Block = 8 * kqQ5KSize
	q5kX8QH    = 128
	q5kX8QS    = 384
)

func init() {
	x8Generic[quant.Q5_K] = &x8Format{name: "generic", act: quant.Q8_K, block: kqQ5KSize,
		pack: packQ5KX8, unpack: unpackQ5KX8, dot8: dotQ5KX8Ref, ref: dotQ5KCanon}
}

func packQ5KX8(dst, src []byte, nb int) {
	rb := nb * kqQ5KSize
	for b := 0; b < nb; b++ {
		o := dst[b*q5kX8Block : (b+1)*q5kX8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*kqQ5KSize : r*rb+(b+1)*kqQ5KSize]
			o[2*r], o[2*r+1], o[16+2*r], o[17+2*r] = s[0], s[1], s[2], s[3]
			// The scales, the fifth bits and the codes are one run of 43
			// words in both layouts.
			scatter4(o[32:], s[4:], r, 43)
		}
	}
}

func unpackQ5KX8(dst, src []byte, nb int) {
	rb := nb * kqQ5KSize
	for b := 0; b < nb; b++ {
		o := src[b*q5kX8Block : (b+1)*q5kX8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*kqQ5KSize : r*rb+(b+1)*kqQ5KSize]
			s[0], s[1], s[2], s[3] = o[2*r], o[2*r+1], o[16+2*r], o[17+2*r]
			gather4(s[4:], o[32:], r, 43)
		}
	}
}

// dotQ5KCanon is the Q5_K row dot in the x8 kernels' arithmetic (Q4_K's
// float step) on a plain row.
func dotQ5KCanon(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqQ5KSize)
	var acc float32
	for i := 0; i < nb; i++ {
		b := w[i*kqQ5KSize : (i+1)*kqQ5KSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		qh := b[16:48]
		var isum, summs int32
		for j := 0; j < 8; j++ {
			sc, m := kqScaleMinK4(j, b[4:16])
			summs += m * (kqI16(y[kqQ8KBsums+4*j:]) + kqI16(y[kqQ8KBsums+4*j+2:]))
			qs := b[48+32*(j/2) : 48+32*(j/2)+32]
			shift := 4 * uint(j%2)
			var s int32
			for l := 0; l < 32; l++ {
				q := int32(qs[l]>>shift&0x0f) | int32(qh[l]>>uint(j)&1)<<4
				s += q * int32(int8(y[kqQ8KQS+32*j+l]))
			}
			isum += sc * s
		}
		acc = q4kCombine(acc, kqF32(y), kqF16(b[0:]), kqF16(b[2:]), isum, summs)
	}
	return acc
}

// dotQ5KX8Ref is dot8 in pure Go on the x8 layout.
func dotQ5KX8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q5kX8Block || len(x) < nb*kqQ8KSize {
		panic("kernels: Q5_K x8 dot operand shorter than its blocks")
	}
	var acc [8]float32
	for i := 0; i < nb; i++ {
		o := w[i*q5kX8Block : (i+1)*q5kX8Block]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		for r := 0; r < 8; r++ {
			var scales [12]byte
			for s := 0; s < 3; s++ {
				copy(scales[4*s:4*s+4], o[32+32*s+4*r:])
			}
			var isum, summs int32
			for j := 0; j < 8; j++ {
				sc, m := kqScaleMinK4(j, scales[:])
				summs += m * (kqI16(y[kqQ8KBsums+4*j:]) + kqI16(y[kqQ8KBsums+4*j+2:]))
				p, shift := j/2, 4*uint(j%2)
				var s int32
				for l := 0; l < 32; l++ {
					lo := o[q5kX8QS+32*(8*p+l/4)+4*r+l%4] >> shift & 0x0f
					hb := o[q5kX8QH+32*(l/4)+4*r+l%4] >> uint(j) & 1
					s += int32(lo|hb<<4) * int32(int8(y[kqQ8KQS+32*j+l]))
				}
				isum += sc * s
			}
			acc[r] = q4kCombine(acc[r], kqF32(y), kqF16(o[2*r:]), kqF16(o[16+2*r:]), isum, summs)
		}
	}
	*dst = acc
}
