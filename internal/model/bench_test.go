package model

import (
	"path/filepath"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/sharedtest"
)

// BenchmarkDecodeStep times one decode token of a shared model on a single
// node (2 threads), the path a split must not slow down.
func BenchmarkDecodeStep(b *testing.B) {
	path := filepath.Join(sharedModels, "tiny-llama", "tiny-llama-Q8_0.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		sharedtest.Missing(b, "%v", err)
	}
	defer f.Close()
	pool := kernels.NewPool(2)
	defer pool.Close()
	m, err := New(f, pool, Options{MaxBatch: 16})
	if err != nil {
		b.Fatal(err)
	}
	cache, err := m.NewCache(CacheSize{Positions: 256})
	if err != nil {
		b.Fatal(err)
	}
	logits := make([]float32, m.Cfg.Vocab)
	var bt Batch
	pos := int32(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pos == 128 {
			cache.Truncate(0, 0)
			pos = 0
		}
		bt.Reset()
		bt.Add(int32(pos%250)+3, pos, 0, true)
		pos++
		if err := m.Forward(cache, &bt, logits); err != nil {
			b.Fatal(err)
		}
	}
}
