package kernels

import (
	"fmt"
	"math"

	"braid/internal/quant"
)

// The element-wise and attention-loop kernels of a transformer forward pass.
// Each exported function checks lengths once and then runs either the pure-Go
// reference (the *Generic functions below, the test oracle) or the assembly
// for this CPU, as chosen by opsLevel in the per-architecture file. None of
// them allocates.

// OpsSelected names the implementation the element-wise and attention
// kernels of this file run on: "generic", "avx2", "avx512" or "neon".
func OpsSelected() string { return opsLevelName(opsLevel) }

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) * weight, where a nil weight
// means no scale. dst may alias x. As in ggml, the squares are float32
// products summed in float64, and the scale is applied before the weight
// (llama.cpp multiplies by the norm weight in a separate op).
func RMSNorm(dst, x, weight []float32, eps float32) {
	n := len(x)
	if n == 0 {
		return
	}
	dst = dst[:n]
	mean := float32(sumSquares(x) / float64(n))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	if weight == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	weight = weight[:n]
	for i, v := range x {
		dst[i] = float32(v*scale) * weight[i]
	}
}

// sumSquares returns Σ x[i]² with each square rounded to float32 and the sum
// kept in float64.
func sumSquares(x []float32) float64 {
	if opsLevel != opsGeneric {
		return sumSquaresArch(x)
	}
	return sumSquaresGeneric(x)
}

func sumSquaresGeneric(x []float32) float64 {
	var s0, s1 float64
	i := 0
	for ; i+1 < len(x); i += 2 {
		s0 += float64(float32(x[i] * x[i]))
		s1 += float64(float32(x[i+1] * x[i+1]))
	}
	if i < len(x) {
		s0 += float64(float32(x[i] * x[i]))
	}
	return s0 + s1
}

// Rope describes rotary position embedding as ggml's rope op does, YaRN
// included. The zero values of FreqScale and AttnFactor mean 1.
type Rope struct {
	Dims       int     // rotated dimensions per head (n_rot), even; the rest pass through
	Base       float32 // frequency base (rope_freq_base)
	FreqScale  float32 // 1/context-extension factor (linear / YaRN interpolation)
	ExtFactor  float32 // YaRN extrapolation mix; 0 disables YaRN
	AttnFactor float32 // magnitude scale of cos and sin, as llama.cpp passes it to ggml_rope_ext
	BetaFast   float32 // YaRN: rotations at which the ramp starts
	BetaSlow   float32 // YaRN: rotations at which the ramp ends
	OrigCtx    int     // training context length (n_ctx_orig), for YaRN
	// FreqFactors, when set, divides each pair's frequency (llama3's
	// rope_freqs tensor); it has Dims/2 entries.
	FreqFactors []float32
	NeoX        bool // rotate (x[i], x[i+Dims/2]) instead of (x[2i], x[2i+1])
}

// CosSin fills cos[i] and sin[i], i < Dims/2, for position pos. Compute it
// once per position and reuse it for every head and layer that shares the
// Rope.
//
// The arithmetic follows ggml step by step in float32, including the
// running product for theta, so that positions far from zero rotate exactly
// as llama.cpp rotates them.
func (r *Rope) CosSin(pos int, cos, sin []float32) {
	half := r.Dims / 2
	cos = cos[:half]
	sin = sin[:half]
	var ff []float32
	if r.FreqFactors != nil {
		ff = r.FreqFactors[:half]
	}
	freqScale := r.FreqScale
	if freqScale == 0 {
		freqScale = 1
	}
	mscale := r.AttnFactor
	if mscale == 0 {
		mscale = 1
	}
	thetaScale := float32(math.Pow(float64(r.Base), float64(-2/float32(r.Dims))))

	var low, high float32
	ext := r.ExtFactor
	if ext != 0 {
		low, high = r.yarnCorrDims()
		mscale *= 1 + 0.1*opsLogf(1/freqScale)
	}
	span := max(high-low, 0.001)

	theta := float32(pos)
	for i := range half {
		extrap := theta
		if ff != nil {
			extrap = theta / ff[i]
		}
		t := float32(freqScale * extrap)
		if ext != 0 {
			y := (float32(i) - low) / span
			mix := (1 - min(1, max(0, y))) * ext
			t = float32(t*(1-mix)) + float32(extrap*mix)
		}
		s, c := math.Sincos(float64(t))
		cos[i] = float32(c) * mscale
		sin[i] = float32(s) * mscale
		theta *= thetaScale
	}
}

// yarnCorrDims returns the pair indices between which YaRN blends
// interpolation into extrapolation: the dimension where a wavelength makes
// BetaFast (low) and BetaSlow (high) rotations over the original context.
func (r *Rope) yarnCorrDims() (low, high float32) {
	dims := float32(r.Dims)
	corr := func(rot float32) float32 {
		return dims * opsLogf(float32(r.OrigCtx)/(rot*2*math.Pi)) / (2 * opsLogf(r.Base))
	}
	start := float32(math.Floor(float64(corr(r.BetaFast))))
	end := float32(math.Ceil(float64(corr(r.BetaSlow))))
	return max(0, start), min(dims-1, end)
}

func opsLogf(x float32) float32 { return float32(math.Log(float64(x))) }

// Apply rotates one head x in place by the angles of cos and sin (from
// CosSin). Dimensions from Dims on are left untouched.
func (r *Rope) Apply(x []float32, cos, sin []float32) {
	half := r.Dims / 2
	cos = cos[:half]
	sin = sin[:half]
	if r.NeoX {
		lo := x[:half]
		hi := x[half : 2*half]
		for i := range half {
			x0, x1 := lo[i], hi[i]
			c, s := cos[i], sin[i]
			lo[i] = float32(x0*c) - float32(x1*s)
			hi[i] = float32(x0*s) + float32(x1*c)
		}
		return
	}
	x = x[:2*half]
	for i := range half {
		x0, x1 := x[2*i], x[2*i+1]
		c, s := cos[i], sin[i]
		x[2*i] = float32(x0*c) - float32(x1*s)
		x[2*i+1] = float32(x0*s) + float32(x1*c)
	}
}

// Softmax replaces x by exp(x - max) / Σ exp(x - max), with the sum in
// float64 as in ggml. Entries of -Inf become 0; a row that is all -Inf
// becomes NaN, as it does in ggml.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	var acc [8]float64
	if opsLevel != opsGeneric {
		softmaxExpArch(x, m, &acc)
	} else {
		softmaxExpGeneric(x, m, &acc)
	}
	Scale(x, float32(1/softmaxSum(&acc)))
}

// softmaxExpGeneric sets x[i] = expF32(x[i]-m) and adds each to acc[i%8]
// in float64: the exponentials and the sums of the eight-lane assembly,
// bit for bit. The exponential is float32 (as llama.cpp's vector softmax
// is), at a fraction of float64 math.Exp's cost, which was a fifth of a
// decode step at a context of 2048.
func softmaxExpGeneric(x []float32, m float32, acc *[8]float64) {
	for i, v := range x {
		e := expF32(v - m)
		x[i] = e
		acc[i%8] += float64(e)
	}
}

// softmaxSum is the total of softmaxExp's lanes, in a fixed order.
func softmaxSum(acc *[8]float64) float64 {
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

// SiLU replaces each x by x·sigmoid(x).
func SiLU(x []float32) {
	for i, v := range x {
		x[i] = opsSilu(v)
	}
}

func opsSilu(v float32) float32 {
	f := float64(v)
	return float32(f / (1 + math.Exp(-f)))
}

// siluF32 is x·sigmoid(x) in float32 arithmetic with expF32: within a few
// units in the last place of opsSilu (tested), at a fraction of the cost
// of float64 math.Exp, which made SwiGLU a visible share of a batched
// decode step. llama.cpp's vector SiLU is a float32 approximation too.
func siluF32(v float32) float32 {
	return v / (1 + expF32(-v))
}

// expF32 is e^x for float32: x = k·ln2 + r with |r| <= ln2/2 (ln2 split in
// two so that k·ln2 is exact), e^r by a degree-7 polynomial (the Cephes
// expf coefficients, < 1 ulp on that interval), then scaled by 2^k through
// the exponent bits. Every step rounds to float32 (the conversions forbid
// fused multiply-adds), so the AVX-512 SwiGLU, which does the same
// operations lane by lane, gives the same bits.
func expF32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -103.972084: // below the smallest subnormal
		return 0
	}
	k := int32(math.RoundToEven(float64(float32(x * log2e))))
	fk := float32(k)
	r := x - float32(fk*ln2hi)
	r -= float32(fk * ln2lo)
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(float32(p*r)*r) + r
	p++
	// 2^k for k in [-150, 128]: one or two exact power-of-two factors.
	if k > 127 {
		p *= 2
		k--
	}
	if k < -126 {
		p *= 1.0 / (1 << 24) // exact; the product below may then be subnormal
		k += 24
	}
	return p * math.Float32frombits(uint32(k+127)<<23)
}

// GELU replaces each x by the tanh approximation
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the formula of ggml_gelu_f32
// (evaluated directly, not through ggml's optional float16 table).
func GELU(x []float32) {
	const (
		a      = 0.044715
		sqrt2π = 0.79788456080286535587989211986876 // √(2/π)
	)
	for i, v := range x {
		f := float64(v)
		x[i] = float32(0.5 * f * (1 + math.Tanh(sqrt2π*f*(1+a*f*f))))
	}
}

// SwiGLU sets dst = silu(gate) * up; dst may alias either input. SiLU is
// evaluated in float32 (siluF32), the same bits with or without assembly.
func SwiGLU(dst, gate, up []float32) {
	n := len(dst)
	gate = gate[:n]
	up = up[:n]
	if opsLevel != opsGeneric {
		swiGLUArch(dst, gate, up)
		return
	}
	swiGLUGeneric(dst, gate, up)
}

func swiGLUGeneric(dst, gate, up []float32) {
	up = up[:len(dst)]
	gate = gate[:len(dst)]
	for i := range dst {
		dst[i] = siluF32(gate[i]) * up[i]
	}
}

// Add sets dst += x.
func Add(dst, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += x[i]
	}
}

// Mul sets dst *= x element-wise.
func Mul(dst, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] *= x[i]
	}
}

// Scale sets x *= s.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// DotF32 returns Σ a[i]·b[i] over len(a); b must be at least as long.
func DotF32(a, b []float32) float32 {
	b = b[:len(a)]
	if opsLevel != opsGeneric {
		return dotF32Arch(a, b)
	}
	return dotF32Generic(a, b)
}

// DotF16 returns Σ half(a[i])·b[i] over len(a), for a float16 row such as a
// cached key against a float32 query; b must be at least as long.
func DotF16(a []uint16, b []float32) float32 {
	b = b[:len(a)]
	if opsLevel != opsGeneric {
		return dotF16Arch(a, b)
	}
	return dotF16Generic(a, b)
}

// AxpyF32 sets dst += a·x over len(dst); x must be at least as long.
func AxpyF32(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	if opsLevel != opsGeneric {
		axpyF32Arch(dst, a, x)
		return
	}
	axpyF32Generic(dst, a, x)
}

// AxpyF16 sets dst += a·half(x) over len(dst), for accumulating a cached
// float16 value row; x must be at least as long.
func AxpyF16(dst []float32, a float32, x []uint16) {
	x = x[:len(dst)]
	if opsLevel != opsGeneric {
		axpyF16Arch(dst, a, x)
		return
	}
	axpyF16Generic(dst, a, x)
}

// DotF16Rows sets dst[i] = DotF16(k[i*stride:i*stride+len(q)], q) * scale
// for every i < len(dst): one query against len(dst) cached key rows
// stride values apart (the attention scores of one head over a KV block),
// with the same bits as the row-by-row calls and one call for all of them.
func DotF16Rows(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	n, hd := len(dst), len(q)
	if n == 0 {
		return
	}
	if stride < hd || (n-1)*stride+hd > len(k) {
		panic(fmt.Sprintf("kernels: DotF16Rows: %d rows of %d at stride %d need %d values, have %d", n, hd, stride, (n-1)*stride+hd, len(k)))
	}
	if opsLevel != opsGeneric {
		dotF16RowsArch(dst, k, stride, q, scale)
		return
	}
	dotF16RowsGeneric(dst, k, stride, q, scale)
}

func dotF16RowsGeneric(dst []float32, k []uint16, stride int, q []float32, scale float32) {
	for i := range dst {
		dst[i] = dotF16Generic(k[i*stride:i*stride+len(q)], q) * scale
	}
}

// DotF16Rows2 is DotF16Rows for two query vectors of one length against
// the same key rows (two heads sharing a KV head), each with the bits
// DotF16Rows gives it alone; where the CPU allows, each key row is
// converted from half precision once for both.
func DotF16Rows2(dst0, dst1 []float32, k []uint16, stride int, q0, q1 []float32, scale float32) {
	n, hd := len(dst0), len(q0)
	if n == 0 {
		return
	}
	if len(dst1) != n || len(q1) != hd || stride < hd || (n-1)*stride+hd > len(k) {
		panic(fmt.Sprintf("kernels: DotF16Rows2: %d and %d rows of %d and %d values at stride %d, %d key values", n, len(dst1), hd, len(q1), stride, len(k)))
	}
	if opsLevel != opsGeneric {
		dotF16Rows2Arch(dst0, dst1, k, stride, q0, q1, scale)
		return
	}
	dotF16RowsGeneric(dst0, k, stride, q0, scale)
	dotF16RowsGeneric(dst1, k, stride, q1, scale)
}

// AxpyF16Rows adds p[i]·half(v[i*stride:i*stride+len(out)]) into out for
// every i < len(p), in order: the probability-weighted sum of len(p) cached
// value rows, with the same bits as AxpyF16 row by row.
func AxpyF16Rows(out []float32, p []float32, v []uint16, stride int) {
	n, hd := len(p), len(out)
	if n == 0 {
		return
	}
	if stride < hd || (n-1)*stride+hd > len(v) {
		panic(fmt.Sprintf("kernels: AxpyF16Rows: %d rows of %d at stride %d need %d values, have %d", n, hd, stride, (n-1)*stride+hd, len(v)))
	}
	if opsLevel != opsGeneric {
		axpyF16RowsArch(out, p, v, stride)
		return
	}
	axpyF16RowsGeneric(out, p, v, stride)
}

func axpyF16RowsGeneric(out []float32, p []float32, v []uint16, stride int) {
	for i, a := range p {
		axpyF16Generic(out, a, v[i*stride:i*stride+len(out)])
	}
}

// F32ToF16Row converts src to float16 bits in dst, rounding to nearest even
// exactly as quant.F32ToF16 (and the F16C instruction VCVTPS2PH) does.
func F32ToF16Row(dst []uint16, src []float32) {
	src = src[:len(dst)]
	if opsLevel != opsGeneric {
		f32ToF16Arch(dst, src)
		return
	}
	f32ToF16Generic(dst, src)
}

// F16ToF32Row converts float16 bits in src to float32 in dst (exact). The
// assembly versions return signalling NaNs quieted, as the hardware does.
func F16ToF32Row(dst []float32, src []uint16) {
	src = src[:len(dst)]
	if opsLevel != opsGeneric {
		f16ToF32Arch(dst, src)
		return
	}
	f16ToF32Generic(dst, src)
}

// The references. Four float32 partial sums, like a narrow SIMD
// accumulator, keep the generic path usable where no assembly exists.

func dotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+3 < len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16Generic(a []uint16, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+3 < len(a); i += 4 {
		s0 += opsHalfToF32(a[i]) * b[i]
		s1 += opsHalfToF32(a[i+1]) * b[i+1]
		s2 += opsHalfToF32(a[i+2]) * b[i+2]
		s3 += opsHalfToF32(a[i+3]) * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += opsHalfToF32(a[i]) * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyF32Generic(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * x[i]
	}
}

func axpyF16Generic(dst []float32, a float32, x []uint16) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * opsHalfToF32(x[i])
	}
}

func f32ToF16Generic(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = quant.F32ToF16(src[i])
	}
}

func f16ToF32Generic(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = opsHalfToF32(src[i])
	}
}

// Implementation levels of the kernels in this file; opsLevel (per
// architecture) holds the one in use and opsLevels lists those this CPU runs.
const (
	opsGeneric = iota
	opsAVX2    // AVX2 + FMA + F16C, 256-bit
	opsAVX512  // AVX-512F, 512-bit
	opsNEON    // arm64 Advanced SIMD
)

func opsLevelName(l int) string {
	switch l {
	case opsAVX2:
		return "avx2"
	case opsAVX512:
		return "avx512"
	case opsNEON:
		return "neon"
	}
	return "generic"
}

// opsBest returns the first of the levels (ordered best first), or generic
// when BRAID_KERNELS=generic or none is given.
func opsBest(levels []int) int {
	if ForcedGeneric() || len(levels) == 0 {
		return opsGeneric
	}
	return levels[0]
}

// opsHalfToF32 is quant.F16ToF32 with its common case, a normal number,
// inlined: rebias the exponent (15 -> 127) and widen the mantissa.
func opsHalfToF32(h uint16) float32 {
	if e := h & 0x7c00; e != 0 && e != 0x7c00 {
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)+(127-15)<<10)<<13)
	}
	return quant.F16ToF32(h)
}

// SwiGLUOAI sets dst = x·sigmoid(alpha·x)·(y+1) with x = min(gate, limit)
// and y = clamp(up, -limit, limit): gpt-oss's clamped gated activation
// (ggml's swiglu_oai). dst may alias either input. The exponential is
// expF32, as in SwiGLU: float64 math.Exp cost as much as the expert's
// matrix rows on a decode step.
func SwiGLUOAI(dst, gate, up []float32, alpha, limit float32) {
	gate = gate[:len(dst)]
	up = up[:len(dst)]
	for i := range dst {
		x := min(gate[i], limit)
		y := min(max(up[i], -limit), limit)
		g := x / (1 + expF32(-alpha*x))
		dst[i] = g * (y + 1)
	}
}
