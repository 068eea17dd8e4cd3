package quant

import (
	"encoding/binary"
	"math"
)

// Q8_0: per 32 values an f16 scale d and 32 int8; value = d*q.
// Q8_1: as Q8_0 plus an f16 s = d*sum(q), which lets a dot product with an
// offset format (Q4_1, Q5_1) add the offset term without touching the quants.
// Q8_K: per 256 values a float32 scale, 256 int8 and 16 int16 sums of 16
// quants each, the activation side of every K-quant dot product.

func init() {
	dequantizers[Q8_0] = dequantQ8_0
	dequantizers[Q8_1] = dequantQ8_1
	dequantizers[Q8_K] = dequantQ8_K
	quantizers[Q8_0] = quantQ8_0
	quantizers[Q8_1] = quantQ8_1
	quantizers[Q8_K] = quantQ8_K
}

func dequantQ8_0(src []byte, dst []float32) {
	for len(src) >= 34 {
		d := f16at(src)
		q := src[2:34]
		out := dst[:32]
		for j := range out {
			out[j] = float32(int8(q[j])) * d
		}
		src, dst = src[34:], dst[32:]
	}
}

func dequantQ8_1(src []byte, dst []float32) {
	for len(src) >= 36 {
		d := f16at(src)
		q := src[4:36]
		out := dst[:32]
		for j := range out {
			out[j] = float32(int8(q[j])) * d
		}
		src, dst = src[36:], dst[32:]
	}
}

func dequantQ8_K(src []byte, dst []float32) {
	for len(src) >= 292 {
		d := f32at(src)
		q := src[4:260]
		out := dst[:256]
		for j := range out {
			out[j] = d * float32(int8(q[j]))
		}
		src, dst = src[292:], dst[256:]
	}
}

// q8Block quantizes 32 values the way ggml's AVX quantize_row_q8_0/q8_1 do:
// the inverse scale is 127/amax (not 1/d) and rounding is to nearest even.
// The scalar reference differs in both, so this is what matches llama.cpp on
// x86. It returns d and the sum of the quants.
func q8Block(x []float32, qs []byte) (d float32, sum int32) {
	amax := absMax(x)
	d = amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	for j, v := range x[:32] {
		q := roundEven(float32(v * id)) // float32(): no fused multiply-add
		q = max(-128, min(127, q))      // the pack instructions saturate
		qs[j] = byte(int8(q))
		sum += q
	}
	return d, sum
}

func quantQ8_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		d, _ := q8Block(src[:32], dst[2:34])
		putF16(dst, d)
		src, dst = src[32:], dst[34:]
	}
}

func quantQ8_1(src []float32, dst []byte) {
	for len(src) >= 32 {
		d, sum := q8Block(src[:32], dst[4:36])
		putF16(dst, d)
		putF16(dst[2:], d*float32(sum))
		src, dst = src[32:], dst[36:]
	}
}

// quantQ8_K follows quantize_row_q8_K_ref, which the x86 backend uses as is:
// the scale comes from the signed value of largest magnitude, so the most
// negative quant is -127, never -128.
func quantQ8_K(src []float32, dst []byte) {
	for len(src) >= 256 {
		x := src[:256]
		// The first value of largest magnitude, compared as bit patterns
		// (for non-negative floats they order like the values); NaNs are
		// skipped, as the float compare of the reference skips them.
		var amax uint32
		at := 0
		for j, v := range x {
			if a := math.Float32bits(v) &^ (1 << 31); a > amax && a <= 0x7f800000 {
				amax, at = a, j
			}
		}
		qs := dst[4:260]
		if amax == 0 {
			clear(dst[:292])
		} else {
			iscale := -127 / x[at]
			for g := 0; g < 16; g++ {
				var s int32
				xg, qg := x[g*16:g*16+16], qs[g*16:g*16+16]
				for j, v := range xg {
					// float32(): the product rounded, never fused with the
					// rounding's add (GOAMD64=v3 and arm64 fuse otherwise).
					q := min(127, roundEven(float32(iscale*v)))
					qg[j] = byte(q)
					s += q
				}
				binary.LittleEndian.PutUint16(dst[260+2*g:], uint16(int16(s)))
			}
			putF32(dst, 1/iscale)
		}
		src, dst = src[256:], dst[292:]
	}
}
