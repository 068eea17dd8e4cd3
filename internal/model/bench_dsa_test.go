package model

import (
	"fmt"
	"path/filepath"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/sharedtest"
)

// BenchmarkDSADecode times a decode step of the shared glm-dsa model at
// contexts longer than its indexer's top-k (8): "sparse" attends to the 8
// positions the indexer selects, "dense" runs the same step (indexer
// included) with attention over every position. The gap grows with the
// context: the indexer's scoring pass stays linear in it, the attention
// no longer is.
func BenchmarkDSADecode(b *testing.B) {
	path := filepath.Join(sharedModels, "glm-dsa", "tiny-glm-dsa-F32.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		sharedtest.Missing(b, "%v", err)
	}
	defer f.Close()
	for _, depth := range []int{1024, 8192} {
		for _, mode := range []string{"sparse", "dense"} {
			b.Run(fmt.Sprintf("ctx%d/%s", depth, mode), func(b *testing.B) {
				pool := kernels.NewPool(2)
				defer pool.Close()
				m, err := New(f, pool, Options{MaxBatch: 512})
				if err != nil {
					b.Fatal(err)
				}
				m.denseDSA = mode == "dense"
				cache, err := m.NewCache(CacheSize{Positions: depth + 64})
				if err != nil {
					b.Fatal(err)
				}
				var bt Batch
				logits := make([]float32, 512*m.Cfg.Vocab)
				for p := 0; p < depth; p += 512 {
					bt.Reset()
					for i := p; i < min(p+512, depth); i++ {
						bt.Add(int32(i*7%500+3), int32(i), 0, false)
					}
					if err := m.Forward(cache, &bt, logits); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					pos := depth + i%32
					if pos == depth && i > 0 {
						if err := cache.Truncate(0, depth); err != nil {
							b.Fatal(err)
						}
					}
					bt.Reset()
					bt.Add(int32(pos%500+3), int32(pos), 0, true)
					if err := m.Forward(cache, &bt, logits); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
