package model

import (
	"path/filepath"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

// TestDecodeStepAllocs checks that a decode step allocates nothing once the
// buffers have grown: per-token allocations would put the garbage collector
// on the decode path.
func TestDecodeStepAllocs(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen3moe"} {
		t.Run(arch, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			cfg := modelgen.Config{Arch: arch, Layers: 2, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0, Experts: 4, ExpertsUsed: 2}
			if arch != "qwen3moe" {
				cfg.Experts, cfg.ExpertsUsed = 0, 0
			}
			if err := modelgen.WriteFile(path, cfg); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			pool := kernels.NewPool(2)
			defer pool.Close()
			m, err := New(f, pool, Options{MaxBatch: 8})
			if err != nil {
				t.Fatal(err)
			}
			cache, err := m.NewCache(CacheSize{Positions: 512})
			if err != nil {
				t.Fatal(err)
			}
			logits := make([]float32, m.Cfg.Vocab)
			var b Batch
			pos := int32(0)
			step := func() {
				b.Reset()
				b.Add(int32(pos%250)+3, pos, 0, true)
				pos++
				if err := m.Forward(cache, &b, logits); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 64; i++ { // grow the score buffers past the measured range
				step()
			}
			cache.Truncate(0, 0)
			pos = 0
			for i := 0; i < 40; i++ {
				step()
			}
			if a := testing.AllocsPerRun(100, step); a != 0 {
				t.Errorf("a decode step allocates %.2f times", a)
			}
		})
	}
}
