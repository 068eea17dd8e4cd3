package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/sample"
	"braid/internal/sharedtest"
)

// recRun is one request's outcome: tokens, their logprobs, the result.
type recRun struct {
	toks []int32
	lps  []float32
	res  Result
}

// TestRecurrentPrefixReuse: on a qwen35 model (recurrent state that holds
// the last position only) the scheduler keeps each prompt's state before
// its last token, so that a repeated prompt resumes there, a follow-up
// that resends the whole conversation resumes at its end, and one that
// resends the prompt with another continuation (a chat template that drops
// the reasoning of earlier turns) resumes before the prompt's last token:
// fewer prompt tokens evaluated, and the tokens and logprobs of a cold run
// on an empty cache.
func TestRecurrentPrefixReuse(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "testdata", "models", "qwen35", "tiny-qwen35-F32.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		sharedtest.Missing(t, "shared test data absent (%v)", err)
	}
	defer f.Close()
	pool := kernels.NewPool(2)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{MaxBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	const ctxLen, gen = 256, 8
	newSched := func() (*Scheduler, func()) {
		cache, err := m.NewCache(model.CacheSize{Positions: 2 * ctxLen, Ctx: ctxLen, F32: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewScheduler(NewLocal(m, cache), SchedulerConfig{Parallel: 2, Context: ctxLen, StepTokens: 32})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		return s, func() { cancel(); <-done }
	}
	run := func(s *Scheduler, prompt []int32) recRun {
		t.Helper()
		p := sample.DefaultParams()
		p.Temperature = 0
		smp, err := sample.New(p, m.Cfg.Vocab)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: gen, Sampler: smp, TopLogprobs: 0})
		if err != nil {
			t.Fatal(err)
		}
		var toks []Token
		for {
			var done bool
			if toks, done, err = st.Recv(context.Background(), toks); err != nil {
				t.Fatal(err)
			}
			if done {
				break
			}
		}
		r := recRun{res: st.Result()}
		for _, tk := range toks {
			r.toks, r.lps = append(r.toks, tk.ID), append(r.lps, tk.Logprob)
		}
		return r
	}
	cold := func(prompt []int32) recRun {
		s, stop := newSched()
		defer stop()
		return run(s, prompt)
	}
	rng := rand.New(rand.NewPCG(35, 1))
	a := make([]int32, 40)
	for i := range a {
		a[i] = int32(3 + rng.IntN(m.Cfg.Vocab-3))
	}
	s, stop := newSched()
	defer stop()
	first := run(s, a)
	if first.res.CachedTokens != 0 {
		t.Fatalf("the first request reused %d tokens of an empty cache", first.res.CachedTokens)
	}
	// The conversation resent with a new turn: the previous answer as it
	// was generated (every token but the last is in the cache), then more.
	followUp := slices.Concat(a, first.toks, []int32{7, 8, 9})
	// The prompt resent with another continuation.
	other := slices.Concat(a, []int32{11, 12, 13, 14})
	for _, c := range []struct {
		name   string
		prompt []int32
		reuse  int
	}{
		{"repeated prompt", a, len(a) - 1},
		{"follow-up", followUp, len(a) + gen - 1},
		{"other continuation", other, len(a) - 1},
	} {
		before := s.Counters().PromptTokens
		got := run(s, c.prompt)
		want := cold(c.prompt)
		if got.res.CachedTokens != c.reuse {
			t.Errorf("%s: %d prompt tokens reused, want %d", c.name, got.res.CachedTokens, c.reuse)
		}
		if ev := s.Counters().PromptTokens - before; ev != int64(len(c.prompt)-c.reuse) {
			t.Errorf("%s: %d prompt tokens evaluated, want %d", c.name, ev, len(c.prompt)-c.reuse)
		}
		if !slices.Equal(got.toks, want.toks) {
			t.Errorf("%s: tokens %v, a cold run gives %v", c.name, got.toks, want.toks)
			continue
		}
		for i := range got.lps {
			if d := math.Abs(float64(got.lps[i] - want.lps[i])); d > 1e-4 {
				t.Errorf("%s: token %d logprob %g, a cold run gives %g", c.name, i, got.lps[i], want.lps[i])
			}
		}
	}
}
