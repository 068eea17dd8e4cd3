package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"braid/internal/quant"
)

var opsLengths = []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 4096 + 3}

// forEachOpsLevel runs f once per implementation this CPU has, assembly
// first, with the exported functions switched to it.
func forEachOpsLevel(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved := opsLevel
	defer func() { opsLevel = saved }()
	for _, l := range append(opsLevels(), opsGeneric) {
		opsLevel = l
		t.Run(opsLevelName(l), f)
	}
}

func opsRandF32(r *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (r.Float32()*2 - 1) * scale
	}
	return x
}

func opsRandF16(r *rand.Rand, n int, scale float32) []uint16 {
	h := make([]uint16, n)
	for i := range h {
		h[i] = quant.F32ToF16((r.Float32()*2 - 1) * scale)
	}
	return h
}

func opsHalves(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, v := range h {
		f[i] = quant.F16ToF32(v)
	}
	return f
}

// dot64 returns the exact-enough dot product and Σ|a·b|, the scale of the
// rounding error any float32 summation order may make.
func opsDot64(a, b []float32) (dot, abs float64) {
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		dot += p
		abs += math.Abs(p)
	}
	return dot, abs
}

func TestOpsSelected(t *testing.T) {
	name := OpsSelected()
	t.Logf("ops kernels: %s (available: %v)", name, opsLevels())
	if ForcedGeneric() && name != "generic" {
		t.Fatalf("BRAID_KERNELS=generic but ops run %s", name)
	}
}

func TestOpsDotF32(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, n := range opsLengths {
			a, b := opsRandF32(r, n, 3), opsRandF32(r, n, 3)
			got := DotF32(a, b)
			ref := dotF32Generic(a, b)
			want, abs := opsDot64(a, b)
			tol := 1e-5*abs + 1e-30
			if math.Abs(float64(got)-want) > tol || math.Abs(float64(got)-float64(ref)) > tol {
				t.Errorf("n=%d: got %g, reference %g, exact %g", n, got, ref, want)
			}
		}
		// Extra length in b is ignored.
		if got := DotF32([]float32{1, 2}, []float32{3, 4, 100}); got != 11 {
			t.Errorf("DotF32 with longer b = %g, want 11", got)
		}
	})
}

func TestOpsDotF16(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, n := range opsLengths {
			a, b := opsRandF16(r, n, 2), opsRandF32(r, n, 3)
			got := DotF16(a, b)
			ref := dotF16Generic(a, b)
			want, abs := opsDot64(opsHalves(a), b)
			tol := 1e-5*abs + 1e-30
			if math.Abs(float64(got)-want) > tol || math.Abs(float64(got)-float64(ref)) > tol {
				t.Errorf("n=%d: got %g, reference %g, exact %g", n, got, ref, want)
			}
		}
	})
}

func TestOpsDotSpecialValues(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		for _, n := range []int{1, 8, 16, 17, 64, 65} {
			for _, pos := range []int{0, n / 2, n - 1} {
				for _, c := range []struct {
					v    float32
					nan  bool
					sign int
				}{
					{float32(math.NaN()), true, 0},
					{float32(math.Inf(1)), false, 1},
					{float32(math.Inf(-1)), false, -1},
				} {
					a := make([]float32, n)
					b := make([]float32, n)
					for i := range a {
						a[i], b[i] = 1, 0.5
					}
					a[pos] = c.v
					h := make([]uint16, n)
					F32ToF16Row(h, a)
					for _, got := range []float32{DotF32(a, b), DotF16(h, b)} {
						g := float64(got)
						if c.nan && !math.IsNaN(g) || !c.nan && !math.IsInf(g, c.sign) {
							t.Errorf("n=%d pos=%d value %g: dot = %g", n, pos, c.v, got)
						}
					}
				}
			}
			zero := make([]float32, n)
			if got := DotF32(zero, zero); got != 0 {
				t.Errorf("n=%d: zero dot = %g", n, got)
			}
		}
	})
}

func TestOpsAxpyF32(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for _, n := range opsLengths {
			dst, x := opsRandF32(r, n, 2), opsRandF32(r, n, 2)
			a := r.Float32()*4 - 2
			orig := append([]float32(nil), dst...)
			AxpyF32(dst, a, x)
			for i := range dst {
				p := float64(a) * float64(x[i])
				want := float64(orig[i]) + p
				if d := math.Abs(float64(dst[i]) - want); d > 2e-7*(math.Abs(float64(orig[i]))+math.Abs(p))+1e-30 {
					t.Fatalf("n=%d i=%d: got %g, want %g", n, i, dst[i], want)
				}
			}
		}
	})
}

func TestOpsAxpyF16(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for _, n := range opsLengths {
			dst, x := opsRandF32(r, n, 2), opsRandF16(r, n, 2)
			xf := opsHalves(x)
			a := r.Float32()*4 - 2
			orig := append([]float32(nil), dst...)
			AxpyF16(dst, a, x)
			for i := range dst {
				p := float64(a) * float64(xf[i])
				want := float64(orig[i]) + p
				if d := math.Abs(float64(dst[i]) - want); d > 2e-7*(math.Abs(float64(orig[i]))+math.Abs(p))+1e-30 {
					t.Fatalf("n=%d i=%d: got %g, want %g", n, i, dst[i], want)
				}
			}
		}
	})
}

// opsF32EdgeValues are float32 inputs where a half conversion can go wrong:
// signed zeros, infinities, NaNs with payloads, the overflow boundary,
// round-to-even ties in the normal and subnormal range, subnormal float32s.
func opsF32EdgeValues() []float32 {
	bits := []uint32{
		0x00000000, 0x80000000, // ±0
		0x7f800000, 0xff800000, // ±inf
		0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0x7fc02000, 0xffffffff, // NaNs
		0x00000001, 0x807fffff, // float32 subnormals: become ±0
		0x33800000, // 2^-24, the smallest half subnormal
		0x33000000, // 2^-25: tie between 0 and 2^-24, rounds to 0
		0x33000001, // just above the tie: rounds up
		0x33c00000, // 1.5·2^-24: tie, rounds to 2·2^-24
		0x38800000, // 2^-14, the smallest half normal
		0x387fc000, // largest half subnormal
		0x387fe000, // tie between largest subnormal and smallest normal
		0x3f801000, // 1 + 2^-11: tie, rounds to 1
		0x3f803000, // 1 + 3·2^-11: tie, rounds up to 1 + 2^-9
		0x3f800fff, // just below a tie
		0x477fe000, // 65504, the largest half
		0x477fefff, // rounds down to 65504
		0x477ff000, // 65520: tie, rounds to infinity
		0xc77ff000, // -65520
		0x7f7fffff, // float32 max
	}
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = math.Float32frombits(b)
	}
	return out
}

func TestOpsF32ToF16Row(t *testing.T) {
	// Every half's exact value, the midpoints to its upper neighbour and one
	// float32 ulp either side of them, then random bit patterns and the edge
	// values, converted as one long row so that every position of the
	// vector loops and of the scalar tail sees them.
	var src []float32
	for h := range 1 << 16 {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		f := quant.F16ToF32(uint16(h))
		src = append(src, f)
		if h&0x7fff != 0x7bff {
			mid := (float64(f) + float64(quant.F16ToF32(uint16(h+1)))) / 2
			m := math.Float32bits(float32(mid))
			src = append(src, math.Float32frombits(m), math.Float32frombits(m-1), math.Float32frombits(m+1))
		}
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 1 << 14 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	edges := opsF32EdgeValues()
	for range 8 {
		src = append(src, edges...)
		src = append(src, 1) // shift the edge values' alignment
	}
	forEachOpsLevel(t, func(t *testing.T) {
		for _, off := range []int{0, 1, 5} {
			s := src[off:]
			dst := make([]uint16, len(s))
			F32ToF16Row(dst, s)
			for i, v := range s {
				if want := quant.F32ToF16(v); dst[i] != want {
					t.Fatalf("F32ToF16Row(%g = %#08x) = %#04x, want %#04x", v, math.Float32bits(v), dst[i], want)
				}
			}
		}
		for _, n := range opsLengths {
			dst := make([]uint16, n+1)
			dst[n] = 0xabcd
			F32ToF16Row(dst[:n], src[:n])
			if dst[n] != 0xabcd {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
	})
}

func TestOpsF16ToF32Row(t *testing.T) {
	src := make([]uint16, 1<<16+3)
	for i := range src {
		src[i] = uint16(i)
	}
	forEachOpsLevel(t, func(t *testing.T) {
		for _, off := range []int{0, 3} {
			s := src[off:]
			dst := make([]float32, len(s)+1)
			dst[len(s)] = 42
			F16ToF32Row(dst[:len(s)], s)
			if dst[len(s)] != 42 {
				t.Fatal("wrote past the end")
			}
			for i, h := range s {
				want := math.Float32bits(quant.F16ToF32(h))
				got := math.Float32bits(dst[i])
				if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
					// NaN: the hardware quiets signalling NaNs; sign and
					// payload stay.
					want |= 0x00400000
					got |= 0x00400000
				}
				if got != want {
					t.Fatalf("F16ToF32Row(%#04x) = %#08x, want %#08x", h, got, want)
				}
			}
		}
	})
}

func TestOpsRMSNorm(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		for _, n := range opsLengths[1:] {
			for _, withWeight := range []bool{false, true} {
				x := opsRandF32(r, n, 4)
				var w []float32
				if withWeight {
					w = opsRandF32(r, n, 2)
				}
				const eps = 1e-6
				var ss float64
				for _, v := range x {
					ss += float64(v) * float64(v)
				}
				scale := 1 / math.Sqrt(ss/float64(n)+eps)
				dst := make([]float32, n)
				RMSNorm(dst, x, w, eps)
				for i := range dst {
					want := float64(x[i]) * scale
					if w != nil {
						want *= float64(w[i])
					}
					if math.Abs(float64(dst[i])-want) > 1e-6*math.Abs(want)+1e-30 {
						t.Fatalf("n=%d weight=%v i=%d: got %g, want %g", n, withWeight, i, dst[i], want)
					}
				}
				// In place gives the same bits.
				RMSNorm(x, x, w, eps)
				for i := range x {
					if x[i] != dst[i] {
						t.Fatalf("n=%d: in-place result differs at %d", n, i)
					}
				}
			}
		}
		// The sum of squares is float64 however it is computed.
		x := opsRandF32(r, 4096+3, 100)
		if got, want := sumSquares(x), sumSquaresGeneric(x); math.Abs(got-want) > 1e-12*want {
			t.Errorf("sumSquares = %.17g, reference %.17g", got, want)
		}
		zero := make([]float32, 17)
		RMSNorm(zero, zero, nil, 1e-5)
		for _, v := range zero {
			if v != 0 {
				t.Fatalf("RMSNorm of zeros = %g", v)
			}
		}
	})
}

func TestOpsSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range opsLengths[1:] {
		x := opsRandF32(r, n, 20)
		if n > 3 {
			x[1] = float32(math.Inf(-1)) // a masked position
		}
		m := math.Inf(-1)
		for _, v := range x {
			m = math.Max(m, float64(v))
		}
		want := make([]float64, n)
		var sum float64
		for i, v := range x {
			// x - max is a float32 subtraction in ggml too; its rounding,
			// not the exponential, dominates the error far below the max.
			want[i] = math.Exp(float64(v - float32(m)))
			sum += want[i]
		}
		Softmax(x)
		var total float64
		for i := range x {
			w := want[i] / sum
			if math.Abs(float64(x[i])-w) > 1e-6*w+1e-30 {
				t.Fatalf("n=%d i=%d: got %g, want %g", n, i, x[i], w)
			}
			total += float64(x[i])
		}
		if math.Abs(total-1) > 1e-5 {
			t.Errorf("n=%d: sum = %g", n, total)
		}
		if n > 3 && x[1] != 0 {
			t.Errorf("masked entry = %g", x[1])
		}
	}
	big := []float32{1000, 1000}
	Softmax(big)
	if big[0] != 0.5 || big[1] != 0.5 {
		t.Errorf("Softmax of large equal values = %v", big)
	}
}

// TestSoftmaxBits: every assembly level gives Softmax the generic code's
// bits at every length (the tail padded through the kernel included), on
// scores with masked (-Inf) entries, huge spreads and a NaN, so a row's
// probabilities never depend on the CPU's level or on where in a vector a
// position falls.
func TestSoftmaxBits(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	var rows [][]float32
	for _, n := range opsLengths[1:] {
		for _, scale := range []float32{1, 30, 200} {
			x := opsRandF32(r, n, scale)
			if n > 5 {
				x[n/2] = float32(math.Inf(-1))
			}
			rows = append(rows, x)
		}
	}
	rows = append(rows, []float32{float32(math.NaN()), 1, 2}, []float32{1e30, -1e30, 0, 3, 4, 5, 6, 7, 8})
	want := make([][]float32, len(rows))
	saved := opsLevel
	opsLevel = opsGeneric
	for i, x := range rows {
		want[i] = slices.Clone(x)
		Softmax(want[i])
	}
	opsLevel = saved
	forEachOpsLevel(t, func(t *testing.T) {
		for i, x := range rows {
			got := slices.Clone(x)
			Softmax(got)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) && !(got[j] != got[j] && want[i][j] != want[i][j]) {
					t.Fatalf("row %d (n=%d) entry %d: %g, generic %g", i, len(x), j, got[j], want[i][j])
				}
			}
		}
	})
}

// TestExpF32 sweeps expF32 over its whole range, the subnormal results and
// the edges included, against math.Exp rounded to float32: at most 2 units
// in the last place.
func TestExpF32(t *testing.T) {
	ulps := func(a, b float32) int64 {
		d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
		return max(d, -d)
	}
	worst := int64(0)
	for x := float32(-104); x < 89; x += 0.000731 {
		got, want := expF32(x), float32(math.Exp(float64(x)))
		if u := ulps(got, want); u > worst {
			worst = u
			if u > 2 {
				t.Fatalf("expF32(%g) = %g (%#x), want %g (%#x): %d ulps", x, got, math.Float32bits(got), want, math.Float32bits(want), u)
			}
		}
	}
	t.Logf("worst error %d ulps", worst)
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {float32(math.Inf(1)), float32(math.Inf(1))}, {float32(math.Inf(-1)), 0}, {89, float32(math.Inf(1))}, {-200, 0},
	} {
		if got := expF32(c.x); got != c.want {
			t.Errorf("expF32(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if got := expF32(float32(math.NaN())); got == got {
		t.Errorf("expF32(NaN) = %g, want NaN", got)
	}
}

// TestOpsSwiGLUExact checks every SwiGLU implementation against the Go
// reference bit for bit: random values over the whole range of the
// exponential, values near its edges (overflow, subnormal results), and
// zeros, infinities and NaNs, at every length the tails handle.
func TestOpsSwiGLUExact(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		88.72284, -88.72284, 88.7228, -88.7229, 87.33654, -87.33655, 103.97208, -103.97208, 104, -104, 1e-30, -1e-30, 5e-39, 1e30, -1e30}
	forEachOpsLevel(t, func(t *testing.T) {
		for _, n := range append(opsLengths, 1<<16+5) {
			gate, up := make([]float32, n), make([]float32, n)
			for i := range gate {
				switch i % 4 {
				case 0:
					gate[i] = special[r.IntN(len(special))]
				case 1:
					gate[i] = (r.Float32()*2 - 1) * 110
				default:
					gate[i] = float32(r.NormFloat64() * 3)
				}
				up[i] = float32(r.NormFloat64())
			}
			got := make([]float32, n)
			SwiGLU(got, gate, up)
			want := make([]float32, n)
			swiGLUGeneric(want, gate, up)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("n=%d: SwiGLU(gate %g, up %g) = %g (%#x), reference %g (%#x)", n, gate[i], up[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	})
}

// TestOpsAttentionRows checks the row loops of attention against the
// single-row kernels called row by row: the same bits, for head sizes with
// and without an assembly loop, strides wider than a row, every level.
func TestOpsAttentionRows(t *testing.T) {
	forEachOpsLevel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(19, 20))
		for _, hd := range []int{16, 64, 100, 128, 256} {
			for _, n := range []int{1, 2, 7, 32, 33} {
				stride := hd * 3 // three KV heads per cached row, head 1 used
				k := opsRandF16(r, n*stride, 2)
				q := opsRandF32(r, hd, 1)
				scale := float32(0.125)
				got := make([]float32, n)
				DotF16Rows(got, k[hd:], stride, q, scale)
				for i := range got {
					want := DotF16(k[hd+i*stride:hd+i*stride+hd], q) * scale
					if math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("hd=%d n=%d: DotF16Rows[%d] = %g, DotF16 row by row %g", hd, n, i, got[i], want)
					}
				}
				// Two vectors at once: each with its DotF16Rows bits.
				q1 := opsRandF32(r, hd, 1)
				got0, got1, want1 := make([]float32, n), make([]float32, n), make([]float32, n)
				DotF16Rows(want1, k[hd:], stride, q1, scale)
				DotF16Rows2(got0, got1, k[hd:], stride, q, q1, scale)
				for i := range got {
					if math.Float32bits(got0[i]) != math.Float32bits(got[i]) || math.Float32bits(got1[i]) != math.Float32bits(want1[i]) {
						t.Fatalf("hd=%d n=%d: DotF16Rows2 row %d = %g, %g; DotF16Rows %g, %g", hd, n, i, got0[i], got1[i], got[i], want1[i])
					}
				}
				p := opsRandF32(r, n, 1)
				out := opsRandF32(r, hd, 1)
				want := append([]float32(nil), out...)
				AxpyF16Rows(out, p, k[hd:], stride)
				for i := range p {
					AxpyF16(want, p[i], k[hd+i*stride:hd+i*stride+hd])
				}
				for j := range out {
					if math.Float32bits(out[j]) != math.Float32bits(want[j]) {
						t.Fatalf("hd=%d n=%d: AxpyF16Rows out[%d] = %g, AxpyF16 row by row %g", hd, n, j, out[j], want[j])
					}
				}
			}
		}
		// Too short a cache is a bug in the caller: it panics, naming sizes.
		func() {
			defer func() {
				if e := recover(); e == nil || !strings.Contains(fmt.Sprint(e), "DotF16Rows") {
					t.Errorf("DotF16Rows past the end: recovered %v", e)
				}
			}()
			DotF16Rows(make([]float32, 4), make([]uint16, 64*3), 64, make([]float32, 64), 1)
		}()
	})
}

func TestOpsActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	x := opsRandF32(r, 1000, 12)
	// A Go literal -0.0 is +0: the negative zero has to be built.
	x = append(x, 0, float32(math.Copysign(0, -1)), 100, -100, 1e-8, float32(math.Inf(1)))
	silu64 := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	gelu := func(v float64) float64 {
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	check := func(name string, got []float32, want func(i int) float64) {
		t.Helper()
		for i, g := range got {
			w := want(i)
			if math.IsInf(w, 0) && float64(g) == w {
				continue
			}
			if math.Abs(float64(g)-w) > 1e-6*math.Abs(w)+1e-37 {
				t.Fatalf("%s(%g) = %g, want %g", name, x[i], g, w)
			}
		}
	}
	s := append([]float32(nil), x...)
	SiLU(s)
	check("SiLU", s, func(i int) float64 { return silu64(float64(x[i])) })
	g := append([]float32(nil), x...)
	GELU(g)
	check("GELU", g, func(i int) float64 { return gelu(float64(x[i])) })
	up := opsRandF32(r, len(x), 3)
	d := make([]float32, len(x))
	SwiGLU(d, x, up)
	check("SwiGLU", d, func(i int) float64 { return silu64(float64(x[i])) * float64(up[i]) })
	// In place over gate.
	gate := append([]float32(nil), x...)
	SwiGLU(gate, gate, up)
	for i := range gate {
		if gate[i] != d[i] && !(math.IsNaN(float64(d[i])) && math.IsNaN(float64(gate[i]))) {
			t.Fatalf("SwiGLU in place differs at %d", i)
		}
	}
	nan := []float32{float32(math.NaN())}
	SiLU(nan)
	if !math.IsNaN(float64(nan[0])) {
		t.Errorf("SiLU(NaN) = %g", nan[0])
	}
}

func TestOpsElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, n := range opsLengths {
		a, b := opsRandF32(r, n, 5), opsRandF32(r, n, 5)
		sum := append([]float32(nil), a...)
		Add(sum, b)
		prod := append([]float32(nil), a...)
		Mul(prod, b)
		sc := append([]float32(nil), a...)
		Scale(sc, 0.25)
		for i := range a {
			if sum[i] != a[i]+b[i] || prod[i] != a[i]*b[i] || sc[i] != a[i]*0.25 {
				t.Fatalf("n=%d i=%d: add %g mul %g scale %g", n, i, sum[i], prod[i], sc[i])
			}
		}
	}
}

// opsRopeTheta64 is the angle of pair i in float64, straight from the
// definitions: the base frequency with its freq factor, then YaRN's blend
// of interpolation and extrapolation.
func opsRopeTheta64(r *Rope, pos, i int) (theta, mscale float64) {
	fs := float64(r.FreqScale)
	if fs == 0 {
		fs = 1
	}
	mscale = float64(r.AttnFactor)
	if mscale == 0 {
		mscale = 1
	}
	extrap := float64(pos) * math.Pow(float64(r.Base), -2*float64(i)/float64(r.Dims))
	if r.FreqFactors != nil {
		extrap /= float64(r.FreqFactors[i])
	}
	theta = fs * extrap
	if r.ExtFactor != 0 {
		corr := func(rot float64) float64 {
			return float64(r.Dims) * math.Log(float64(r.OrigCtx)/(rot*2*math.Pi)) / (2 * math.Log(float64(r.Base)))
		}
		low := math.Max(0, math.Floor(corr(float64(r.BetaFast))))
		high := math.Min(float64(r.Dims-1), math.Ceil(corr(float64(r.BetaSlow))))
		y := (float64(i) - low) / math.Max(0.001, high-low)
		mix := (1 - math.Min(1, math.Max(0, y))) * float64(r.ExtFactor)
		theta = theta*(1-mix) + extrap*mix
		mscale *= 1 + 0.1*math.Log(1/fs)
	}
	return theta, mscale
}

func TestOpsRopeCosSin(t *testing.T) {
	ff := make([]float32, 64)
	for i := range ff {
		ff[i] = 1 + float32(i%7)
	}
	cases := []struct {
		name string
		r    Rope
	}{
		{"llama", Rope{Dims: 128, Base: 10000}},
		{"qwen", Rope{Dims: 128, Base: 1e6, NeoX: true}},
		{"linear", Rope{Dims: 64, Base: 10000, FreqScale: 0.5, AttnFactor: 1}},
		{"freqfactors", Rope{Dims: 128, Base: 500000, FreqFactors: ff}},
		{"yarn", Rope{Dims: 128, Base: 1e6, FreqScale: 0.25, ExtFactor: 1, AttnFactor: 1,
			BetaFast: 32, BetaSlow: 1, OrigCtx: 32768, NeoX: true}},
		{"yarn-half", Rope{Dims: 64, Base: 10000, FreqScale: 0.125, ExtFactor: 0.5, AttnFactor: 0.9,
			BetaFast: 32, BetaSlow: 1, OrigCtx: 4096}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			half := c.r.Dims / 2
			cos, sin := make([]float32, half), make([]float32, half)
			for _, pos := range []int{0, 1, 2, 17, 500, 4095, 30000} {
				c.r.CosSin(pos, cos, sin)
				// ggml's float32 running product for theta drifts by a
				// few float32 ulps of pos·(pair index) radians.
				tol := 1e-6 + 4e-7*float64(pos)
				for i := range half {
					theta, ms := opsRopeTheta64(&c.r, pos, i)
					wc, ws := ms*math.Cos(theta), ms*math.Sin(theta)
					if math.Abs(float64(cos[i])-wc) > tol || math.Abs(float64(sin[i])-ws) > tol {
						t.Fatalf("pos %d pair %d: cos,sin = %g,%g, want %g,%g", pos, i, cos[i], sin[i], wc, ws)
					}
				}
			}
		})
	}
}

func TestOpsRopeYarnRamp(t *testing.T) {
	// With ext_factor 1, pairs below the low correction dim are pure
	// extrapolation (unscaled angle), those above the high one pure
	// interpolation (angle·freq_scale), and cos²+sin² is mscale².
	r := Rope{Dims: 128, Base: 10000, FreqScale: 0.25, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 4096}
	low, high := r.yarnCorrDims()
	if !(low > 0 && high < 63 && low < high) {
		t.Fatalf("corr dims %g %g", low, high)
	}
	plain := Rope{Dims: 128, Base: 10000}
	scaled := Rope{Dims: 128, Base: 10000, FreqScale: 0.25}
	cos, sin := make([]float32, 64), make([]float32, 64)
	pc, ps := make([]float32, 64), make([]float32, 64)
	sc, ss := make([]float32, 64), make([]float32, 64)
	const pos = 300
	r.CosSin(pos, cos, sin)
	plain.CosSin(pos, pc, ps)
	scaled.CosSin(pos, sc, ss)
	ms := float32(1 + 0.1*math.Log(4))
	for i := range 64 {
		norm := math.Hypot(float64(cos[i]), float64(sin[i]))
		if math.Abs(norm-float64(ms)) > 1e-6 {
			t.Fatalf("pair %d: |cos,sin| = %g, want mscale %g", i, norm, ms)
		}
		switch {
		case float32(i) <= low:
			if math.Abs(float64(cos[i]-pc[i]*ms)) > 1e-6 || math.Abs(float64(sin[i]-ps[i]*ms)) > 1e-6 {
				t.Errorf("pair %d below the ramp is not extrapolated", i)
			}
		case float32(i) >= high:
			if math.Abs(float64(cos[i]-sc[i]*ms)) > 1e-6 || math.Abs(float64(sin[i]-ss[i]*ms)) > 1e-6 {
				t.Errorf("pair %d above the ramp is not interpolated", i)
			}
		}
	}
}

func TestOpsRopeApply(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, neox := range []bool{false, true} {
		for _, dims := range []int{128, 64, 32} { // 64, 32: partial rotation of a 128 head
			rp := Rope{Dims: dims, Base: 10000, NeoX: neox}
			half := dims / 2
			cos, sin := make([]float32, half), make([]float32, half)
			for _, pos := range []int{0, 3, 1000} {
				rp.CosSin(pos, cos, sin)
				x := opsRandF32(r, 128, 2)
				orig := append([]float32(nil), x...)
				rp.Apply(x, cos, sin)
				for i := range half {
					a, b := 2*i, 2*i+1
					if neox {
						a, b = i, i+half
					}
					theta, _ := opsRopeTheta64(&rp, pos, i)
					c, s := math.Cos(theta), math.Sin(theta)
					x0, x1 := float64(orig[a]), float64(orig[b])
					w0, w1 := x0*c-x1*s, x0*s+x1*c
					tol := 1e-5 + 1e-6*float64(pos)
					if math.Abs(float64(x[a])-w0) > tol || math.Abs(float64(x[b])-w1) > tol {
						t.Fatalf("neox=%v dims=%d pos=%d pair %d: got %g,%g want %g,%g", neox, dims, pos, i, x[a], x[b], w0, w1)
					}
					n0 := math.Hypot(x0, x1)
					n1 := math.Hypot(float64(x[a]), float64(x[b]))
					if math.Abs(n1-n0) > 1e-6*n0+1e-30 {
						t.Fatalf("neox=%v pair %d: norm %g -> %g", neox, i, n0, n1)
					}
				}
				for i := dims; i < 128; i++ {
					if math.Float32bits(x[i]) != math.Float32bits(orig[i]) {
						t.Fatalf("neox=%v dims=%d: dim %d beyond Dims changed", neox, dims, i)
					}
				}
				if pos == 0 {
					for i := range x {
						if x[i] != orig[i] {
							t.Fatalf("position 0 changed dim %d", i)
						}
					}
				}
			}
		}
	}
}

func TestOpsNoAlloc(t *testing.T) {
	const n = 133
	a, b := make([]float32, n), make([]float32, n)
	h := make([]uint16, n)
	rp := Rope{Dims: 64, Base: 10000, ExtFactor: 1, FreqScale: 0.5, BetaFast: 32, BetaSlow: 1, OrigCtx: 4096}
	cos, sin := make([]float32, 32), make([]float32, 32)
	forEachOpsLevel(t, func(t *testing.T) {
		allocs := testing.AllocsPerRun(10, func() {
			RMSNorm(a, b, a, 1e-5)
			rp.CosSin(7, cos, sin)
			rp.Apply(a, cos, sin)
			Softmax(a)
			SiLU(a)
			GELU(a)
			SwiGLU(a, a, b)
			Add(a, b)
			Mul(a, b)
			Scale(a, 2)
			_ = DotF32(a, b)
			_ = DotF16(h, b)
			AxpyF32(a, 2, b)
			AxpyF16(a, 2, h)
			F32ToF16Row(h, a)
			F16ToF32Row(a, h)
		})
		if allocs != 0 {
			t.Errorf("%v allocations per run", allocs)
		}
	})
}

// Attention over a 4096-position cache at head dim 128: one query against
// every cached key (DotF16) and the weighted sum of every cached value
// (AxpyF16), per implementation.
const opsBenchHeadDim, opsBenchPositions = 128, 4096

func opsBenchLevels(b *testing.B, f func(b *testing.B)) {
	saved := opsLevel
	defer func() { opsLevel = saved }()
	for _, l := range append(opsLevels(), opsGeneric) {
		opsLevel = l
		b.Run(opsLevelName(l), f)
	}
}

func BenchmarkOpsDotF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	k := opsRandF16(r, opsBenchHeadDim*opsBenchPositions, 1)
	q := opsRandF32(r, opsBenchHeadDim, 1)
	scores := make([]float32, opsBenchPositions)
	opsBenchLevels(b, func(b *testing.B) {
		b.SetBytes(int64(len(k) * 2))
		for b.Loop() {
			for p := range scores {
				scores[p] = DotF16(k[p*opsBenchHeadDim:(p+1)*opsBenchHeadDim], q)
			}
		}
	})
}

func BenchmarkOpsAxpyF16(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	v := opsRandF16(r, opsBenchHeadDim*opsBenchPositions, 1)
	w := opsRandF32(r, opsBenchPositions, 1)
	out := make([]float32, opsBenchHeadDim)
	opsBenchLevels(b, func(b *testing.B) {
		b.SetBytes(int64(len(v) * 2))
		for b.Loop() {
			clear(out)
			for p, a := range w {
				AxpyF16(out, a, v[p*opsBenchHeadDim:(p+1)*opsBenchHeadDim])
			}
		}
	})
}

func BenchmarkOpsDotF32(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	k := opsRandF32(r, opsBenchHeadDim*opsBenchPositions, 1)
	q := opsRandF32(r, opsBenchHeadDim, 1)
	scores := make([]float32, opsBenchPositions)
	opsBenchLevels(b, func(b *testing.B) {
		b.SetBytes(int64(len(k) * 4))
		for b.Loop() {
			for p := range scores {
				scores[p] = DotF32(k[p*opsBenchHeadDim:(p+1)*opsBenchHeadDim], q)
			}
		}
	})
}

func BenchmarkOpsRopeCosSin(b *testing.B) {
	r := Rope{Dims: 128, Base: 1e6}
	cos, sin := make([]float32, 64), make([]float32, 64)
	for i := 0; b.Loop(); i++ {
		r.CosSin(i&4095, cos, sin)
	}
}

func BenchmarkOpsSoftmax4096(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	x := opsRandF32(r, opsBenchPositions, 10)
	y := make([]float32, len(x))
	for b.Loop() {
		copy(y, x)
		Softmax(y)
	}
}

func BenchmarkOpsSiLU4096(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	x := opsRandF32(r, opsBenchPositions, 10)
	y := make([]float32, len(x))
	for b.Loop() {
		copy(y, x)
		SiLU(y)
	}
}

// TestSwiGLUOAI checks gpt-oss's clamped activation against the formula in
// float64: x = min(g, limit), y = clamp(u, ±limit), x·σ(αx)·(y+1), the
// clamps included (values beyond ±limit on both inputs), aliasing dst and
// gate.
func TestSwiGLUOAI(t *testing.T) {
	const alpha, limit = 1.702, 7.0
	rng := rand.New(rand.NewPCG(7, 9))
	n := 1000
	gate, up := make([]float32, n), make([]float32, n)
	for i := range gate {
		gate[i] = float32(rng.NormFloat64() * 6)
		up[i] = float32(rng.NormFloat64() * 6)
	}
	gate[0], up[0] = 30, -30 // both clamped
	want := make([]float64, n)
	for i := range want {
		x := math.Min(float64(gate[i]), limit)
		y := math.Min(math.Max(float64(up[i]), -limit), limit)
		want[i] = x / (1 + math.Exp(-alpha*x)) * (y + 1)
	}
	SwiGLUOAI(gate, gate, up, alpha, limit)
	for i := range want {
		if d := math.Abs(float64(gate[i]) - want[i]); d > 1e-5*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("value %d: %g, want %g", i, gate[i], want[i])
		}
	}
	if got := float64(gate[0]); math.Abs(got-7/(1+math.Exp(-alpha*7))*(-6)) > 1e-4 {
		t.Errorf("clamped value %g, want x=7, y=-7", got)
	}
}

// BenchmarkOpsAttnRowsF16 is one (token, head) of decode attention over a
// cached context of F16 keys and values, as the model calls it: the
// scores against every key row (DotF16Rows), then the probability-weighted
// sum of the value rows (AxpyF16Rows), rows a KV width apart (8 heads of
// 64 or 128 values).
func BenchmarkOpsAttnRowsF16(b *testing.B) {
	const positions = 2048
	for _, hd := range []int{64, 128} {
		stride := 8 * hd
		r := rand.New(rand.NewPCG(3, uint64(hd)))
		k, v := opsRandF16(r, stride*positions, 1), opsRandF16(r, stride*positions, 1)
		q, p := opsRandF32(r, hd, 1), opsRandF32(r, positions, 1)
		scores, out := make([]float32, positions), make([]float32, hd)
		b.Run(fmt.Sprintf("hd=%d", hd), func(b *testing.B) {
			opsBenchLevels(b, func(b *testing.B) {
				b.Run("dot", func(b *testing.B) {
					for b.Loop() {
						DotF16Rows(scores, k, stride, q, 0.125)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*positions), "ns/row")
				})
				b.Run("dot2", func(b *testing.B) {
					s1 := make([]float32, positions)
					for b.Loop() {
						DotF16Rows2(scores, s1, k, stride, q, p[:hd], 0.125)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N*positions), "ns/row")
				})
				b.Run("axpy", func(b *testing.B) {
					for b.Loop() {
						clear(out)
						AxpyF16Rows(out, p, v, stride)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*positions), "ns/row")
				})
			})
		})
	}
}
