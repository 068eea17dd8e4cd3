package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExactColumns: with SetExactColumns(n), a product of up to n vectors
// gives every vector bit for bit what a product of that vector alone
// gives, for every weight format, including the shared-activation form;
// larger products still use the tiles.
func TestExactColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p := NewPool(2)
	defer p.Close()
	p.SetExactColumns(6)
	for _, typ := range append(myTypes[:len(myTypes):len(myTypes)], lowBitTypes...) {
		cols := 512
		if cols%typ.BlockSize() != 0 {
			continue
		}
		w := randMatrix(rng, typ, 150, cols)
		w2 := randMatrix(rng, typ, 40, cols)
		for _, n := range []int{2, 3, 5, 6} {
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			all, all2 := make([]float32, n*w.Rows), make([]float32, n*w2.Rows)
			p.MatMul(all, w, x, n)
			shared := make([]float32, n*w.Rows)
			p.MatMulShared(x, n, MatOut{Dst: shared, W: w}, MatOut{Dst: all2, W: w2})
			one, one2 := make([]float32, w.Rows), make([]float32, w2.Rows)
			for v := 0; v < n; v++ {
				p.MatMul(one, w, x[v*cols:(v+1)*cols], 1)
				p.MatMul(one2, w2, x[v*cols:(v+1)*cols], 1)
				for r := range one {
					if math.Float32bits(all[v*w.Rows+r]) != math.Float32bits(one[r]) || math.Float32bits(shared[v*w.Rows+r]) != math.Float32bits(one[r]) {
						t.Fatalf("%s n=%d: vector %d row %d: %g (shared %g) in the product, %g alone", typ, n, v, r, all[v*w.Rows+r], shared[v*w.Rows+r], one[r])
					}
				}
				for r := range one2 {
					if math.Float32bits(all2[v*w2.Rows+r]) != math.Float32bits(one2[r]) {
						t.Fatalf("%s n=%d: second product, vector %d row %d differs", typ, n, v, r)
					}
				}
			}
		}
	}
}
