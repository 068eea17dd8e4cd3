package quant_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// weightTypes are the formats Quantize supports for weights, with the
// largest RMS error, relative to the data's RMS, allowed on Gaussian data.
// The bounds sit about 20% above what the quantizers reach (measured on
// 16K values; -short uses 2K), roughly 2^-bits*2.6 for the symmetric
// 32-value grids.
var weightTypes = []struct {
	typ   quant.Type
	bound float64
}{
	{quant.F32, 0},
	{quant.F16, 3e-4},
	{quant.BF16, 2e-3},
	{quant.Q8_0, 0.0065},
	{quant.Q8_K, 0.0085},
	{quant.Q6_K, 0.021},
	{quant.Q5_K, 0.043},
	{quant.Q5_1, 0.041},
	{quant.Q5_0, 0.048},
	{quant.Q4_K, 0.085},
	{quant.Q4_1, 0.085},
	{quant.Q4_0, 0.098},
	{quant.IQ4_NL, 0.090},
	{quant.IQ4_XS, 0.090},
	{quant.MXFP4, 0.135},
}

func gaussian(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// relRMSE quantizes x as typ, dequantizes it and returns the RMS error
// relative to the RMS of x.
func relRMSE(t *testing.T, typ quant.Type, x []float32) float64 {
	t.Helper()
	n, err := typ.RowBytes(int64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, n)
	if err := quant.Quantize(typ, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := quant.Dequantize(typ, q, y); err != nil {
		t.Fatal(err)
	}
	var se, ss float64
	for i := range x {
		d := float64(y[i]) - float64(x[i])
		se += d * d
		ss += float64(x[i]) * float64(x[i])
	}
	if ss == 0 {
		return math.Sqrt(se)
	}
	return math.Sqrt(se / ss)
}

func TestQuantizeErrorBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 256 * 64
	if testing.Short() {
		n = 256 * 8
	}
	data := map[string][]float32{
		"N(0,1)":    gaussian(r, n, 1),
		"N(0,0.02)": gaussian(r, n, 0.02),
	}
	for _, wt := range weightTypes {
		for name, x := range data {
			t.Run(wt.typ.String()+"/"+name, func(t *testing.T) {
				e := relRMSE(t, wt.typ, x)
				t.Logf("relative RMSE %.5f (bound %.4f)", e, wt.bound)
				if e > wt.bound {
					t.Errorf("relative RMSE %.5f above bound %.4f", e, wt.bound)
				}
			})
		}
	}
}

// TestQuantizeVsLlama checks, on the reference rows, that each quantizer's
// error is at most 10% above llama.cpp's (no importance matrix) for the
// same rows, row by row.
func TestQuantizeVsLlama(t *testing.T) {
	q := loadRef(t, "quants.gguf")
	f := loadRef(t, "quants-dequant-f32.gguf")
	src := q.f32(t, "source")
	const cols = 512
	for _, wt := range weightTypes {
		name := map[quant.Type]string{quant.Q8_0: "q8_0", quant.Q4_0: "q4_0", quant.Q4_1: "q4_1",
			quant.Q5_0: "q5_0", quant.Q5_1: "q5_1", quant.Q4_K: "q4_K", quant.Q5_K: "q5_K",
			quant.Q6_K: "q6_K", quant.IQ4_NL: "iq4_nl",
			quant.IQ4_XS: "iq4_xs", quant.MXFP4: "mxfp4"}[wt.typ]
		if name == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			ref := f.f32(t, name)
			for r := 0; r < len(src)/cols; r++ {
				x := src[r*cols : (r+1)*cols]
				var se, ss float64
				for i, v := range x {
					d := float64(ref[r*cols+i]) - float64(v)
					se += d * d
					ss += float64(v) * float64(v)
				}
				theirs := math.Sqrt(se / ss)
				ours := relRMSE(t, wt.typ, x)
				t.Logf("row %d: ours %.5f llama.cpp %.5f (%.3fx)", r, ours, theirs, ours/theirs)
				if ours > 1.10*theirs+1e-7 {
					t.Errorf("row %d: relative RMSE %.5f, more than 1.10x llama.cpp's %.5f", r, ours, theirs)
				}
			}
		})
	}
}

// exactCase builds one block of values that typ represents exactly, with
// the block's largest magnitude on an end of the quant grid, which is where
// the quantizers put it.
type exactCase struct {
	typ  quant.Type
	make func(r *rand.Rand) []float32
}

// fromBits returns 8 random finite values of a 16-bit float format whose
// exponent field is expMask.
func fromBits(r *rand.Rand, conv func(uint16) float32, expMask uint16) []float32 {
	x := make([]float32, 8)
	for i := range x {
		b := uint16(r.Uint32())
		if b&expMask == expMask {
			b &^= 0x4000 // keep it finite
		}
		x[i] = conv(b)
	}
	return x
}

func f16Scale(r *rand.Rand) float32 {
	return quant.F16ToF32(quant.F32ToF16(float32(0.001 + r.Float64()*0.1)))
}

// symBlock returns n values d*q, q uniform in [lo, hi], with q = end at a
// random position.
func symBlock(r *rand.Rand, n, lo, hi, end int) []float32 {
	d := f16Scale(r)
	if r.IntN(2) == 0 {
		d = -d
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = d * float32(lo+r.IntN(hi-lo+1))
	}
	x[r.IntN(n)] = d * float32(end)
	return x
}

func asymBlock(r *rand.Rand, nmax int) []float32 {
	d := f16Scale(r)
	m := quant.F16ToF32(quant.F32ToF16(float32(r.NormFloat64())))
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(d*float32(r.IntN(nmax+1))) + m
	}
	x[r.IntN(16)] = m
	x[16+r.IntN(16)] = float32(d*float32(nmax)) + m
	return x
}

func TestQuantizeExactRoundTrip(t *testing.T) {
	for _, tc := range []exactCase{
		{quant.F32, func(r *rand.Rand) []float32 { return gaussian(r, 8, 1) }},
		{quant.F16, func(r *rand.Rand) []float32 { return fromBits(r, quant.F16ToF32, 0x7c00) }},
		{quant.BF16, func(r *rand.Rand) []float32 { return fromBits(r, quant.BF16ToF32, 0x7f80) }},
		{quant.Q8_0, func(r *rand.Rand) []float32 { return symBlock(r, 32, -127, 127, 127*(1-2*r.IntN(2))) }},
		{quant.Q4_0, func(r *rand.Rand) []float32 { return symBlock(r, 32, -8, 7, -8) }},
		{quant.Q4_0, func(r *rand.Rand) []float32 { return symBlock(r, 32, -7, 7, 7) }},
		{quant.Q5_0, func(r *rand.Rand) []float32 { return symBlock(r, 32, -16, 15, -16) }},
		{quant.Q4_1, func(r *rand.Rand) []float32 { return asymBlock(r, 15) }},
		{quant.Q5_1, func(r *rand.Rand) []float32 { return asymBlock(r, 31) }},
		{quant.MXFP4, func(r *rand.Rand) []float32 {
			d := quant.E8M0ToF32Half(uint8(100 + r.IntN(50)))
			x := make([]float32, 32)
			for i := range x {
				x[i] = d * float32(quant.MXFP4Values[r.IntN(16)])
			}
			x[r.IntN(32)] = d * 12
			return x
		}},
		{quant.IQ4_NL, func(r *rand.Rand) []float32 {
			d := quant.F16ToF32(quant.F32ToF16(f16Scale(r) / 64))
			x := make([]float32, 32)
			for i := range x {
				x[i] = d * float32(quant.IQ4NLValues[r.IntN(16)])
			}
			x[r.IntN(32)] = d * -127
			return x
		}},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(tc.typ)))
			for trial := 0; trial < 200; trial++ {
				x := tc.make(r)
				if e := relRMSE(t, tc.typ, x); e != 0 {
					t.Fatalf("trial %d: representable block came back with relative RMSE %g: %v", trial, e, x)
				}
			}
		})
	}
}

// TestQuantizeSpecialBlocks: all-zero blocks must stay zero (no NaN from a
// zero scale) and a constant block must come back close.
func TestQuantizeSpecialBlocks(t *testing.T) {
	for _, wt := range weightTypes {
		t.Run(wt.typ.String(), func(t *testing.T) {
			n := 256
			zero := make([]float32, n)
			if e := relRMSE(t, wt.typ, zero); e != 0 {
				t.Errorf("all-zero input: error %g", e)
			}
			for _, c := range []float32{0.5, -3} {
				x := make([]float32, n)
				for i := range x {
					x[i] = c
				}
				if e := relRMSE(t, wt.typ, x); e > 0.01 {
					t.Errorf("constant %g: relative error %g", c, e)
				}
			}
		})
	}
}

// TestQuantizeHostileInput: NaN, infinities, extremes and subnormals must not
// panic any quantizer, and finite extremes must not turn into NaN.
func TestQuantizeHostileInput(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, typ := range append([]quant.Type{quant.Q8_1}, typesOf(weightTypes)...) {
		for _, tc := range []struct {
			name   string
			v      []float32
			finite bool
		}{
			{"nan", []float32{nan, 1, -2}, false},
			{"inf", []float32{inf, -inf, 3}, false},
			{"huge", []float32{3e38, -3e38, 1}, false},
			{"subnormal", []float32{1e-45, -3e-44, 1e-40}, true},
			{"tiny", []float32{1e-30, -2e-30, 5e-31}, true},
		} {
			t.Run(typ.String()+"/"+tc.name, func(t *testing.T) {
				x := make([]float32, 256)
				for i := range x {
					x[i] = tc.v[i%len(tc.v)]
				}
				nb, _ := typ.RowBytes(256)
				q := make([]byte, nb)
				if err := quant.Quantize(typ, x, q); err != nil {
					t.Fatal(err)
				}
				y := make([]float32, 256)
				if err := quant.Dequantize(typ, q, y); err != nil {
					t.Fatal(err)
				}
				if tc.finite {
					for i, v := range y {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("value %d: %v from finite input %v", i, v, x[i])
						}
					}
				}
			})
		}
	}
}

func typesOf(ws []struct {
	typ   quant.Type
	bound float64
}) []quant.Type {
	var out []quant.Type
	for _, w := range ws {
		out = append(out, w.typ)
	}
	return out
}
