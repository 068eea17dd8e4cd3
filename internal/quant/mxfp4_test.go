package quant_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// quantizeMXFP4 quantizes x (a whole number of blocks) and dequantizes it.
func quantizeMXFP4(t *testing.T, x []float32) ([]byte, []float32) {
	t.Helper()
	q := make([]byte, len(x)/32*17)
	if err := quant.Quantize(quant.MXFP4, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := quant.Dequantize(quant.MXFP4, q, y); err != nil {
		t.Fatal(err)
	}
	return q, y
}

// TestMXFP4MatchesLlama: the reference rows (Gaussian, weight-like, uniform
// with outliers, and the edge-case blocks) quantize to exactly the bytes
// ggml_quantize_chunk wrote, so files we write are the ones llama-quantize
// would have.
func TestMXFP4MatchesLlama(t *testing.T) {
	ref := loadRef(t, "quants.gguf")
	src := ref.f32(t, "source")
	want := ref.data(t, "mxfp4")
	got, _ := quantizeMXFP4(t, src)
	if len(got) != len(want) {
		t.Fatalf("%d bytes, llama.cpp wrote %d", len(got), len(want))
	}
	bad := 0
	for b := 0; b < len(got)/17; b++ {
		g, w := got[17*b:17*b+17], want[17*b:17*b+17]
		if !bytes.Equal(g, w) {
			if bad++; bad <= 5 {
				t.Errorf("block %d (row %d): got % x, llama.cpp % x; values %v", b, b*32/512, g, w, src[32*b:32*b+32])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d blocks differ from llama.cpp's", bad, len(got)/17)
	}
}

// mxfp4Block returns 32 values scale*MXFP4Values[random codes] with top as
// the code of the largest magnitude, placed at a random position.
func mxfp4Block(r *rand.Rand, e uint8, top int) []float32 {
	d := quant.E8M0ToF32Half(e)
	x := make([]float32, 32)
	for i := range x {
		k := r.IntN(16)
		for math.Abs(float64(quant.MXFP4Values[k])) > math.Abs(float64(quant.MXFP4Values[top])) {
			k = r.IntN(16)
		}
		x[i] = d * float32(quant.MXFP4Values[k])
	}
	x[r.IntN(32)] = d * float32(quant.MXFP4Values[top])
	return x
}

// TestMXFP4ExactRoundTrip: a block of representable values comes back
// exactly when its largest magnitude is 8 or 12 times the scale (the
// exponent ggml picks is then the block's own), and also when it is 6 or 4:
// the exponent one lower represents every level up to 6 as one twice as
// large. All-zero blocks, including -0, stay zero.
func TestMXFP4ExactRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 39))
	for _, top := range []int{7, 6, 5, 4, 15, 14} {
		for trial := 0; trial < 300; trial++ {
			e := uint8(3 + r.IntN(240))
			x := mxfp4Block(r, e, top)
			_, y := quantizeMXFP4(t, x)
			for i := range x {
				if y[i] != x[i] {
					t.Fatalf("top %d, exponent %d: value %d came back %g, want %g (block %v)",
						quant.MXFP4Values[top], e, i, y[i], x[i], x)
				}
			}
		}
	}
	zero := make([]float32, 64)
	zero[3] = float32(math.Copysign(0, -1))
	q, y := quantizeMXFP4(t, zero)
	for i, v := range y {
		if v != 0 {
			t.Fatalf("zero block: value %d came back %g", i, v)
		}
	}
	if !bytes.Equal(q, make([]byte, len(q))) {
		t.Errorf("zero blocks encode as % x, want all zero bytes (exponent 0, codes +0)", q)
	}
}

// TestMXFP4ErrorBound: on Gaussian and uniform data, each value is within
// half the gap between the two levels around it (the nearest level), or,
// above the top level (12 in the doubled MXFP4Values, whose step is half
// the scale), within 4 steps: the exponent floor(log2 amax)-2 keeps the
// largest value of a block below 16 steps.
func TestMXFP4ErrorBound(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 39))
	n := 32 * 4096
	x := make([]float32, n)
	for i := range x {
		switch i / 32 % 3 {
		case 0:
			x[i] = float32(r.NormFloat64())
		case 1:
			x[i] = float32(r.NormFloat64() * 0.02)
		default:
			x[i] = float32(r.Float64()*2 - 1)
		}
	}
	q, y := quantizeMXFP4(t, x)
	levels := []float64{0, 1, 2, 3, 4, 6, 8, 12}
	var se, ss float64
	for i := range x {
		d := float64(quant.E8M0ToF32Half(q[i/32*17]))
		m := math.Abs(float64(x[i])) / d
		bound := 4.0
		for k := 1; k < len(levels); k++ {
			if m <= levels[k] {
				bound = (levels[k] - levels[k-1]) / 2
				break
			}
		}
		if err := math.Abs(float64(y[i])-float64(x[i])) / d; err > bound {
			t.Fatalf("value %d: %g came back %g, %g steps off (bound %g)", i, x[i], y[i], err, bound)
		}
		if m >= 16 {
			t.Fatalf("value %d: %g is %g steps of its block's scale, the exponent should keep it below 16", i, x[i], m)
		}
		se += (float64(y[i]) - float64(x[i])) * (float64(y[i]) - float64(x[i]))
		ss += float64(x[i]) * float64(x[i])
	}
	// ggml's exponent rule gives about 0.115 on such data.
	if e := math.Sqrt(se / ss); e > 0.13 {
		t.Errorf("relative RMSE %.4f above 0.13", e)
	}
}

// TestMXFP4Exponent: the scale byte for amax at and around powers of two,
// and the clamped extremes.
func TestMXFP4Exponent(t *testing.T) {
	below := func(f float32) float32 { return math.Float32frombits(math.Float32bits(f) - 1) }
	for _, tc := range []struct {
		amax float32
		want uint8
	}{
		{1, 125},              // scale 2^-2: 1 is FP4's 4 (MXFP4Values' 8)
		{1.5, 125},            // FP4's 6, the top level
		{below(2), 125},       // log2 just below 1 stays below it in float32
		{2, 126},              // FP4's 4 again, one exponent up
		{below(1 << 20), 145}, // log2f rounds up to 20, as ggml's float32 log does
		{1 << 20, 145},
		{0.02, 119}, // floor(log2 0.02) = -6
		{1e-40, 0},  // below the smallest scale: clamped
		{float32(math.Inf(1)), 254},
		{math.MaxFloat32, 253}, // log2 rounds up to 128 in float32
	} {
		x := make([]float32, 32)
		x[7] = -tc.amax
		q := make([]byte, 17)
		if err := quant.Quantize(quant.MXFP4, x, q); err != nil {
			t.Fatal(err)
		}
		if q[0] != tc.want {
			t.Errorf("amax %g: exponent %d, want %d", tc.amax, q[0], tc.want)
		}
	}
}

// TestMXFP4Ties: a value halfway between two levels takes the smaller
// magnitude, and one halfway to zero becomes +0, as ggml's search (first
// lowest error over MXFP4Values) decides.
func TestMXFP4Ties(t *testing.T) {
	mids := []float32{0.5, 1.5, 2.5, 3.5, 5, 7, 10}
	want := []byte{0, 1, 2, 3, 4, 5, 6}
	x := make([]float32, 32)
	x[31] = 12 // exponent 128: the step (MXFP4Values' unit) is 1
	for i, m := range mids {
		x[i], x[16+i] = m, -m
	}
	q, _ := quantizeMXFP4(t, x)
	if q[0] != 128 {
		t.Fatalf("exponent %d, want 128", q[0])
	}
	for i := range mids {
		lo, hi := q[1+i]&15, q[1+i]>>4
		wantHi := want[i]
		if wantHi != 0 {
			wantHi |= 8
		}
		if lo != want[i] || hi != wantHi {
			t.Errorf("±%g: codes %d and %d, want %d and %d", mids[i], lo, hi, want[i], wantHi)
		}
	}
}
