package quant

import "math"

// Quantizers for the codebook formats IQ4_XS and MXFP4.

func init() {
	quantizers[IQ4_XS] = quantIQ4_XS
	quantizers[MXFP4] = quantMXFP4
}

// quantIQ4_XS fits each 32-value sub-block's scale against the IQ4_NL
// codebook, then expresses the scales as 6-bit signed multiples (-32..31) of
// an f16 d, the largest magnitude mapping to -32.
func quantIQ4_XS(src []float32, dst []byte) {
	var xb, wb [256]float64
	var L [256]int
	var scales [8]float64
	for len(src) >= 256 {
		b := dst[:136]
		clear(b)
		x := toF64(xb[:], src[:256])
		var ms, ams float64
		for j := 0; j < 8; j++ {
			xs, ws := x[32*j:32*j+32], wb[32*j:32*j+32]
			weightsFor(xs, ws)
			scales[j] = fitIQ4(xs, ws, L[32*j:32*j+32])
			if a := math.Abs(scales[j]); a > ams {
				ams, ms = a, scales[j]
			}
		}
		var d float32
		if ams >= groupEps {
			d = F16ToF32(F32ToF16(float32(ms / -32)))
		}
		putF16(b, d)
		var sh uint16
		for j := 0; j < 8; j++ {
			ls := 0
			if d != 0 {
				ls = clampInt(int(math.RoundToEven(scales[j]/float64(d))), -32, 31)
			}
			u := ls + 32
			b[4+j/2] |= byte(u&15) << (4 * (j % 2))
			sh |= uint16(u>>4) << (2 * j)
			iq4Levels(x[32*j:32*j+32], d*float32(ls), L[32*j:32*j+32])
			q := b[8+16*j : 8+16*j+16]
			for i := 0; i < 16; i++ {
				q[i] = byte(L[32*j+i] | L[32*j+i+16]<<4)
			}
		}
		b[2], b[3] = byte(sh), byte(sh>>8)
		src, dst = src[256:], dst[136:]
	}
}

// quantMXFP4 quantizes as ggml's reference MXFP4 quantizer (the one
// llama-quantize runs; MXFP4 takes no importance matrix), so that a file we
// write holds the bytes llama.cpp would have written: each block's scale is
// 2^(floor(log2 amax) - 2), which puts amax at 4 to 8 times the scale, and
// every value takes its nearest level. FP4's largest level is 6, so that
// exponent clips: an amax above 6 scales lands on 6. Trying the exponent
// above as well would lower the error of such blocks, but the files would no
// longer be llama.cpp's.
func quantMXFP4(src []float32, dst []byte) {
	for len(src) >= 32 {
		e := mxfp4Exponent(absMax(src[:32]))
		dst[0] = e
		s := 2 / float64(E8M0ToF32Half(e))
		for j := 0; j < 16; j++ {
			dst[1+j] = mxfp4Code(src[j], s) | mxfp4Code(src[j+16], s)<<4
		}
		src, dst = src[32:], dst[17:]
	}
}

// mxfp4Exponent is the E8M0 exponent of a block whose largest magnitude is
// amax: floor(log2 amax) - 2 + 127. ggml computes floorf(log2f(amax)) in
// float32, which rounds an amax a few ulps below a power of two up to it;
// only a mantissa near its top can round so, and for those the float64 log
// rounded to float32 decides the same way. ggml leaves the uint8 conversion
// of an out-of-range result undefined (amax below 2^-125, or infinite);
// those clamp here to 0 and 254, the extremes short of E8M0's NaN (255).
func mxfp4Exponent(amax float32) uint8 {
	b := math.Float32bits(amax)
	switch {
	case b < 0x01000000: // zero, subnormal or below 2^-125
		return 0
	case b >= 0x7f800000:
		return 254
	case b&0x7fffff < 0x7f0000: // 1.mantissa < 1.9922: log2 stays 0.0056 below the next integer
		return uint8(b>>23) - 2
	}
	e := math.Floor(float64(float32(math.Log2(float64(amax))))) - 2 + 127
	return uint8(max(0, min(254, e)))
}

// mxfp4Codes maps ceil(2|v|/scale), 0..32, to the FP4 nibble of a
// non-negative v (the second half: of a negative one): the nearest level,
// a tie going to the smaller magnitude, and zero always as +0. That is the
// choice of ggml's search for the first lowest |level*scale - v| over
// MXFP4Values, whose ties are true ties (near a midpoint both differences
// are exact in float32). Twice the midpoints between the magnitudes
// 0 1 2 3 4 6 8 12 are the integers 1 3 5 7 10 14 20, and an integer lies
// below 2|v|/scale exactly when it lies below that ratio's ceiling.
var mxfp4Codes = func() (c [66]byte) {
	mids := []int{1, 3, 5, 7, 10, 14, 20}
	for n := 0; n <= 32; n++ {
		for _, m := range mids {
			if m < n {
				c[n]++
			}
		}
		c[33+n] = c[n]
		if c[n] != 0 {
			c[33+n] |= 8
		}
	}
	return c
}()

// mxfp4Code is the FP4 nibble of v in a block where 2|v|/scale = |v|*s
// (exact: s is a power of two). Every finite value of a block is below 16
// scales, so the ceiling is at most 32. A NaN or infinite v is as far from
// every level, so ggml's search keeps code 0 for it.
func mxfp4Code(v float32, s float64) byte {
	b := math.Float32bits(v)
	if b&^(1<<31) >= 0x7f800000 {
		return 0
	}
	n := min(int(math.Ceil(math.Abs(float64(v))*s)), 32)
	return mxfp4Codes[n+33*int(b>>31)]
}
