package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"braid/internal/quant"
)

// exactBound is the SetExactColumns bound of TestExactEveryFormat: the
// most tokens a verification step of speculative decoding checks at once
// in the benchmarks (1 + 4 drafts) and then some.
const exactBound = 8

// matMulSharedWith is MatMulShared on kernel impl instead of the chosen one.
func matMulSharedWith(p *Pool, impl *dotImpl, x []float32, n int, outs ...MatOut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actKey = actKey{}
	for _, o := range outs {
		p.matMulWith(impl, o.Dst, o.W, x, n)
	}
	p.actKey, p.actX = actKey{}, nil
}

// TestExactEveryFormat is the guarantee speculative verification builds
// on, for every weight format and every kernel this CPU can run (the Go
// reference included): under SetExactColumns(exactBound) a product of n
// vectors, n = 1..exactBound, gives each vector the bits of a product of
// that vector alone, in MatMul and in MatMulShared (activations converted
// once for two matrices). Kernels whose tiles are exact (exactTiles) must
// give the same bits above the bound too, and with no bound at all, as
// workers run them, and so must kernels without tiles (F32 always); the
// others must still be close there (their tiles).
func TestExactEveryFormat(t *testing.T) {
	var types []quant.Type
	types = append(types, myTypes...)
	types = append(types, lowBitTypes...)
	types = append(types, kqTypes...)
	types = append(types, iqTypes...)
	for typ := range generic {
		if !slices.Contains(types, typ) {
			t.Errorf("%s has a kernel but no place in this test", typ)
		}
	}
	p := NewPool(2)
	defer p.Close()
	// More rows than a 64-row chunk, and ragged; fewer under -short (the
	// arm64 run emulates them).
	rows, nmax := 150, exactBound+1
	if testing.Short() {
		rows = 70
	}
	// 512 values: one pass over the blocks; 544: an odd number of
	// 32-value blocks (the 4x4 tiles take even counts only); 2304 (nine
	// 256-value blocks, more than kqSpanBlocks): the K-quant tiles'
	// passes over spans where several columns' activations outgrow one.
	colsList := []int{512, 544, 2304}
	if testing.Short() {
		colsList = colsList[1:]
	}
	for _, typ := range types {
		impls := append([]*dotImpl{generic[typ]}, fast[typ]...)
		for _, impl := range impls {
			// F32 weights (tiny models, a server's batch of their decode
			// steps) keep each vector's bits at any count, bound or not.
			if typ == quant.F32 && !impl.exactTiles && (impl.mm != nil || impl.mmWide != nil) {
				t.Errorf("F32/%s: tiles that round apart from the row dot", impl.name)
			}
			for _, cols := range colsList {
				if cols%typ.BlockSize() != 0 {
					continue
				}
				name := fmt.Sprintf("%s/%s/cols=%d", typ, impl.name, cols)
				rng := rand.New(rand.NewPCG(uint64(typ), uint64(cols)))
				// Weights valid in the format, from the generator each
				// format's own tests use.
				wm, w2m := headsRows(rng, typ, rows, cols), headsRows(rng, typ, 40, cols)
				w, w2 := &wm, &w2m
				x := make([]float32, nmax*cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				// The one-vector products, with and without a bound.
				one := make([]float32, nmax*rows)
				one2 := make([]float32, nmax*w2.Rows)
				differs := false // the tiles of an impl not flagged exact
				for _, bound := range []int{exactBound, 0} {
					p.SetExactColumns(bound)
					for v := 0; v < nmax; v++ {
						xv := x[v*cols : (v+1)*cols]
						got, got2 := make([]float32, rows), make([]float32, w2.Rows)
						matMulSharedWith(p, impl, xv, 1, MatOut{Dst: got, W: w}, MatOut{Dst: got2, W: w2})
						if bound == exactBound {
							copy(one[v*rows:], got)
							copy(one2[v*w2.Rows:], got2)
							continue
						}
						// The bound does not change a one-vector product.
						if i := bitsDiffer(got, one[v*rows:(v+1)*rows]); i >= 0 {
							t.Fatalf("%s: one vector, row %d: %g without a bound, %g with", name, i, got[i], one[v*rows+i])
						}
					}
					for n := 2; n <= nmax; n++ {
						all, all2 := make([]float32, n*rows), make([]float32, n*w2.Rows)
						matMulSharedWith(p, impl, x, n, MatOut{Dst: all, W: w}, MatOut{Dst: all2, W: w2})
						// Without tiles every vector count runs the row
						// dot (or its dot-order kernel): exact at any n.
						exact := impl.exactTiles || n <= bound || impl.mm == nil && impl.mmWide == nil
						for v := 0; v < n; v++ {
							got, want := all[v*rows:(v+1)*rows], one[v*rows:(v+1)*rows]
							got2, want2 := all2[v*w2.Rows:(v+1)*w2.Rows], one2[v*w2.Rows:(v+1)*w2.Rows]
							if exact {
								if i := bitsDiffer(got, want); i >= 0 {
									t.Fatalf("%s bound=%d n=%d: vector %d row %d: %.9g in the product, %.9g alone", name, bound, n, v, i, got[i], want[i])
								}
								if i := bitsDiffer(got2, want2); i >= 0 {
									t.Fatalf("%s bound=%d n=%d: second matrix, vector %d row %d: %.9g in the product, %.9g alone", name, bound, n, v, i, got2[i], want2[i])
								}
								continue
							}
							if bitsDiffer(got, want) >= 0 {
								differs = true
							}
							if i := farApart(got, want); i >= 0 {
								t.Fatalf("%s bound=%d n=%d: vector %d row %d: %.9g in the product, %.9g alone", name, bound, n, v, i, got[i], want[i])
							}
						}
					}
				}
				p.SetExactColumns(0)
				if impl.mmDot != nil {
					t.Logf("%s: a dot-order kernel of up to %d vectors", name, impl.mmDotCols)
				} else if !impl.exactTiles && impl.mm == nil && impl.mmWide == nil {
					t.Logf("%s: no tiles (row dots for every vector)", name)
				} else if !impl.exactTiles {
					t.Logf("%s: tiles, rounding differently from one vector: %v", name, differs)
				}
			}
		}
	}
}

// bitsDiffer is the first index where a and b differ in bits, or -1.
func bitsDiffer(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// farApart is the first index where a and b differ by more than rounding
// (relative to the largest value of b), or -1.
func farApart(a, b []float32) int {
	var big float64
	for _, v := range b {
		big = max(big, math.Abs(float64(v)))
	}
	for i := range a {
		if math.Abs(float64(a[i])-float64(b[i])) > 1e-4*big+1e-30 {
			return i
		}
	}
	return -1
}
