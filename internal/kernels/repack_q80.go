package kernels

import (
	"encoding/binary"
	"math"

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

func packQ80X8(dst, src []byte, nb int) {
	rb := nb * q80Block
	for b := 0; b < nb; b++ {
		o := dst[b*q80X8Block : (b+1)*q80X8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*q80Block : r*rb+(b+1)*q80Block]
			scatter4(o, s[2:], r, 8)
			o[q80X8D+2*r], o[q80X8D+2*r+1] = s[0], s[1]
		}
	}
}

func unpackQ80X8(dst, src []byte, nb int) {
	rb := nb * q80Block
	for b := 0; b < nb; b++ {
		o := src[b*q80X8Block : (b+1)*q80X8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*q80Block : r*rb+(b+1)*q80Block]
			gather4(s[2:], o, r, 8)
			s[0], s[1] = o[q80X8D+2*r], o[q80X8D+2*r+1]
		}
	}
}

// The canonical arithmetic of Q8_0 is the plain AVX2 row dot's
// (vdQ8_0AVX2, llama.cpp's order on x86), not refDotQ8_0's one rounded sum
// a block: each of eight float32 lanes takes the integer sum of four
// values of every block (lane k values 4k..4k+3) times dw*dx, fused, and
// the lanes are added as HSUM_Y0 does. With refDotQ8_0's order (and with
// BRAID_KERNELS=generic) tiny-glm-dsa-Q8_0's logits part from llama.cpp's
// on a near-tie of its sparse attention's top-k (TestGoldenLogits, greedy
// step 31); with this one a repacked matrix gives the plain kernel's bits.

// fma32 is a*b+c rounded once to float32, as VFMADD231PS does: the
// product is exact in float64, the sum is rounded to odd (from its exact
// error, TwoSum) so that rounding it to float32 is not a double rounding.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := float64(p + float64(c))
	bb := float64(s - p)
	e := float64(float64(p-float64(s-bb)) + float64(float64(c)-bb))
	if e != 0 && e == e && math.Float64bits(s)&1 == 0 {
		if (e > 0) == (s > 0) {
			s = math.Float64frombits(math.Float64bits(s) + 1)
		} else {
			s = math.Float64frombits(math.Float64bits(s) - 1)
		}
	}
	return float32(s)
}

// q80Lanes is one row's eight lane sums, the canonical state of a Q8_0
// dot.
type q80Lanes [8]float32

// add takes one block: lane k's integer sum isum[k] times d = dw*dx.
func (l *q80Lanes) add(isum *[8]int32, d float32) {
	for k := range l {
		l[k] = fma32(float32(isum[k]), d, l[k])
	}
}

// sum adds the lanes in HSUM_Y0's tree.
func (l *q80Lanes) sum() float32 {
	a := float32(l[0]+l[4]) + float32(l[2]+l[6])
	b := float32(l[1]+l[5]) + float32(l[3]+l[7])
	return a + b
}

// dotQ80Canon is the Q8_0 row dot in the x8 kernel's arithmetic, on a
// plain row: the rows after a matrix's last group of eight, and the
// oracle.
func dotQ80Canon(n int, w, x []byte) float32 {
	if n%32 != 0 || len(w) < n/32*q80Block || len(x) < n/32*q80Block {
		panic("kernels: Q8_0 dot operand shorter than n values or n not a multiple of 32")
	}
	var acc q80Lanes
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q80Block:(b+1)*q80Block], x[b*q80Block:(b+1)*q80Block]
		var isum [8]int32
		for j := 0; j < 32; j++ {
			isum[j/4] += int32(int8(wb[2+j])) * int32(int8(xb[2+j]))
		}
		acc.add(&isum, float32(kqF16(wb)*kqF16(xb)))
	}
	return acc.sum()
}

// dotQ80X8Ref is dot8 in pure Go, reading the x8 layout as the assembly
// does.
func dotQ80X8Ref(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q80X8Block || len(x) < nb*q80Block {
		panic("kernels: Q8_0 x8 dot operand shorter than its blocks")
	}
	var acc [8]q80Lanes
	for b := 0; b < nb; b++ {
		o := w[b*q80X8Block : (b+1)*q80X8Block]
		xb := x[b*q80Block : (b+1)*q80Block]
		for r := 0; r < 8; r++ {
			var isum [8]int32
			for j := 0; j < 32; j++ {
				isum[j/4] += int32(int8(o[32*(j/4)+4*r+j%4])) * int32(int8(xb[2+j]))
			}
			dw := quant.F16ToF32(binary.LittleEndian.Uint16(o[q80X8D+2*r:]))
			acc[r].add(&isum, float32(dw*kqF16(xb)))
		}
	}
	for r := range dst {
		dst[r] = acc[r].sum()
	}
}
