package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// BenchmarkExactVerify is the weight side of a speculative verification
// step on one thread: a Q4_K or Q6_K product of 1 vector (plain decode)
// against 5 (1 + 4 drafts) under SetExactColumns(8), by the dot-order
// kernel (mmdot, where the kernel has one) and by the row dot once per
// vector (rowdots, what exact mode ran before those kernels). The ratio
// of the n=5 time to the n=1 time is what a verification step costs in
// decode steps.
func BenchmarkExactVerify(b *testing.B) {
	p := NewPool(1)
	defer p.Close()
	p.SetExactColumns(8)
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K} {
		for _, s := range [][2]int{{2048, 2048}, {8192, 2048}} {
			w := benchMatrix(typ, s[0], s[1])
			impl := implFor(typ)
			rowdots := *impl
			rowdots.mmDot, rowdots.mmDotCols = nil, 0
			for _, c := range []struct {
				name string
				n    int
				impl *dotImpl
			}{{"n=1", 1, impl}, {"n=5/mmdot", 5, impl}, {"n=5/rowdots", 5, &rowdots}} {
				if c.n > 1 && c.impl == impl && impl.mmDot == nil {
					continue
				}
				b.Run(fmt.Sprintf("%s/%dx%d/%s", typ, s[0], s[1], c.name), func(b *testing.B) {
					x := make([]float32, c.n*s[1])
					rng := rand.New(rand.NewPCG(1, 1))
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					dst := make([]float32, c.n*s[0])
					run := func() {
						p.mu.Lock()
						p.actKey = actKey{}
						p.matMulWith(c.impl, dst, w, x, c.n)
						p.actKey, p.actX = actKey{}, nil
						p.mu.Unlock()
					}
					run()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						run()
					}
				})
			}
		}
	}
}

// BenchmarkExactTiles is what one rounding for every vector count would
// cost a prompt: a product of n vectors by the tiles (SetExactColumns off)
// against the dot-order kernel in passes of its column count (the bound
// at n), on one thread, for the formats that still have both (Q6_K with
// AVX-512 VNNI measured 1.09-1.12x its tiles here before its prompts
// took the dot-order kernel).
func BenchmarkExactTiles(b *testing.B) {
	p := NewPool(1)
	defer p.Close()
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		impl := implFor(typ)
		if impl.mmDot == nil || impl.mm == nil && impl.mmWide == nil || impl.exactTiles {
			continue
		}
		w := benchMatrix(typ, 4096, 4096)
		for _, n := range []int{8, 16, 64, 256} {
			x := make([]float32, n*w.Cols)
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, n*w.Rows)
			for _, bound := range []int{0, n} {
				name := "tiles"
				if bound > 0 {
					name = "mmdot"
				}
				b.Run(fmt.Sprintf("%s/n=%d/%s", typ, n, name), func(b *testing.B) {
					p.SetExactColumns(bound)
					defer p.SetExactColumns(0)
					p.MatMul(dst, w, x, n)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						p.MatMul(dst, w, x, n)
					}
				})
			}
		}
	}
}
