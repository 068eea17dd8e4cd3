package spec

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// BenchmarkVerifyStep times one decode step of a sequence that evaluates
// the pending token plus k drafts (k = 0 is plain decode) after a context
// of 256 positions, with the kernels' tiles and with exact verification
// (kernels.Pool.SetExactColumns): the cost of checking k drafts in one
// step against a one-token step. The model is $BRAID_BENCH_MODEL (e.g. a
// `braid genmodel --preset llama-1b` file), threads $BRAID_BENCH_THREADS
// (default all). With one thread the step runs on the benchmark's own OS
// thread, and it also reports cpu-ms/op, that thread's CPU time per step,
// the steadier figure on a shared machine:
//
//	BRAID_BENCH_MODEL=llama1b-q4km.gguf go test -run XXX -bench VerifyStep ./internal/spec/
func BenchmarkVerifyStep(b *testing.B) {
	path := os.Getenv("BRAID_BENCH_MODEL")
	if path == "" {
		b.Skip("set BRAID_BENCH_MODEL to a GGUF file")
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	threads := 0
	fmt.Sscan(os.Getenv("BRAID_BENCH_THREADS"), &threads)
	pool := kernels.NewPool(threads)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{MaxBatch: 512})
	if err != nil {
		b.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: 1024})
	if err != nil {
		b.Fatal(err)
	}
	const depth = 256
	var bt model.Batch
	for i := range depth {
		bt.Add(int32(3+i%200), int32(i), 0, false)
	}
	if err := m.Forward(cache, &bt, nil); err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, 8*m.Cfg.Vocab)
	for _, exact := range []bool{false, true} {
		for k := 0; k <= 4; k++ {
			name := fmt.Sprintf("tiles/k=%d", k)
			if exact {
				name = fmt.Sprintf("exact/k=%d", k)
			}
			b.Run(name, func(b *testing.B) {
				if exact {
					pool.SetExactColumns(k + 1)
					defer pool.SetExactColumns(0)
				}
				if threads == 1 {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
				}
				t0, cpu := threadCPU()
				for b.Loop() {
					bt.Reset()
					for i := 0; i <= k; i++ {
						bt.Add(int32(5+i), int32(depth+i), 0, true)
					}
					if err := m.Forward(cache, &bt, logits); err != nil {
						b.Fatal(err)
					}
					if err := cache.Truncate(kvcache.SeqID(0), depth); err != nil {
						b.Fatal(err)
					}
				}
				if t1, ok := threadCPU(); ok && cpu && threads == 1 {
					b.ReportMetric(float64(t1-t0)/1e6/float64(b.N), "cpu-ms/op")
				}
			})
		}
	}
}
