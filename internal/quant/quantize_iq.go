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

// mxfp4Sorted is MXFP4Values in ascending order, with the index each level
// has in the codebook, for the nearest-level search.
var mxfp4Sorted, mxfp4Index = func() ([16]int8, [16]int) {
	var v [16]int8
	var idx [16]int
	// Negative levels from -12 up to -1 (indices 15..9), then 0..12 (0..7);
	// index 8 is a second zero (-0) and never chosen. The sixteenth slot
	// repeats the top level, as nearestLevel wants 16 entries.
	order := [16]int{15, 14, 13, 12, 11, 10, 9, 0, 1, 2, 3, 4, 5, 6, 7, 7}
	for i, k := range order {
		v[i], idx[i] = MXFP4Values[k], k
	}
	return v, idx
}()

// quantMXFP4 picks, per 32 values, the power-of-two scale (tried at the
// exponent ggml picks and one either side) that gives the smallest squared
// error, each value taking its nearest FP4 level.
func quantMXFP4(src []float32, dst []byte) {
	for len(src) >= 32 {
		x := src[:32]
		amax := float64(absMax(x))
		e0 := 0
		if amax > 0 {
			e0 = int(math.Floor(math.Log2(amax))) - 2 + 127
		}
		bestE, bestErr := 0, math.Inf(1)
		for e := e0 - 1; e <= e0+1; e++ {
			if e < 0 || e > 254 {
				continue
			}
			d := float64(E8M0ToF32Half(uint8(e)))
			var se float64
			for _, v := range x {
				q := float64(mxfp4Sorted[nearestLevel(&mxfp4Sorted, float64(v)/d)])
				se += (q*d - float64(v)) * (q*d - float64(v))
			}
			if se < bestErr {
				bestE, bestErr = e, se
			}
		}
		dst[0] = byte(bestE)
		d := float64(E8M0ToF32Half(uint8(bestE)))
		for j := 0; j < 16; j++ {
			lo := mxfp4Index[nearestLevel(&mxfp4Sorted, float64(x[j])/d)]
			hi := mxfp4Index[nearestLevel(&mxfp4Sorted, float64(x[j+16])/d)]
			dst[1+j] = byte(lo | hi<<4)
		}
		src, dst = src[32:], dst[17:]
	}
}
