package quant

import "math"

// Scale fitting for the weight quantizers. These need not reproduce
// llama.cpp's bytes (its quantizers are searches whose exact path is an
// implementation detail); they aim for a small weighted squared error with a
// short search over candidate scales and a least-squares refit of each
// candidate, in float64.

// groupEps is the magnitude below which a group counts as all zero; smaller
// scales would underflow f16 anyway.
const groupEps = 1e-15

// fitSym finds d and integer levels L[i] in [nmin, nmax] minimising
// sum w[i]*(x[i] - d*L[i])^2. The signed value of largest magnitude is mapped
// to either end of the range and a little beyond (so that clipping one
// outlier can buy precision for the rest), and d is refitted by least squares
// for each candidate. A block whose largest magnitude sits on an end of the
// grid (x = d*q with q = nmin or nmax among them) is recovered exactly.
func fitSym(x, w []float64, nmin, nmax int, L []int) float64 {
	var mx, amax float64
	for _, v := range x {
		if a := math.Abs(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupEps {
		clear(L[:len(x)])
		return 0
	}
	var best, bestD float64
	found := false
	try := func(target float64) {
		iscale := target / mx
		var sumlx, suml2 float64
		for i, v := range x {
			l := clampInt(int(math.RoundToEven(iscale*v)), nmin, nmax)
			sumlx += w[i] * v * float64(l)
			suml2 += w[i] * float64(l*l)
		}
		if suml2 == 0 {
			return
		}
		// The error is sum w x^2 - sumlx^2/suml2, so maximise the quotient.
		if q := sumlx * sumlx / suml2; !found || q > best {
			best, bestD, found = q, sumlx/suml2, true
		}
	}
	for k := -5; k <= 10; k++ {
		try(float64(nmin) + 0.1*float64(k))
		try(float64(nmax) - 0.1*float64(k))
	}
	if !found {
		clear(L[:len(x)])
		return 0
	}
	return bestD
}

// fitAsym finds scale and offset with x[i] ~ scale*L[i] + offset, L[i] in
// [0, nmax], minimising the weighted squared error. With nonPosOffset the
// offset is kept <= 0, as the K-quants store it as a subtracted minimum.
// Each candidate grid spans [min, max] with a slightly varied level count and
// gets a joint least-squares refit of scale and offset.
func fitAsym(x, w []float64, nmax int, nonPosOffset bool, L, aux []int) (scale, offset float64) {
	lo, hi := x[0], x[0]
	var sw, swx float64
	for i, v := range x {
		lo, hi = min(lo, v), max(hi, v)
		sw += w[i]
		swx += w[i] * v
	}
	if nonPosOffset && lo > 0 {
		lo = 0
	}
	n := len(x)
	if hi-lo < groupEps {
		clear(L[:n])
		return 0, lo
	}
	errOf := func(s, o float64, l []int) float64 {
		var e float64
		for i, v := range x {
			d := s*float64(l[i]) + o - v
			e += w[i] * d * d
		}
		return e
	}
	scale, offset = (hi-lo)/float64(nmax), lo
	for i, v := range x {
		L[i] = clampInt(int(math.RoundToEven((v-lo)/scale)), 0, nmax)
	}
	bestErr := errOf(scale, offset, L)
	for k := 0; k <= 20; k++ {
		iscale := (float64(nmax) - 1 + 0.1*float64(k)) / (hi - lo)
		var sl, sl2, sxl float64
		for i, v := range x {
			l := clampInt(int(math.RoundToEven(iscale*(v-lo))), 0, nmax)
			aux[i] = l
			sl += w[i] * float64(l)
			sl2 += w[i] * float64(l*l)
			sxl += w[i] * float64(l) * v
		}
		D := sw*sl2 - sl*sl
		if D <= 0 {
			continue
		}
		s := (sw*sxl - swx*sl) / D
		o := (sl2*swx - sl*sxl) / D
		if nonPosOffset && o > 0 {
			o, s = 0, sxl/sl2
		}
		if e := errOf(s, o, aux); e < bestErr {
			bestErr, scale, offset = e, s, o
			copy(L[:n], aux[:n])
		}
	}
	return scale, offset
}

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

// nearestLevel returns the index of the level of vals (sorted ascending)
// closest to x.
func nearestLevel(vals *[16]int8, x float64) int {
	lo, hi := 0, 15
	if x <= float64(vals[0]) {
		return 0
	}
	if x >= float64(vals[15]) {
		return 15
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x < float64(vals[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if x-float64(vals[lo]) <= float64(vals[hi])-x {
		return lo
	}
	return hi
}

// weightsFor fills w with the importance ggml gives values when it has no
// importance matrix: the group's RMS plus |x|, so large weights, which
// dominate a dot product, are fitted more closely.
func weightsFor(x, w []float64) {
	var s float64
	for _, v := range x {
		s += v * v
	}
	rms := math.Sqrt(s / float64(len(x)))
	for i, v := range x {
		w[i] = rms + math.Abs(v)
	}
}

func toF64(dst []float64, src []float32) []float64 {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float64(v)
	}
	return dst
}
