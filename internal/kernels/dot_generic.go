package kernels

import (
	"encoding/binary"
	"math"

	"braid/internal/quant"
)

// The pure-Go reference dot products. Each follows the scalar loop of
// llama.cpp's ggml_vec_dot_<type>_<act>_generic: integer sums inside a block,
// then one float32 multiply-add per block with the product of the two block
// scales. They are the oracle for the assembly versions, so they favour
// clarity over speed.

func init() {
	registerGeneric(quant.F32, &dotImpl{name: "generic", act: quant.F32, dot: refDotF32})
	registerGeneric(quant.F16, &dotImpl{name: "generic", act: quant.F16, dot: refDotF16})
	registerGeneric(quant.BF16, &dotImpl{name: "generic", act: quant.BF16, dot: refDotBF16})
	registerGeneric(quant.Q8_0, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotQ8_0})
	registerGeneric(quant.Q4_0, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotQ4_0})
	registerGeneric(quant.Q4_1, &dotImpl{name: "generic", act: quant.Q8_1, dot: refDotQ4_1})
	registerGeneric(quant.Q5_0, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotQ5_0})
	registerGeneric(quant.Q5_1, &dotImpl{name: "generic", act: quant.Q8_1, dot: refDotQ5_1})
	registerGeneric(quant.IQ4_NL, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotIQ4NL})
	registerGeneric(quant.MXFP4, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotMXFP4})
	registerGeneric(quant.Q1_0, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotQ1_0})
	registerGeneric(quant.Q2_0, &dotImpl{name: "generic", act: quant.Q8_0, dot: refDotQ2_0})
}

func f16(b []byte) float32  { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }
func bf16(b []byte) float32 { return quant.BF16ToF32(binary.LittleEndian.Uint16(b)) }
func f32(b []byte) float32  { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// Float dots accumulate in float64, as ggml's scalar vec_dot_f16 does
// (ggml_float); the SIMD versions use float32 lanes and differ in the last
// bits.

func refDotF32(n int, w, x []byte) float32 {
	var s float64
	for i := 0; i < n; i++ {
		s += float64(f32(w[4*i:])) * float64(f32(x[4*i:]))
	}
	return float32(s)
}

func refDotF16(n int, w, x []byte) float32 {
	var s float64
	for i := 0; i < n; i++ {
		s += float64(f16(w[2*i:])) * float64(f16(x[2*i:]))
	}
	return float32(s)
}

func refDotBF16(n int, w, x []byte) float32 {
	var s float64
	for i := 0; i < n; i++ {
		s += float64(bf16(w[2*i:])) * float64(bf16(x[2*i:]))
	}
	return float32(s)
}

func refDotQ8_0(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[34*b:34*b+34], x[34*b:34*b+34]
		var sumi int32
		for j := 0; j < 32; j++ {
			sumi += int32(int8(wb[2+j])) * int32(int8(xb[2+j]))
		}
		s += float32(sumi) * (f16(wb) * f16(xb))
	}
	return s
}

// refDotQ4_0 is the Q4_0 reference: the x8 kernels' canonical arithmetic
// (dotQ40Canon: each block's exact sum times d*dx, fusion-proof).
func refDotQ4_0(n int, w, x []byte) float32 { return dotQ40Canon(n, w, x) }

// Q4_1 and Q5_1 values are d*q + m; the m term needs the activation block's
// sum, which Q8_1 carries precomputed as s = d*sum(q).
func refDotQ4_1(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[20*b:20*b+20], x[36*b:36*b+36]
		var sumi int32
		for j := 0; j < 16; j++ {
			q := wb[4+j]
			sumi += int32(q&15) * int32(int8(xb[4+j]))
			sumi += int32(q>>4) * int32(int8(xb[20+j]))
		}
		s += float32(sumi)*(f16(wb)*f16(xb)) + f16(wb[2:])*f16(xb[2:])
	}
	return s
}

// Q5 formats keep the fifth bit of value j in bit j of a 32-bit word qh.
func refDotQ5_0(n int, w, x []byte) float32 { return dotQ50Canon(n, w, x) }

func refDotQ5_1(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[24*b:24*b+24], x[36*b:36*b+36]
		qh := binary.LittleEndian.Uint32(wb[4:])
		var sumi int32
		for j := 0; j < 16; j++ {
			q := wb[8+j]
			lo := int32(q&15) | int32((qh>>j)&1)<<4
			hi := int32(q>>4) | int32((qh>>(j+16))&1)<<4
			sumi += lo * int32(int8(xb[4+j]))
			sumi += hi * int32(int8(xb[20+j]))
		}
		s += float32(sumi)*(f16(wb)*f16(xb)) + f16(wb[2:])*f16(xb[2:])
	}
	return s
}

// iq4nlValues is the non-linear 4-bit codebook of IQ4_NL (and IQ4_XS).
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func refDotIQ4NL(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[18*b:18*b+18], x[34*b:34*b+34]
		var sumi int32
		for j := 0; j < 16; j++ {
			q := wb[2+j]
			sumi += int32(iq4nlValues[q&15]) * int32(int8(xb[2+j]))
			sumi += int32(iq4nlValues[q>>4]) * int32(int8(xb[18+j]))
		}
		s += float32(sumi) * (f16(wb) * f16(xb))
	}
	return s
}

// mxfp4Values are the FP4 (E2M1) values doubled, so they are integers; the
// block scale is halved to compensate (e8m0Half).
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half returns 2^(e-127) / 2, the MXFP4 block scale with the halving
// that pairs with mxfp4Values; exponents 0 and 1 give float32 subnormals.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func refDotMXFP4(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[17*b:17*b+17], x[34*b:34*b+34]
		var sumi int32
		for j := 0; j < 16; j++ {
			q := wb[1+j]
			sumi += int32(mxfp4Values[q&15]) * int32(int8(xb[2+j]))
			sumi += int32(mxfp4Values[q>>4]) * int32(int8(xb[18+j]))
		}
		s += f16(xb) * e8m0Half(wb[0]) * float32(sumi)
	}
	return s
}

// Q1_0 and Q2_0 blocks (128 and 64 values) span four and two Q8_0
// activation blocks; each 32-value part is summed in integers and scaled by
// its own activation scale, as the activation blocks dictate.

// refDotQ1_0: a set bit is +d, a clear one -d, so each activation enters
// the integer sum with its sign chosen by the bit.
func refDotQ1_0(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/128; b++ {
		wb := w[18*b : 18*b+18]
		d := f16(wb)
		for k := 0; k < 4; k++ {
			xb := x[34*(4*b+k) : 34*(4*b+k)+34]
			bits := wb[2+4*k : 6+4*k]
			var sumi int32
			for j := 0; j < 32; j++ {
				q := int32(int8(xb[2+j]))
				if bits[j/8]>>(j%8)&1 == 0 {
					q = -q
				}
				sumi += q
			}
			s += float32(sumi) * (d * f16(xb))
		}
	}
	return s
}

// refDotQ2_0: code q stands for q-1, four codes per byte from the low bits.
func refDotQ2_0(n int, w, x []byte) float32 {
	var s float32
	for b := 0; b < n/64; b++ {
		wb := w[18*b : 18*b+18]
		d := f16(wb)
		for k := 0; k < 2; k++ {
			xb := x[34*(2*b+k) : 34*(2*b+k)+34]
			qs := wb[2+8*k : 10+8*k]
			var sumi int32
			for j := 0; j < 32; j++ {
				q := int32(qs[j/4]>>(2*(j%4))&3) - 1
				sumi += q * int32(int8(xb[2+j]))
			}
			s += float32(sumi) * (d * f16(xb))
		}
	}
	return s
}

// readSumGeneric sums a slice with independent accumulators so the loop is
// bound by loads, not by the adds' latency.
func readSumGeneric(a []int64) int64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 int64
	for len(a) >= 8 {
		s0 += a[0]
		s1 += a[1]
		s2 += a[2]
		s3 += a[3]
		s4 += a[4]
		s5 += a[5]
		s6 += a[6]
		s7 += a[7]
		a = a[8:]
	}
	for _, v := range a {
		s0 += v
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

// readSum is the memory-read loop of BenchmarkMemRead; assembly replaces it
// where plain Go loads would not keep up with the memory system.
var readSum = readSumGeneric
