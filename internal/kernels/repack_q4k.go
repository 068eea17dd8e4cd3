package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// The Q4_K x8 layout. A group of eight rows keeps, for each 256-value
// block b, 1152 bytes (eight plain blocks' worth), at b*1152 in the group:
//
//	[0:16)      d of rows 0..7, f16, row r at 2r
//	[16:32)     dmin of rows 0..7
//	[32:64)     scale bytes 0..3 of each row, row r at 32+4r
//	[64:96)     scale bytes 4..7
//	[96:128)    scale bytes 8..11
//	[128:1152)  the quants: for the pair p of sub-blocks (2p, 2p+1, which
//	            share 32 plain bytes: low and high nibbles) and the chunk k
//	            of four values, 32 bytes at 128+32*(8p+k), row r's four
//	            bytes qs[32p+4k : 32p+4k+4] at 4r
//
// so that one 32-byte load holds four values of both sub-blocks for all
// eight rows, one broadcast of four activation bytes meets every row, and
// the 6-bit scales of eight rows unpack with a few vector operations.
const (
	q4kX8Block  = 8 * kqQ4KSize
	q4kX8Scales = 32
	q4kX8QS     = 128
)

func init() {
	x8Generic[quant.Q4_K] = &x8Format{name: "generic", act: quant.Q8_K, block: kqQ4KSize,
		pack: packQ4KX8, unpack: unpackQ4KX8, dot8: dotQ4KX8Ref, ref: dotQ4KCanon}
}

func packQ4KX8(dst, src []byte, nb int) {
	rb := nb * kqQ4KSize
	for b := 0; b < nb; b++ {
		o := dst[b*q4kX8Block : (b+1)*q4kX8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*kqQ4KSize : r*rb+(b+1)*kqQ4KSize]
			o[2*r], o[2*r+1], o[16+2*r], o[17+2*r] = s[0], s[1], s[2], s[3]
			// The scales and then the codes (c = 8p+k: the plain bytes
			// 16+4c..) are one run of 35 words.
			scatter4(o[q4kX8Scales:], s[4:], r, 35)
		}
	}
}

func unpackQ4KX8(dst, src []byte, nb int) {
	rb := nb * kqQ4KSize
	for b := 0; b < nb; b++ {
		o := src[b*q4kX8Block : (b+1)*q4kX8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*kqQ4KSize : r*rb+(b+1)*kqQ4KSize]
			s[0], s[1], s[2], s[3] = o[2*r], o[2*r+1], o[16+2*r], o[17+2*r]
			gather4(s[4:], o[q4kX8Scales:], r, 35)
		}
	}
}

// q4kCombine is the canonical float step of a Q4_K block: the block's
// exact integer sums scaled and added, each product and sum rounded to
// float32 on its own (the conversions keep Go from fusing them, which
// the x8 kernels do not do either).
func q4kCombine(acc, yd, d, dmin float32, isum, summs int32) float32 {
	a := float32(float32(isum) * float32(d*yd))
	m := float32(float32(summs) * float32(dmin*yd))
	return acc + float32(a-m)
}

// dotQ4KCanon is the Q4_K row dot in the x8 kernels' arithmetic, on a
// plain row: the rows after a matrix's last group of eight, and the
// oracle.
func dotQ4KCanon(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqQ4KSize)
	var acc float32
	for i := 0; i < nb; i++ {
		b := w[i*kqQ4KSize : (i+1)*kqQ4KSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var isum, summs int32
		for j := 0; j < 8; j++ {
			sc, m := kqScaleMinK4(j, b[4:16])
			summs += m * (kqI16(y[kqQ8KBsums+4*j:]) + kqI16(y[kqQ8KBsums+4*j+2:]))
			qs := b[16+32*(j/2) : 16+32*(j/2)+32]
			shift := 4 * uint(j%2)
			var s int32
			for l := 0; l < 32; l++ {
				s += int32(qs[l]>>shift&0x0f) * int32(int8(q8[32*j+l]))
			}
			isum += sc * s
		}
		acc = q4kCombine(acc, kqF32(y), kqF16(b[0:]), kqF16(b[2:]), isum, summs)
	}
	return acc
}

// dotQ4KX8Ref is dot8 in pure Go, reading the x8 layout as the assembly
// does.
func dotQ4KX8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q4kX8Block || len(x) < nb*kqQ8KSize {
		panic("kernels: Q4_K x8 dot operand shorter than its blocks")
	}
	var acc [8]float32
	for i := 0; i < nb; i++ {
		o := w[i*q4kX8Block : (i+1)*q4kX8Block]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		yd := kqF32(y)
		for r := 0; r < 8; r++ {
			var scales [12]byte
			for s := 0; s < 3; s++ {
				copy(scales[4*s:4*s+4], o[q4kX8Scales+32*s+4*r:])
			}
			var isum, summs int32
			for j := 0; j < 8; j++ {
				sc, m := kqScaleMinK4(j, scales[:])
				summs += m * (kqI16(y[kqQ8KBsums+4*j:]) + kqI16(y[kqQ8KBsums+4*j+2:]))
				p, shift := j/2, 4*uint(j%2)
				var s int32
				for l := 0; l < 32; l++ {
					q := o[q4kX8QS+32*(8*p+l/4)+4*r+l%4] >> shift & 0x0f
					s += int32(q) * int32(int8(y[kqQ8KQS+32*j+l]))
				}
				isum += sc * s
			}
			d := quant.F16ToF32(binary.LittleEndian.Uint16(o[2*r:]))
			dmin := quant.F16ToF32(binary.LittleEndian.Uint16(o[16+2*r:]))
			acc[r] = q4kCombine(acc[r], yd, d, dmin, isum, summs)
		}
	}
	*dst = acc
}
