package model

import (
	"testing"

	"braid/internal/modelgen"
	"braid/internal/quant"
)

// gptossVariant is a generated gpt-oss model of another shape than the
// shared one: the family, not the test file.
func gptossVariant(t *testing.T, cfg modelgen.Config, mix string) modelgen.Config {
	t.Helper()
	cfg.Arch = "gpt-oss"
	typ, rule, err := modelgen.Mix(mix)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Type, cfg.TypeFor = typ, rule
	return cfg
}

// TestGptOssVariantsSplit runs gpt-oss shapes the shared model lacks on
// every split: 8 KV heads over 3 ranks (3/3/2) with their sinks, an odd
// layer count (sliding, full, sliding), a window shorter than the prompt, 6
// experts with 3 used, expert FF cut at MXFP4 and Q8_0 block boundaries
// (96 columns: 32-column steps over 2 and 3 ranks), F32 and MXFP4_MOE.
// The seed gives the quantized model greedy margins of at least 0.025 (seed
// 11 had a step at 3e-4, where a split's other summation order may
// legitimately pick the other token, as the shared models' seeds avoid).
func TestGptOssVariantsSplit(t *testing.T) {
	tp := func(n int, w ...float64) splitCase { return splitCase{tp: n, pp: 1, weights: w} }
	base := modelgen.Config{Layers: 3, Embd: 128, FF: 96, Heads: 16, KVHeads: 8, HeadDim: 16, Vocab: 300,
		Experts: 6, ExpertsUsed: 3, ExpertFF: 96, SlidingWindow: 5, Seed: 12}
	cases := []splitCase{tp(2), tp(3), tp(3, 1, 2, 3), {tp: 1, pp: 3}, {tp: 1, pp: 2, weights: []float64{1, 3}}, {tp: 2, pp: 2}}
	for _, tc := range []struct {
		name string
		mix  string
		f32  bool
		edit func(*modelgen.Config)
	}{
		{"gpt-oss-8kv-F32", "F32", true, nil},
		{"gpt-oss-8kv-MXFP4_MOE", "MXFP4_MOE", false, nil},
		{"gpt-oss-mqa-Q8_0", "Q8_0", false, func(c *modelgen.Config) { c.KVHeads, c.Layers, c.SlidingWindow = 1, 2, 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			f := genModel(t, gptossVariant(t, cfg, tc.mix))
			c, err := ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			if c.Window[0] != cfg.SlidingWindow || c.Window[1] != 0 {
				t.Fatalf("windows %v: want layer 0 sliding (%d), layer 1 full", c.Window, cfg.SlidingWindow)
			}
			checkAllSplits(t, f, tc.name, tc.f32, func(c *Config) []splitCase {
				if c.Layers < 3 {
					return cases[:3]
				}
				return cases
			})
		})
	}
}

// TestGptOssDecodeStepAllocs checks that a gpt-oss decode step (sinks,
// windowed rings, biases, expert biases) allocates nothing once warm.
func TestGptOssDecodeStepAllocs(t *testing.T) {
	cfg := gptossVariant(t, modelgen.Config{Layers: 2, Embd: 64, FF: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 300,
		Experts: 4, ExpertsUsed: 2, ExpertFF: 64, SlidingWindow: 8}, "Q8_0")
	cfg.Type = quant.Q8_0
	f := genModel(t, cfg)
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := Split(c, ColumnBlocks(f, c), 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, f, shards, 2, 1, 512, false)
	row := make([]float32, c.Vocab)
	var b Batch
	pos := int32(0)
	step := func() {
		b.Reset()
		b.Add(int32(pos%250)+3, pos, 0, true)
		pos++
		if err := w.forward(&b, row); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ { // past the window: the rings wrap
		step()
	}
	if a := testing.AllocsPerRun(50, step); a != 0 {
		t.Errorf("a gpt-oss decode step over 2 ranks allocates %.2f times", a)
	}
}
