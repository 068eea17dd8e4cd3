package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMulF32 checks MatMulF32 against float64 sums over ragged shapes
// (partial tiles on every side, k with and without a tail of the vector
// width), with strides longer than the rows, overwriting and accumulating,
// and that it leaves the padding between strided rows alone.
func TestMatMulF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	t.Logf("register tiles: %v", f32Tiles() != nil)
	for _, s := range []struct{ n, rows, k int }{{1, 1, 1}, {1, 7, 16}, {6, 4, 128}, {7, 5, 33}, {13, 9, 64}, {64, 64, 128}, {2, 128, 64}, {5, 3, 200}} {
		for _, acc := range []bool{false, true} {
			ldx, ldw, ldd := s.k+3, s.k+5, s.rows+2
			x := make([]float32, s.n*ldx)
			w := make([]float32, s.rows*ldw)
			dst := make([]float32, s.n*ldd)
			for _, a := range [][]float32{x, w, dst} {
				for i := range a {
					a[i] = float32(rng.NormFloat64())
				}
			}
			before := append([]float32(nil), dst...)
			MatMulF32(dst, ldd, x, ldx, s.n, w, ldw, s.rows, s.k, acc)
			for j := 0; j < s.n; j++ {
				for i := 0; i < ldd; i++ {
					got := dst[j*ldd+i]
					if i >= s.rows {
						if got != before[j*ldd+i] {
							t.Fatalf("%+v acc=%v: padding dst[%d,%d] changed to %g", s, acc, j, i, got)
						}
						continue
					}
					var want, mag float64
					if acc {
						want = float64(before[j*ldd+i])
						mag = math.Abs(want)
					}
					for q := 0; q < s.k; q++ {
						p := float64(x[j*ldx+q]) * float64(w[i*ldw+q])
						want += p
						mag += math.Abs(p)
					}
					if math.Abs(float64(got)-want) > 1e-6*mag+1e-30 {
						t.Fatalf("%+v acc=%v: dst[%d,%d] = %.9g, want %.9g", s, acc, j, i, got, want)
					}
				}
			}
		}
	}
}

// TestMatMulF32Bounds: operands too short for the shape are a panic that
// names the shape, never a read past them.
func TestMatMulF32Bounds(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic for an x of 10 values in a 4 x 4 product")
		}
	}()
	MatMulF32(make([]float32, 16), 4, make([]float32, 10), 4, 4, make([]float32, 16), 4, 4, 4, false)
}
