package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// BenchmarkPrefill is the matrix-matrix product (512 activation vectors) of
// the formats BenchmarkMatMul covers for decode only, at llama.cpp's
// test-backend-ops perf shape m=4096, k=14336 (4096 rows of 14336 values),
// so the two can be compared in one run; F16 and F32 also at 4096x4096.
func BenchmarkPrefill(b *testing.B) {
	p := NewPool(benchThreads())
	defer p.Close()
	shapes := map[quant.Type][][2]int{quant.F16: {{4096, 4096}, {4096, 14336}}, quant.F32: {{4096, 4096}, {4096, 14336}}}
	for _, typ := range myTypes {
		ss := shapes[typ]
		if ss == nil {
			ss = [][2]int{{4096, 14336}}
		}
		for _, s := range ss {
			const n = 512
			b.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, s[0], s[1], n), func(b *testing.B) {
				w := benchMatrix(typ, s[0], s[1])
				x := make([]float32, n*s[1])
				rng := rand.New(rand.NewPCG(1, 1))
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, n*s[0])
				p.MatMul(dst, w, x, n)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p.MatMul(dst, w, x, n)
				}
				b.ReportMetric(2*float64(s[0])*float64(s[1])*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
