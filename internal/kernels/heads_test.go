package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"braid/internal/quant"
)

// headsRows is rows x cols random weights of typ, valid in its format.
func headsRows(rng *rand.Rand, typ quant.Type, rows, cols int) Matrix {
	m := Matrix{Type: typ, Rows: rows, Cols: cols}
	switch {
	case slices.Contains(kqTypes, typ):
		m.Data = kqRandWeights(rng, typ, rows*cols/256, "rand")
	case slices.Contains(iqTypes, typ):
		m.Data = iqRandWeights(rng, typ, rows*cols/256, "rand")
	default:
		for r := 0; r < rows; r++ {
			m.Data = append(m.Data, randRow(rng, typ, cols)...)
		}
	}
	return m
}

// TestMatVecHeads: every head's result has the bits of a one-vector MatMul
// of that head alone, for every weight format, with strided inputs and
// outputs or one input for all heads, few heads (several chunks each) and
// many, on 1-3 threads; the values between the heads' outputs are left
// alone.
func TestMatVecHeads(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	types := slices.Concat(myTypes, lowBitTypes, kqTypes, iqTypes)
	for _, threads := range []int{1, 2, 3} {
		p := NewPool(threads)
		for _, typ := range types {
			for _, s := range []struct {
				heads, rows, cols, padX, padD int
				shared                        bool // ldx 0: one vector for every head
			}{
				{1, 37, 512, 0, 0, false}, {3, 16, 256, 64, 5, false}, {20, 24, 512, 7, 3, false},
				{16, 24, 512, 0, 2, true}, {2, 40, 256, 0, 0, true},
			} {
				if s.cols%typ.BlockSize() != 0 {
					continue
				}
				ws := make([]Matrix, s.heads)
				for h := range ws {
					ws[h] = headsRows(rng, typ, s.rows, s.cols)
				}
				ldx, ldd := s.cols+s.padX, s.rows+s.padD
				x := make([]float32, s.heads*ldx)
				if s.shared {
					ldx, x = 0, x[:s.cols]
				}
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, s.heads*ldd)
				const guard = 12345.5
				for i := range dst {
					dst[i] = guard
				}
				p.MatVecHeads(dst, ldd, ws, x, ldx)
				want := make([]float32, s.rows)
				for h := range ws {
					p.MatMul(want, &ws[h], x[h*ldx:h*ldx+s.cols], 1)
					for r, v := range want {
						if got := dst[h*ldd+r]; math.Float32bits(got) != math.Float32bits(v) {
							t.Fatalf("threads=%d %s %d heads of %dx%d: head %d row %d = %g, MatMul gives %g", threads, typ, s.heads, s.rows, s.cols, h, r, got, v)
						}
					}
					for r := s.rows; r < ldd && h*ldd+r < len(dst); r++ {
						if dst[h*ldd+r] != guard {
							t.Fatalf("threads=%d %s: wrote past head %d's %d rows (index %d)", threads, typ, h, s.rows, r)
						}
					}
				}
			}
		}
		p.Close()
	}
}

// TestMatVecHeadsBadShape: heads of different shapes, or buffers too short
// for the strides, are refused naming the numbers (a loader bug, as in
// MatMul: a panic, not a wrong product).
func TestMatVecHeadsBadShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	p := NewPool(2)
	defer p.Close()
	a, b := headsRows(rng, quant.Q8_0, 8, 64), headsRows(rng, quant.Q8_0, 8, 32)
	for _, c := range []struct {
		name string
		run  func()
		msg  string
	}{
		{"shapes differ", func() { p.MatVecHeads(make([]float32, 16), 8, []Matrix{a, b}, make([]float32, 128), 64) }, "head 1 is q8_0 8x32"},
		{"x too short", func() { p.MatVecHeads(make([]float32, 16), 8, []Matrix{a, a}, make([]float32, 100), 64) }, "x has 100 values at stride 64"},
		{"dst stride below rows", func() { p.MatVecHeads(make([]float32, 16), 4, []Matrix{a, a}, make([]float32, 128), 64) }, "dst 16 at stride 4"},
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("%s: no panic", c.name)
				}
				if msg, _ := r.(string); !strings.Contains(strings.ToLower(msg), strings.ToLower(c.msg)) {
					t.Fatalf("%s: panic %q does not say %q", c.name, r, c.msg)
				}
			}()
			c.run()
		}()
	}
}
