package quant

import (
	"encoding/binary"
	"math"
)

// Weight quantizers. Each fits scales with fitSym/fitAsym, stores them in
// their on-disk precision and then re-derives the levels against the stored
// scales, so that rounding the scales to f16 (or to 6-bit sub-scales) costs as
// little as possible.

func init() {
	quantizers[Q4_0] = quantQ4_0
	quantizers[Q5_0] = quantQ5_0
	quantizers[Q4_1] = quantQ4_1
	quantizers[Q5_1] = quantQ5_1
	quantizers[IQ4_NL] = quantIQ4_NL
	quantizers[Q4_K] = func(src []float32, dst []byte) { quantQ45K(src, dst, 15) }
	quantizers[Q5_K] = func(src []float32, dst []byte) { quantQ45K(src, dst, 31) }
	quantizers[Q6_K] = quantQ6_K
}

// symLevels re-derives levels for the stored scale d.
func symLevels(x []float64, d float32, nmin, nmax int, L []int) {
	if d == 0 {
		clear(L[:len(x)])
		return
	}
	inv := 1 / float64(d)
	for i, v := range x {
		L[i] = clampInt(int(math.RoundToEven(v*inv)), nmin, nmax)
	}
}

// quantSym32 quantizes one 32-value block symmetrically and returns the
// stored f16 scale; L receives levels offset to be non-negative.
func quantSym32(src []float32, nmin, nmax int, L []int) float32 {
	var xb, wb [32]float64
	x := toF64(xb[:], src[:32])
	w := wb[:]
	weightsFor(x, w)
	d := F16ToF32(F32ToF16(float32(fitSym(x, w, nmin, nmax, L))))
	symLevels(x, d, nmin, nmax, L)
	for i := range L[:32] {
		L[i] -= nmin
	}
	return d
}

func quantQ4_0(src []float32, dst []byte) {
	var L [32]int
	for len(src) >= 32 {
		d := quantSym32(src, -8, 7, L[:])
		putF16(dst, d)
		for j := 0; j < 16; j++ {
			dst[2+j] = byte(L[j] | L[j+16]<<4)
		}
		src, dst = src[32:], dst[18:]
	}
}

func quantQ5_0(src []float32, dst []byte) {
	var L [32]int
	for len(src) >= 32 {
		d := quantSym32(src, -16, 15, L[:])
		putF16(dst, d)
		binary.LittleEndian.PutUint32(dst[2:], packQ5(L[:], dst[6:22]))
		src, dst = src[32:], dst[22:]
	}
}

// packQ5 writes the low nibbles of 32 five-bit levels and returns their
// fifth bits as the qh mask (bit j for value j).
func packQ5(L []int, qs []byte) uint32 {
	var qh uint32
	for j := 0; j < 16; j++ {
		qs[j] = byte(L[j]&15 | (L[j+16]&15)<<4)
		qh |= uint32(L[j]>>4&1)<<j | uint32(L[j+16]>>4&1)<<(j+16)
	}
	return qh
}

// quantAsym32 quantizes one 32-value block as d*q + m and returns the stored
// f16 d and m.
func quantAsym32(src []float32, nmax int, L []int) (d, m float32) {
	var xb, wb [32]float64
	var aux [32]int
	x := toF64(xb[:], src[:32])
	w := wb[:]
	weightsFor(x, w)
	s, o := fitAsym(x, w, nmax, false, L, aux[:])
	d = F16ToF32(F32ToF16(float32(s)))
	m = F16ToF32(F32ToF16(float32(o)))
	if d == 0 {
		clear(L[:32])
		return d, m
	}
	inv := 1 / float64(d)
	for i, v := range x {
		L[i] = clampInt(int(math.RoundToEven((v-float64(m))*inv)), 0, nmax)
	}
	return d, m
}

func quantQ4_1(src []float32, dst []byte) {
	var L [32]int
	for len(src) >= 32 {
		d, m := quantAsym32(src, 15, L[:])
		putF16(dst, d)
		putF16(dst[2:], m)
		for j := 0; j < 16; j++ {
			dst[4+j] = byte(L[j] | L[j+16]<<4)
		}
		src, dst = src[32:], dst[20:]
	}
}

func quantQ5_1(src []float32, dst []byte) {
	var L [32]int
	for len(src) >= 32 {
		d, m := quantAsym32(src, 31, L[:])
		putF16(dst, d)
		putF16(dst[2:], m)
		binary.LittleEndian.PutUint32(dst[4:], packQ5(L[:], dst[8:24]))
		src, dst = src[32:], dst[24:]
	}
}

// fitIQ4 fits the scale of a group against the IQ4NLValues codebook: the
// largest magnitude is tried on either end of the codebook (and nearby), each
// candidate refitted by least squares.
func fitIQ4(x, w []float64, L []int) float64 {
	var mx, amax float64
	for _, v := range x {
		if a := math.Abs(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupEps {
		for i := range x {
			L[i] = nearestLevel(&IQ4NLValues, 0)
		}
		return 0
	}
	var best, bestD float64
	found := false
	for k := -10; k <= 10; k++ {
		for _, end := range [2]float64{-127, 113} {
			id := (end + float64(k)) / mx
			var sumqx, sumq2 float64
			for i, v := range x {
				q := float64(IQ4NLValues[nearestLevel(&IQ4NLValues, id*v)])
				sumqx += w[i] * q * v
				sumq2 += w[i] * q * q
			}
			if sumq2 == 0 {
				continue
			}
			if q := sumqx * sumqx / sumq2; !found || q > best {
				best, bestD, found = q, sumqx/sumq2, true
			}
		}
	}
	return bestD
}

// iq4Levels re-derives codebook indices for the stored scale d.
func iq4Levels(x []float64, d float32, L []int) {
	inv := 0.0
	if d != 0 {
		inv = 1 / float64(d)
	}
	for i, v := range x {
		L[i] = nearestLevel(&IQ4NLValues, v*inv)
	}
}

func quantIQ4_NL(src []float32, dst []byte) {
	var xb, wb [32]float64
	var L [32]int
	for len(src) >= 32 {
		x := toF64(xb[:], src[:32])
		weightsFor(x, wb[:])
		d := F16ToF32(F32ToF16(float32(fitIQ4(x, wb[:], L[:]))))
		iq4Levels(x, d, L[:])
		putF16(dst, d)
		for j := 0; j < 16; j++ {
			dst[2+j] = byte(L[j] | L[j+16]<<4)
		}
		src, dst = src[32:], dst[18:]
	}
}

// quantQ45K quantizes Q4_K (nmax 15) or Q5_K (nmax 31): each 32-value
// sub-block gets a fitted scale and non-negative min, both re-expressed as
// 6-bit multiples of the super-block's f16 d and dmin.
func quantQ45K(src []float32, dst []byte, nmax int) {
	var xb, wb [256]float64
	var L [256]int
	var aux [32]int
	var scales, mins [8]float64
	bs := Q4_K.TypeSize()
	if nmax == 31 {
		bs = Q5_K.TypeSize()
	}
	for len(src) >= 256 {
		b := dst[:bs]
		clear(b)
		x := toF64(xb[:], src[:256])
		var maxS, maxM float64
		for j := 0; j < 8; j++ {
			xs, ws := x[32*j:32*j+32], wb[32*j:32*j+32]
			weightsFor(xs, ws)
			s, o := fitAsym(xs, ws, nmax, true, L[32*j:32*j+32], aux[:])
			scales[j], mins[j] = max(s, 0), -o
			maxS, maxM = max(maxS, scales[j]), max(maxM, mins[j])
		}
		d := F16ToF32(F32ToF16(float32(maxS / 63)))
		dmin := F16ToF32(F32ToF16(float32(maxM / 63)))
		putF16(b, d)
		putF16(b[2:], dmin)
		sc := b[4:16]
		for j := 0; j < 8; j++ {
			var ls, lm int
			if d > 0 {
				ls = clampInt(int(math.RoundToEven(scales[j]/float64(d))), 0, 63)
			}
			if dmin > 0 {
				lm = clampInt(int(math.RoundToEven(mins[j]/float64(dmin))), 0, 63)
			}
			if j < 4 {
				sc[j] |= byte(ls)
				sc[j+4] |= byte(lm)
			} else {
				sc[j+4] = byte(ls&15 | (lm&15)<<4)
				sc[j-4] |= byte(ls>>4) << 6
				sc[j] |= byte(lm>>4) << 6
			}
			// Levels against the scale and min as a decoder will see them.
			dl := float64(d * float32(ls))
			dm := float64(dmin * float32(lm))
			for i := 32 * j; i < 32*j+32; i++ {
				if dl == 0 {
					L[i] = 0
					continue
				}
				L[i] = clampInt(int(math.RoundToEven((x[i]+dm)/dl)), 0, nmax)
			}
		}
		if nmax == 15 {
			qs := b[16:144]
			for c := 0; c < 4; c++ {
				for l := 0; l < 32; l++ {
					qs[32*c+l] = byte(L[64*c+l] | L[64*c+l+32]<<4)
				}
			}
		} else {
			qh, qs := b[16:48], b[48:176]
			for c := 0; c < 4; c++ {
				for l := 0; l < 32; l++ {
					l1, l2 := L[64*c+l], L[64*c+l+32]
					qs[32*c+l] = byte(l1&15 | (l2&15)<<4)
					qh[l] |= byte(l1>>4&1)<<(2*c) | byte(l2>>4&1)<<(2*c+1)
				}
			}
		}
		src, dst = src[256:], dst[bs:]
	}
}

// quantQ6_K: sixteen 16-value sub-blocks with symmetric 6-bit levels and
// int8 sub-scales of an f16 d. The sub-scale of largest magnitude maps to
// -128, as in ggml, to use the int8 range fully.
func quantQ6_K(src []float32, dst []byte) {
	var xb, wb [256]float64
	var L [256]int
	var scales [16]float64
	for len(src) >= 256 {
		b := dst[:210]
		clear(b)
		x := toF64(xb[:], src[:256])
		var ms, ams float64
		for j := 0; j < 16; j++ {
			xs, ws := x[16*j:16*j+16], wb[16*j:16*j+16]
			weightsFor(xs, ws)
			scales[j] = fitSym(xs, ws, -32, 31, L[16*j:16*j+16])
			if a := math.Abs(scales[j]); a > ams {
				ams, ms = a, scales[j]
			}
		}
		var d float32
		if ams >= groupEps {
			d = F16ToF32(F32ToF16(float32(ms / -128)))
		}
		putF16(b[208:], d)
		for j := 0; j < 16; j++ {
			var sc int
			if d != 0 {
				sc = clampInt(int(math.RoundToEven(scales[j]/float64(d))), -128, 127)
			}
			b[192+j] = byte(int8(sc))
			symLevels(x[16*j:16*j+16], d*float32(sc), -32, 31, L[16*j:16*j+16])
		}
		for half := 0; half < 2; half++ {
			ql := b[64*half : 64*half+64]
			qh := b[128+32*half : 128+32*half+32]
			l := L[128*half : 128*half+128]
			for i := 0; i < 32; i++ {
				q1, q2, q3, q4 := l[i]+32, l[i+32]+32, l[i+64]+32, l[i+96]+32
				ql[i] = byte(q1&15 | (q3&15)<<4)
				ql[i+32] = byte(q2&15 | (q4&15)<<4)
				qh[i] = byte(q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6)
			}
		}
		src, dst = src[256:], dst[210:]
	}
}
