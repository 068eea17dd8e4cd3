package kernels

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand"
	"testing"

	"braid/internal/quant"
)

// TestX8Q80Extremes: weights and activations at both ends of int8,
// -128 included (which VPMADDUBSW's sign trick gets wrong and Quantize
// never writes), keep the canonical bits in the x8 dots, and the
// canonical dot is the exact sum, rounded.
func TestX8Q80Extremes(t *testing.T) {
	g := x8Generic[quant.Q8_0]
	impls := []*x8Format{g}
	if f := x8Fast[quant.Q8_0]; f != nil {
		impls = append(impls, f)
	}
	const nb = 3
	rb := nb * q80Block
	for _, w := range []int8{-128, -1, 127} {
		for _, a := range []int8{-128, 127} {
			m := make([]byte, 8*rb)
			x := make([]byte, rb)
			for b := 0; b < nb; b++ {
				for r := 0; r < 8; r++ {
					blk := m[r*rb+b*q80Block : r*rb+(b+1)*q80Block]
					// d differs by row so that a row's lane cannot take
					// another's.
					binary.LittleEndian.PutUint16(blk, quant.F32ToF16(float32(r+1)/64))
					for i := 2; i < q80Block; i++ {
						blk[i] = byte(w)
					}
				}
				binary.LittleEndian.PutUint16(x[b*q80Block:], quant.F32ToF16(0.5))
				for i := 2; i < q80Block; i++ {
					x[b*q80Block+i] = byte(a)
				}
			}
			p := make([]byte, len(m))
			packQ80X8(p, m, nb)
			for r := 0; r < 8; r++ {
				want := g.ref(32*nb, m[r*rb:(r+1)*rb], x)
				exact := float64(nb) * 32 * float64(w) * float64(a) * 0.5 * float64(r+1) / 64
				if d := math.Abs(float64(want) - exact); d > 1e-6*math.Abs(exact) {
					t.Fatalf("w %d act %d row %d: canonical %v, exact %v", w, a, r, want, exact)
				}
				for _, f := range impls {
					var out [8]float32
					f.dot8(nb, p, x, &out)
					if math.Float32bits(out[r]) != math.Float32bits(want) {
						t.Fatalf("w %d act %d row %d (%s): %v, canonical %v", w, a, r, f.name, out[r], want)
					}
				}
			}
		}
	}
}

// TestFMA32: fma32 is a*b+c rounded once to float32 (the exact value by
// math/big, rounded to nearest even), on random operands and on sums
// whose float64 rounding ends on a float32 tie that the exact value is
// above (float32(float64(a)*float64(b)+float64(c)) rounds those to even,
// the wrong way).
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	check := func(a, b, c float32) {
		t.Helper()
		x := new(big.Float).SetPrec(400).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		want, _ := x.Float32()
		if got := fma32(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	for i := 0; i < 100000; i++ {
		a := float32(rng.NormFloat64()) * float32(math.Ldexp(1, rng.Intn(40)-20))
		b := float32(rng.NormFloat64()) * float32(math.Ldexp(1, rng.Intn(40)-20))
		c := float32(rng.NormFloat64()) * float32(math.Ldexp(1, rng.Intn(40)-20))
		check(a, b, c)
	}
	// (1+2^-23)(1-2^-24) = 1 + 2^-24 - 2^-47; plus 2^-47 + 2^-70 it is
	// 1 + 2^-24 + 2^-70, which float64 rounds to the tie 1 + 2^-24.
	for _, sgn := range []float32{1, -1} {
		for e := -10; e <= 10; e += 5 {
			sc := float32(math.Ldexp(1, e))
			check(sgn*sc*(1+float32(math.Ldexp(1, -23))), 1-float32(math.Ldexp(1, -24)),
				sgn*sc*float32(math.Ldexp(1, -47)+math.Ldexp(1, -70)))
		}
	}
	check(0, 5, 0)
	check(2, 3, float32(math.Inf(1)))
}

// TestX8Q80PlainBits: where the plain row dot is the AVX2 one, the
// canonical Q8_0 dot (and so a repacked matrix) gives its bits.
func TestX8Q80PlainBits(t *testing.T) {
	impl := implFor(quant.Q8_0)
	if impl.name != "avx2" {
		t.Skipf("the row dot here is %s", impl.name)
	}
	rng := rand.New(rand.NewSource(7))
	for _, cols := range []int{32, 256, 4096} {
		m := randomMatrix(t, quant.Q8_0, 8, cols, rng)
		rb := m.rowBytes()
		for trial := 0; trial < 5; trial++ {
			_, x := randomAct(t, quant.Q8_0, cols, rng)
			for r := 0; r < 8; r++ {
				w := m.Data[r*rb : (r+1)*rb]
				if a, b := dotQ80Canon(cols, w, x), impl.dot(cols, w, x); math.Float32bits(a) != math.Float32bits(b) {
					t.Fatalf("cols %d row %d: canonical %v, AVX2 row dot %v", cols, r, a, b)
				}
			}
		}
	}
}
