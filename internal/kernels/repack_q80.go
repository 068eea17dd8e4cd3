package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// The Q8_0 x8 layout. A group of eight rows keeps, for each 32-value
// block b, 272 bytes (eight plain blocks' worth), at b*272 in the group,
// in the order the kernel reads them:
//
//	[0:256)    for the chunk k of four values, 32 bytes at 32k, row r's
//	           qs[4k : 4k+4] at 4r
//	[256:272)  d of rows 0..7, f16, row r at 256+2r
//
// so that one 32-byte load gives four values of the eight rows and one
// broadcast of four activation values meets every row.
const (
	q80X8Block = 8 * q80Block
	q80X8D     = 256
)

func init() {
	x8Generic[quant.Q8_0] = &x8Format{name: "generic", act: quant.Q8_0, block: q80Block,
		pack: packQ80X8, unpack: unpackQ80X8, dot8: dotQ80X8Ref, ref: dotQ80Canon}
}

// q80X8Moves calls mv(at in the group block, at in row r's plain block,
// length) for every piece of the layout.
func q80X8Moves(r int, mv func(x8, plain, n int)) {
	for k := 0; k < 8; k++ {
		mv(32*k+4*r, 2+4*k, 4)
	}
	mv(q80X8D+2*r, 0, 2)
}

func packQ80X8(dst, src []byte, nb int) {
	rb := nb * q80Block
	for b := 0; b < nb; b++ {
		o := dst[b*q80X8Block : (b+1)*q80X8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*q80Block : r*rb+(b+1)*q80Block]
			q80X8Moves(r, func(x8, plain, n int) { copy(o[x8:x8+n], s[plain:plain+n]) })
		}
	}
}

func unpackQ80X8(dst, src []byte, nb int) {
	rb := nb * q80Block
	for b := 0; b < nb; b++ {
		o := src[b*q80X8Block : (b+1)*q80X8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*q80Block : r*rb+(b+1)*q80Block]
			q80X8Moves(r, func(x8, plain, n int) { copy(s[plain:plain+n], o[x8:x8+n]) })
		}
	}
}

// q80Combine is the canonical float step of a Q8_0 block, refDotQ8_0's:
// the exact integer sum times the product of the scales, the products
// and the sum each rounded to float32 on its own (the conversions keep
// Go from fusing them, which the x8 kernel does not do either).
func q80Combine(acc, dw, dx float32, isum int32) float32 {
	return acc + float32(float32(isum)*float32(dw*dx))
}

// dotQ80Canon is the Q8_0 row dot in the x8 kernel's arithmetic, on a
// plain row: the rows after a matrix's last group of eight, and the
// oracle.
func dotQ80Canon(n int, w, x []byte) float32 {
	if n%32 != 0 || len(w) < n/32*q80Block || len(x) < n/32*q80Block {
		panic("kernels: Q8_0 dot operand shorter than n values or n not a multiple of 32")
	}
	var acc float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q80Block:(b+1)*q80Block], x[b*q80Block:(b+1)*q80Block]
		var isum int32
		for j := 0; j < 32; j++ {
			isum += int32(int8(wb[2+j])) * int32(int8(xb[2+j]))
		}
		acc = q80Combine(acc, f16(wb), f16(xb), isum)
	}
	return acc
}

// dotQ80X8Ref is dot8 in pure Go, reading the x8 layout as the assembly
// does.
func dotQ80X8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q80X8Block || len(x) < nb*q80Block {
		panic("kernels: Q8_0 x8 dot operand shorter than its blocks")
	}
	var acc [8]float32
	for b := 0; b < nb; b++ {
		o := w[b*q80X8Block : (b+1)*q80X8Block]
		xb := x[b*q80Block : (b+1)*q80Block]
		for r := 0; r < 8; r++ {
			var isum int32
			for j := 0; j < 32; j++ {
				isum += int32(int8(o[32*(j/4)+4*r+j%4])) * int32(int8(xb[2+j]))
			}
			dw := quant.F16ToF32(binary.LittleEndian.Uint16(o[q80X8D+2*r:]))
			acc[r] = q80Combine(acc[r], dw, f16(xb), isum)
		}
	}
	*dst = acc
}
