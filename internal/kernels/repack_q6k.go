package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// The Q6_K x8 layout. A group of eight rows keeps, for each 256-value
// block b, 1680 bytes (eight plain blocks' worth), at b*1680 in the group,
// in the order the kernels read them:
//
//	[0:128)      the int8 scales: scales 4i..4i+3 of each row, row r at
//	             32i+4r
//	[128:1664)   for the half h of the block and the chunk k of four
//	             values, 96 bytes at 128+96*(8h+k): the two ql runs m = 0, 1
//	             (the 32 bytes whose low nibbles are quarter m of the half
//	             and high nibbles quarter m+2), row r's ql[64h+32m+4k : +4]
//	             at 32m+4r, then qh, row r's qh[32h+4k : +4] at 64+4r (each
//	             byte holds the high bits of one value of all four quarters)
//	[1664:1680)  d of rows 0..7, f16, row r at 1664+2r
//
// so that one 32-byte load of each ql run and of qh gives four values of
// all four quarters of a half for the eight rows, one broadcast of four
// activation bytes meets every row, and the weights stream in address
// order (one stream for the hardware prefetcher: the plain field order,
// ql then qh, read as three streams, went at 8.6-9.1 GB/s from DRAM, below
// the plain layout's 9.2-10.6).
const (
	q6kX8Block  = 8 * kqQ6KSize
	q6kX8Chunks = 128
	q6kX8D      = 1664
)

func init() {
	x8Generic[quant.Q6_K] = &x8Format{name: "generic", act: quant.Q8_K, block: kqQ6KSize,
		pack: packQ6KX8, unpack: unpackQ6KX8, dot8: dotQ6KX8Ref, ref: dotQ6KCanon}
}

// q6kX8Moves calls mv(at in the group block, at in row r's plain block,
// length) for every piece of the layout; pack and unpack are the same
// walk in the two directions.
func q6kX8Moves(r int, mv func(x8, plain, n int)) {
	for i := 0; i < 4; i++ {
		mv(32*i+4*r, 192+4*i, 4)
	}
	for h := 0; h < 2; h++ {
		for k := 0; k < 8; k++ {
			at := q6kX8Chunks + 96*(8*h+k)
			for m := 0; m < 2; m++ {
				mv(at+32*m+4*r, 64*h+32*m+4*k, 4)
			}
			mv(at+64+4*r, 128+32*h+4*k, 4)
		}
	}
	mv(q6kX8D+2*r, 208, 2)
}

// q6kX8Words is q6kX8Moves as a table of its 4-byte moves per row (x8
// offset, plain offset), so that repacking a model's Q6_K weights at load
// is word moves, not a call per move (it was half of a 1B model's load).
var q6kX8Words = func() (t [8][][2]uint16) {
	for r := range t {
		q6kX8Moves(r, func(x8, plain, n int) {
			if n == 4 {
				t[r] = append(t[r], [2]uint16{uint16(x8), uint16(plain)})
			}
		})
	}
	return t
}()

func packQ6KX8(dst, src []byte, nb int) {
	rb := nb * kqQ6KSize
	for b := 0; b < nb; b++ {
		o := dst[b*q6kX8Block : (b+1)*q6kX8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*kqQ6KSize : r*rb+(b+1)*kqQ6KSize]
			for _, m := range q6kX8Words[r] {
				binary.LittleEndian.PutUint32(o[m[0]:], binary.LittleEndian.Uint32(s[m[1]:]))
			}
			copy(o[q6kX8D+2*r:q6kX8D+2*r+2], s[208:210])
		}
	}
}

func unpackQ6KX8(dst, src []byte, nb int) {
	rb := nb * kqQ6KSize
	for b := 0; b < nb; b++ {
		o := src[b*q6kX8Block : (b+1)*q6kX8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*kqQ6KSize : r*rb+(b+1)*kqQ6KSize]
			for _, m := range q6kX8Words[r] {
				binary.LittleEndian.PutUint32(s[m[1]:], binary.LittleEndian.Uint32(o[m[0]:]))
			}
			copy(s[208:210], o[q6kX8D+2*r:q6kX8D+2*r+2])
		}
	}
}

// q6kCombine is the canonical float step of a Q6_K block: the block's
// exact integer sum scaled and added, the product and the sum each
// rounded to float32 on its own (the conversions keep Go from fusing
// them, which the x8 kernels do not do either).
func q6kCombine(acc, yd, d float32, isum int32) float32 {
	return acc + float32(float32(isum)*float32(d*yd))
}

// q6kCode is value e (0..255) of a plain Q6_K block's ql and qh, 0..63:
// quarter s of the half h takes the low (s<2) or high nibbles of
// ql[64h+32(s%2)+l] and bits 2s..2s+1 of qh[32h+l].
func q6kCode(ql, qh []byte, e int) int32 {
	h, s, l := e/128, (e/32)%4, e%32
	lo := ql[64*h+32*(s%2)+l] >> (4 * uint(s/2)) & 0x0f
	hi := qh[32*h+l] >> (2 * uint(s)) & 3
	return int32(lo | hi<<4)
}

// q6kISum is a block's integer sum from its unsigned codes: the codes'
// offset of 32 comes back out through the activations' bsums, as the
// kernels take it, so that every implementation agrees even on bsums
// that are not the sums of their values (which Quantize never writes).
func q6kISum(code func(e int) int32, sc func(g int) int32, y []byte) int32 {
	var isum, off int32
	for g := 0; g < 16; g++ {
		var s int32
		for e := 16 * g; e < 16*g+16; e++ {
			s += code(e) * int32(int8(y[kqQ8KQS+e]))
		}
		isum += sc(g) * s
		off += sc(g) * kqI16(y[kqQ8KBsums+2*g:])
	}
	return isum - 32*off
}

// dotQ6KCanon is the Q6_K row dot in the x8 kernels' arithmetic, on a
// plain row: the rows after a matrix's last group of eight, and the
// oracle.
func dotQ6KCanon(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqQ6KSize)
	var acc float32
	for i := 0; i < nb; i++ {
		b := w[i*kqQ6KSize : (i+1)*kqQ6KSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		isum := q6kISum(func(e int) int32 { return q6kCode(b[0:128], b[128:192], e) },
			func(g int) int32 { return int32(int8(b[192+g])) }, y)
		acc = q6kCombine(acc, kqF32(y), kqF16(b[208:]), isum)
	}
	return acc
}

// dotQ6KX8Ref is dot8 in pure Go, reading the x8 layout as the assembly
// does.
func dotQ6KX8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q6kX8Block || len(x) < nb*kqQ8KSize {
		panic("kernels: Q6_K x8 dot operand shorter than its blocks")
	}
	var acc [8]float32
	for i := 0; i < nb; i++ {
		o := w[i*q6kX8Block : (i+1)*q6kX8Block]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		yd := kqF32(y)
		for r := 0; r < 8; r++ {
			code := func(e int) int32 {
				h, s, l := e/128, (e/32)%4, e%32
				k, c := l/4, l%4
				at := q6kX8Chunks + 96*(8*h+k) + 4*r + c
				lo := o[at+32*(s%2)] >> (4 * uint(s/2)) & 0x0f
				hi := o[at+64] >> (2 * uint(s)) & 3
				return int32(lo | hi<<4)
			}
			sc := func(g int) int32 { return int32(int8(o[32*(g/4)+4*r+g%4])) }
			isum := q6kISum(code, sc, y)
			d := quant.F16ToF32(binary.LittleEndian.Uint16(o[q6kX8D+2*r:]))
			acc[r] = q6kCombine(acc[r], yd, d, isum)
		}
	}
	*dst = acc
}
