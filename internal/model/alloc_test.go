package model

import (
	"math"
	"testing"

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
			cfg := modelgen.Config{Arch: arch, Layers: 2, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0, Experts: 4, ExpertsUsed: 2}
			if arch != "qwen3moe" {
				cfg.Experts, cfg.ExpertsUsed = 0, 0
			}
			m := bindGen(t, cfg, 8)
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

// TestAttentionPairsBits: heads scored in pairs (DotF16Rows2) give the
// logits of heads scored one by one, bit for bit, in a prompt and in the
// decode steps after it, with groups of 2 and 4 query heads per KV head.
func TestAttentionPairsBits(t *testing.T) {
	for _, kvh := range []int{4, 2} {
		m := bindGen(t, modelgen.Config{Arch: "llama", Layers: 2, Embd: 128, FF: 128, Heads: 8, KVHeads: kvh, Vocab: 300, Type: quant.Q8_0}, 64)
		run := func(pairs bool) []float32 {
			attnPairs = pairs
			defer func() { attnPairs = true }()
			cache, err := m.NewCache(CacheSize{Positions: 256})
			if err != nil {
				t.Fatal(err)
			}
			var all []float32
			logits := make([]float32, 40*m.Cfg.Vocab)
			var b Batch
			for i := 0; i < 40; i++ {
				b.Add(int32(i*7%290)+3, int32(i), 0, true)
			}
			if err := m.Forward(cache, &b, logits); err != nil {
				t.Fatal(err)
			}
			all = append(all, logits...)
			for i := 40; i < 60; i++ {
				b.Reset()
				b.Add(int32(i*11%290)+3, int32(i), 0, true)
				if err := m.Forward(cache, &b, logits[:m.Cfg.Vocab]); err != nil {
					t.Fatal(err)
				}
				all = append(all, logits[:m.Cfg.Vocab]...)
			}
			return all
		}
		one, two := run(false), run(true)
		for i := range one {
			if math.Float32bits(one[i]) != math.Float32bits(two[i]) {
				t.Fatalf("%d KV heads: logit %d: %g in pairs, %g one by one", kvh, i, two[i], one[i])
			}
		}
	}
}

// bindGen binds genModel's model of cfg on a pool of two threads, closed
// when the test ends.
func bindGen(t *testing.T, cfg modelgen.Config, maxBatch int) *Model {
	t.Helper()
	pool := kernels.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := New(genModel(t, cfg), pool, Options{MaxBatch: maxBatch})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
