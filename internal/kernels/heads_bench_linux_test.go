package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"braid/internal/quant"
)

// BenchmarkMatVecHeads times DeepSeek-V3's per-head decode products, six
// layers' worth of weights so they stream from memory as in a step: k_b
// (128 heads of 512x128, Q5_0 in a Q4_K_M file) and v_b (128 heads of
// 128x512, Q4_K), as one MatVecHeads ("heads") against one MatMul per head
// ("matmul"), on 1 and 2 threads. cpu-ns/op is the benchmark thread's CPU
// time per layer: at one thread steadier than wall time on a shared
// machine; at two it leaves out the other thread.
func BenchmarkMatVecHeads(b *testing.B) {
	const heads, layers = 128, 6
	rng := rand.New(rand.NewPCG(31, 32))
	for _, s := range []struct {
		name       string
		typ        quant.Type
		rows, cols int
	}{{"k_b", quant.Q5_0, 512, 128}, {"v_b", quant.Q4_K, 128, 512}} {
		ws := make([][]Matrix, layers)
		for l := range ws {
			ws[l] = make([]Matrix, heads)
			for h := range ws[l] {
				ws[l][h] = headsRows(rng, s.typ, s.rows, s.cols)
			}
		}
		x := make([]float32, heads*s.cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		dst := make([]float32, heads*s.rows)
		for _, c := range []struct {
			mode    string
			threads int
		}{{"heads", 1}, {"matmul", 1}, {"heads", 2}, {"matmul", 2}} {
			mode := c.mode
			b.Run(fmt.Sprintf("%s/%s/t%d", s.name, mode, c.threads), func(b *testing.B) {
				p := NewPool(c.threads)
				defer p.Close()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.SetBytes(int64(heads * len(ws[0][0].Data)))
				b.ResetTimer()
				t0 := threadCPU(b)
				for i := 0; i < b.N; i++ {
					w := ws[i%layers]
					if mode == "heads" {
						p.MatVecHeads(dst, s.rows, w, x, s.cols)
						continue
					}
					for h := range w {
						p.MatMul(dst[h*s.rows:(h+1)*s.rows], &w[h], x[h*s.cols:(h+1)*s.cols], 1)
					}
				}
				b.ReportMetric(float64(threadCPU(b)-t0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
