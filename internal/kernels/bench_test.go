package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"braid/internal/quant"
)

// benchThreads is the pool size for benchmarks: BRAID_THREADS, else all CPUs.
func benchThreads() int {
	n, _ := strconv.Atoi(os.Getenv("BRAID_THREADS"))
	return n
}

// benchMatrix builds a rows x cols matrix by copying one valid random row:
// the content does not change the speed, and generating gigabytes of random
// blocks would dominate the benchmark's set-up time.
func benchMatrix(typ quant.Type, rows, cols int) *Matrix {
	rng := rand.New(rand.NewPCG(9, 10))
	row := randRow(rng, typ, cols)
	m := &Matrix{Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rows*len(row))}
	for r := 0; r < rows; r++ {
		copy(m.Data[r*len(row):], row)
	}
	return m
}

// benchTypes is every weight format with a dot product.
var benchTypes = append(append([]quant.Type(nil), myTypes...), quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS)

var benchShapes = [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}, {2048, 8192}, {8192, 2048}, {128256, 2048}}

// BenchmarkMatMul reports the weight bytes streamed per second: decode
// (n=1) is bound by memory bandwidth, so compare it with BenchmarkMemRead
// from the same run.
func BenchmarkMatMul(b *testing.B) {
	p := NewPool(benchThreads())
	defer p.Close()
	for _, typ := range benchTypes {
		for _, s := range benchShapes {
			for _, n := range []int{1, 8, 512} {
				// n=8 is a batched decode step of 8 sequences, which the
				// K-quant multi-column tiles are for.
				if n == 8 && !(typ == quant.Q2_K || typ == quant.Q3_K || typ == quant.Q4_K || typ == quant.Q5_K || typ == quant.Q6_K || typ == quant.IQ4_XS) {
					continue
				}
				if n == 512 && !(typ == quant.Q8_0 || typ == quant.Q4_0 || typ == quant.F16 || typ == quant.Q4_K || typ == quant.Q6_K) {
					continue
				}
				// 4096x14336 at n=8 and 512 is a MUL_MAT perf shape of
				// llama.cpp's test-backend-ops (m=4096, k=14336).
				kqPerf := (typ == quant.Q4_K || typ == quant.Q6_K) && s == [2]int{4096, 14336}
				// 128256x2048 Q6_K at n=8 is the output head of a Llama-3
				// 1B Q4_K_M in an 8-sequence decode step.
				head := typ == quant.Q6_K && n == 8 && s == [2]int{128256, 2048}
				if n > 1 && !(s == [2]int{4096, 4096} || s == [2]int{2048, 8192} || kqPerf || head) {
					continue
				}
				b.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, s[0], s[1], n), func(b *testing.B) {
					w := benchMatrix(typ, s[0], s[1])
					x := make([]float32, n*s[1])
					rng := rand.New(rand.NewPCG(1, 1))
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					dst := make([]float32, n*s[0])
					p.MatMul(dst, w, x, n)
					b.SetBytes(int64(len(w.Data)))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						p.MatMul(dst, w, x, n)
					}
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(len(w.Data))*float64(b.N)/sec/1e9, "GB/s")
					if n > 1 {
						b.ReportMetric(2*float64(s[0])*float64(s[1])*float64(n)*float64(b.N)/sec/1e9, "GFLOP/s")
					}
				})
			}
		}
	}
}

// BenchmarkMemRead is a STREAM-like read of a 2 GiB array over the pool's
// threads: the bandwidth a decode matrix-vector product can at best reach.
func BenchmarkMemRead(b *testing.B) {
	p := NewPool(benchThreads())
	defer p.Close()
	buf := make([]int64, 2<<30/8)
	for i := range buf {
		buf[i] = int64(i)
	}
	sums := make([]int64, 1024)
	const chunk = 1 << 20 // values per task
	tasks := len(buf) / chunk
	body := func(lo, hi int) {
		for t := lo; t < hi; t++ {
			sums[t%len(sums)] += readSum(buf[t*chunk : (t+1)*chunk])
		}
	}
	b.SetBytes(int64(len(buf) * 8))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.For(tasks, body)
	}
	b.ReportMetric(float64(len(buf)*8)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
