package spec

import (
	"context"
	"runtime"
	"testing"

	"braid/internal/engine"
	"braid/internal/model"
	"braid/internal/sample"
)

// TestDecodeAllocs: speculative decoding allocates nothing per token once
// its buffers have grown: generations of 16 and of 96 tokens allocate the
// same, for every drafter, greedy and sampled.
func TestDecodeAllocs(t *testing.T) {
	path := sharedModel(t, "glm4moe/tiny-glm4moe-Q8_0.gguf")
	lm := load(t, path, model.Options{MTP: true}, 512)
	b := engine.NewLocal(lm.m, lm.cache)
	V := b.Vocab()
	draft := load(t, sharedModel(t, "stories260K/stories260K-Q8_0.gguf"), model.Options{}, 512)
	dm, err := NewDraftModel(draft.m, draft.cache, V)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := lm.m.NewMTPCache(model.CacheSize{Positions: 512})
	if err != nil {
		t.Fatal(err)
	}
	mtp, err := NewMTP(lm.m, mc, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		d    engine.Drafter
		temp float32
	}{{"ngram", &NGram{}, 0}, {"draft", dm, 0}, {"draft-sampled", dm, 0.8}, {"mtp", mtp, 0}, {"mtp-sampled", mtp, 0.8}} {
		t.Run(c.name, func(t *testing.T) {
			g, err := engine.NewSpecGenerator(b, engine.Spec{Drafter: c.d, NMin: 0, NMax: 4})
			if err != nil {
				t.Fatal(err)
			}
			p := sample.DefaultParams()
			p.Temperature = c.temp
			smp := sampler(t, p, V)
			emit := func(int32) error { return nil }
			run := func(n int) uint64 {
				smp.Reset()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				before := ms.Mallocs
				if _, err := g.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n, Sampler: smp, Emit: emit}); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&ms)
				return ms.Mallocs - before
			}
			run(160) // grow every buffer past the measured lengths
			// Mallocs counts the whole process: a goroutine left by another
			// test (an idle scheduler's healing tick) can allocate during a
			// run. That only adds, so the least of three runs is the
			// generation's own count; a per-token allocation shows in all.
			least := func(n int) uint64 {
				m := run(n)
				for range 2 {
					m = min(m, run(n))
				}
				return m
			}
			short, long := least(16), least(96)
			t.Logf("allocations: %d for 16 tokens, %d for 96", short, long)
			if long > short+2 {
				t.Errorf("%d allocations for 96 tokens, %d for 16: the decode path allocates", long, short)
			}
		})
	}
}
