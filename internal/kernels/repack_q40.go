package kernels

import (
	"encoding/binary"
	"math"

	"braid/internal/quant"
)

// The Q4_0 x8 layout. A group of eight rows keeps, for each 32-value
// block b, 144 bytes (eight plain 18-byte blocks' worth) at b*144:
//
//	[0:16)    d of rows 0..7, f16, row r at 2r
//	[16:144)  the codes: for the chunk k of four bytes (values 4k..4k+3
//	          in the low nibbles, 16+4k.. in the high ones), 32 bytes at
//	          16+32k, row r's plain qs[4k:4k+4] at 4r
const (
	q40Block   = 18
	q40X8Block = 8 * q40Block
	q80Block   = 34
)

func init() {
	x8Generic[quant.Q4_0] = &x8Format{name: "generic", act: quant.Q8_0, block: q40Block,
		pack: packQ40X8, unpack: unpackQ40X8, dot8: dotQ40X8Ref, ref: dotQ40Canon}
}

func packQ40X8(dst, src []byte, nb int) {
	rb := nb * q40Block
	for b := 0; b < nb; b++ {
		o := dst[b*q40X8Block : (b+1)*q40X8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*q40Block : r*rb+(b+1)*q40Block]
			o[2*r], o[2*r+1] = s[0], s[1]
			scatter4(o[16:], s[2:], r, 4)
		}
	}
}

func unpackQ40X8(dst, src []byte, nb int) {
	rb := nb * q40Block
	for b := 0; b < nb; b++ {
		o := src[b*q40X8Block : (b+1)*q40X8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*q40Block : r*rb+(b+1)*q40Block]
			s[0], s[1] = o[2*r], o[2*r+1]
			gather4(s[2:], o[16:], r, 4)
		}
	}
}

// q40Aux writes, for each of the nb blocks of Q8_0 vector x, 8*sum(x) as
// an int32 and dx as a float32: what the four-vector kernel's block step
// needs beside the codes. The sum is exact, so taking it here instead of
// in line changes no bits.
func q40Aux(nb int, x []byte, aux []byte) { q80SumsAux(8, nb, x, aux) }

// q80SumsAux writes, for each of the nb blocks of Q8_0 vector x, off times
// the sum of its values (int32) and its dx (float32): the per-block
// quantities of the offset formats' four-vector kernels (Q4_0's codes
// are offset by 8, Q5_0's by 16).
func q80SumsAux(off int32, nb int, x []byte, aux []byte) {
	for b := 0; b < nb; b++ {
		xb := x[q80Block*b : q80Block*(b+1)]
		var s int32
		for _, v := range xb[2:] {
			s += int32(int8(v))
		}
		binary.LittleEndian.PutUint32(aux[8*b:], uint32(off*s))
		binary.LittleEndian.PutUint32(aux[8*b+4:], math.Float32bits(kqF16(xb)))
	}
}

// q40Combine is the canonical float step of a Q4_0 block, refDotQ4_0's:
// the exact integer sum times d*dx, rounded, added.
func q40Combine(acc, dw, dx float32, isum int32) float32 {
	return acc + float32(float32(isum)*float32(dw*dx))
}

// dotQ40Canon is the Q4_0 row dot in the x8 kernels' arithmetic on a
// plain row.
func dotQ40Canon(n int, w, x []byte) float32 {
	nb := n / 32
	if n%32 != 0 || len(w) < nb*q40Block || len(x) < nb*q80Block {
		panic("kernels: Q4_0 dot operand shorter than n values")
	}
	var acc float32
	for b := 0; b < nb; b++ {
		wb, xb := w[q40Block*b:q40Block*(b+1)], x[q80Block*b:q80Block*(b+1)]
		var isum int32
		for j := 0; j < 16; j++ {
			q := wb[2+j]
			isum += (int32(q&15) - 8) * int32(int8(xb[2+j]))
			isum += (int32(q>>4) - 8) * int32(int8(xb[18+j]))
		}
		acc = q40Combine(acc, kqF16(wb), kqF16(xb), isum)
	}
	return acc
}

// dotQ40X8Ref is dot8 in pure Go on the x8 layout.
func dotQ40X8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q40X8Block || len(x) < nb*q80Block {
		panic("kernels: Q4_0 x8 dot operand shorter than its blocks")
	}
	var acc [8]float32
	for b := 0; b < nb; b++ {
		o, xb := w[b*q40X8Block:(b+1)*q40X8Block], x[q80Block*b:q80Block*(b+1)]
		for r := 0; r < 8; r++ {
			var isum int32
			for j := 0; j < 16; j++ {
				q := o[16+32*(j/4)+4*r+j%4]
				isum += (int32(q&15) - 8) * int32(int8(xb[2+j]))
				isum += (int32(q>>4) - 8) * int32(int8(xb[18+j]))
			}
			acc[r] = q40Combine(acc[r], kqF16(o[2*r:]), kqF16(xb), isum)
		}
	}
	*dst = acc
}
