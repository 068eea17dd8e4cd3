package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// TestIQMatMul runs the grid and ternary formats through Pool.MatMul, the
// path a model takes (activation conversion to Q8_K, rows split over
// threads, decode and prefill shapes), against a float64 dot of each
// dequantized row with the converted activations.
func TestIQMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, threads := range []int{1, 3} {
		p := NewPool(threads)
		for _, typ := range iqTypes {
			for _, s := range []struct{ rows, cols, n int }{{5, 256, 1}, {37, 768, 1}, {19, 512, 6}} {
				rb, _ := typ.RowBytes(int64(s.cols))
				w := &Matrix{Type: typ, Rows: s.rows, Cols: s.cols, Data: iqRandWeights(r, typ, s.rows*s.cols/256, "rand")}
				x := make([]float32, s.n*s.cols)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				dst := make([]float32, s.n*s.rows)
				p.MatMul(dst, w, x, s.n)
				for j := 0; j < s.n; j++ {
					xa := convAct(quant.Q8_K, x[j*s.cols:(j+1)*s.cols])
					for i := 0; i < s.rows; i++ {
						want, mag := iqDot64(t, typ, w.Data[i*int(rb):(i+1)*int(rb)], xa, s.cols)
						if got := dst[j*s.rows+i]; math.Abs(float64(got)-want) > 2e-6*mag+1e-30 {
							t.Fatalf("threads=%d %s %dx%d n=%d: dst[%d,%d] = %.9g, want %.9g", threads, typ, s.rows, s.cols, s.n, j, i, got, want)
						}
					}
				}
			}
		}
		p.Close()
	}
}
