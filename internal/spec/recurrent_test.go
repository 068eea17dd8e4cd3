package spec

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"braid/internal/engine"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// counting is a Local backend that counts the tokens each step evaluates
// and the most recurrent-state snapshots held before a step.
type counting struct {
	*engine.Local
	tokens, peak int
}

func (c *counting) Forward(b *model.Batch, out engine.Output, logits []float32) error {
	c.note(b)
	return c.Local.Forward(b, out, logits)
}

func (c *counting) ForwardHidden(b *model.Batch, out engine.Output, logits, hidden []float32) error {
	c.note(b)
	return c.Local.ForwardHidden(b, out, logits, hidden)
}

func (c *counting) note(b *model.Batch) {
	c.tokens += len(b.Tokens)
	c.peak = max(c.peak, c.Cache.Stats().Snapshots)
}

// TestRecurrentRollbackNoRerun: speculative decoding on a qwen35 target
// rolls rejected drafts back to the snapshot of the position it stops at,
// never evaluating a kept token twice: the tokens evaluated are the
// prompt's plus, per step, the pending token and its drafts, and the
// snapshots held never exceed the drafts of a step (k, with the live
// state 1 + k slots). The output is plain greedy's.
func TestRecurrentRollbackNoRerun(t *testing.T) {
	lm := load(t, sharedModel(t, "qwen35/tiny-qwen35-Q8_0.gguf"), model.Options{}, 256)
	plain := engine.NewLocal(lm.m, lm.cache)
	want := generate(t, engine.NewGenerator(plain), plain.Vocab(), prompt, genTokens)
	for _, k := range []int{1, 3, 6} {
		b := &counting{Local: plain}
		st := &engine.SpecStats{}
		g, err := engine.NewSpecGenerator(b, engine.Spec{Drafter: &scripted{prompt: prompt, ref: want, vocab: b.Vocab()}, NMin: k, NMax: k, Stats: st, Exact: exactOn(lm.pool)})
		if err != nil {
			t.Fatal(err)
		}
		if got := generate(t, g, b.Vocab(), prompt, genTokens); !slices.Equal(got, want) {
			t.Errorf("k=%d: output differs from plain greedy:\n got %v\nwant %v", k, got, want)
		}
		if st.AcceptedTotal() == st.DraftedTotal() || st.AcceptedTotal() == 0 {
			t.Errorf("k=%d: %s: want drafts both kept and rejected", k, st)
		}
		if evaluated := len(prompt) + int(st.Steps+st.Plain+st.DraftedTotal()); b.tokens != evaluated {
			t.Errorf("k=%d: %d tokens evaluated, the prompt and the verified steps are %d: kept tokens were evaluated again", k, b.tokens, evaluated)
		}
		if b.peak > k {
			t.Errorf("k=%d: %d snapshots held at once, more than the %d drafts of a step", k, b.peak, k)
		}
		t.Logf("k=%d: %s; %d tokens evaluated, at most %d snapshots", k, st, b.tokens, b.peak)
	}
}

// oracle drafts each request's reference continuation (found by its
// prompt), one draft in five wrong, so that drafts are kept and rejected
// at every position.
type oracle struct {
	prompts, refs [][]int32
	vocab         int
	calls         int
}

func (o *oracle) Hidden() int       { return 0 }
func (o *oracle) End(kvcache.SeqID) {}
func (o *oracle) Draft(reqs []engine.DraftRequest) error {
	for i := range reqs {
		r := &reqs[i]
		r.Out = r.Out[:0]
		for p, pr := range o.prompts {
			if len(r.Toks) <= len(pr) || !slices.Equal(r.Toks[:len(pr)], pr) {
				continue
			}
			done := len(r.Toks) - len(pr)
			for j := 0; j < r.Max && done+j < len(o.refs[p]); j++ {
				o.calls++
				tok := o.refs[p][done+j]
				if o.calls%5 == 0 {
					tok = (tok + 1) % int32(o.vocab)
				}
				r.Out = append(r.Out, tok)
			}
			break
		}
	}
	return nil
}

// TestSchedulerSpecRecurrent: speculative decoding inside the server's
// batches on the qwen35 hybrids: requests through two slots (prompts
// longer than a step, taken in chunks beside other sequences'
// verifications; two prompts repeated, so they resume from the state kept
// before their last token) each get the plain Generator's tokens, with
// drafts kept and rejected (rolled back to snapshots), by a scripted
// drafter and by the model's own MTP head; afterwards only the cached
// sequences' prompt snapshots are held.
func TestSchedulerSpecRecurrent(t *testing.T) {
	for _, rel := range []string{"qwen35/tiny-qwen35-Q8_0.gguf", "qwen35moe/tiny-qwen35moe-Q4_K_M.gguf"} {
		path := sharedModel(t, rel)
		ref := load(t, path, model.Options{}, 256)
		rb := engine.NewLocal(ref.m, ref.cache)
		long := slices.Concat(prompt, prompt[1:], prompt[2:])
		prompts := [][]int32{prompt, long, prompt[:5], slices.Concat(prompt[3:], prompt), prompt, long}
		const n = 24
		var want [][]int32
		for _, p := range prompts {
			want = append(want, generate(t, engine.NewGenerator(rb), rb.Vocab(), p, n))
		}
		for _, drafter := range []string{"oracle", "mtp"} {
			t.Run(fmt.Sprintf("%s/%s", rel, drafter), func(t *testing.T) {
				lm := load(t, path, model.Options{MTP: drafter == "mtp"}, 256)
				// The server's cache: two sequences of context 256 (and
				// their recurrent-state slots).
				cache, err := lm.m.NewCache(model.CacheSize{Positions: 2 * 256, Ctx: 256})
				if err != nil {
					t.Fatal(err)
				}
				sp := engine.Spec{Drafter: &oracle{prompts: prompts, refs: want, vocab: rb.Vocab()}, NMin: 3, NMax: 3, Exact: exactOn(lm.pool)}
				if drafter == "mtp" {
					mc, err := lm.m.NewMTPCache(model.CacheSize{Positions: 2 * 256, Ctx: 256})
					if err != nil {
						t.Fatal(err)
					}
					d, err := NewMTP(lm.m, mc, 64)
					if err != nil {
						t.Fatal(err)
					}
					sp = engine.Spec{Drafter: d, NMin: 2, NMax: 2, Exact: exactOn(lm.pool)}
				}
				b := engine.NewLocal(lm.m, cache)
				s, err := engine.NewScheduler(b, engine.SchedulerConfig{Parallel: 2, Context: 256, StepTokens: 24, Spec: &sp})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { s.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()
				// What each request resumes from: the state kept before
				// the last token of an earlier prompt it repeats or
				// extends (none with the MTP head, which needs every
				// prompt position's hidden state).
				wantReused := []int{0, len(prompt) - 1, 0, 0, len(prompt) - 1, len(long) - 1}
				for i, p := range prompts {
					// One at a time, so that a repeated prompt finds the
					// first one cached.
					st, err := s.Submit(context.Background(), engine.Job{Prompt: p, MaxTokens: n, Sampler: greedy(t, rb.Vocab()), TopLogprobs: -1})
					if err != nil {
						t.Fatal(err)
					}
					toks, res := collect(t, st)
					if got := ids(toks); !slices.Equal(got, want[i]) {
						t.Errorf("request %d: got %v, want %v", i, got, want[i])
					}
					if w := wantReused[i]; drafter == "mtp" && res.CachedTokens != 0 || drafter != "mtp" && res.CachedTokens != w {
						t.Errorf("request %d: %d of its %d prompt tokens reused, want %d", i, res.CachedTokens, len(p), w)
					}
				}
				spst := s.SpecStats()
				t.Logf("%s", spst)
				if drafter == "oracle" && (spst.AcceptedTotal() == 0 || spst.AcceptedTotal() == spst.DraftedTotal()) || spst.DraftedTotal() == 0 {
					t.Errorf("%s: want drafts (the scripted ones both kept and rejected)", spst)
				}
				cancel()
				<-done
				kv := b.KVStats()
				if c := s.Counters().CachedSequences; kv.Snapshots > c {
					t.Errorf("%d snapshots held by %d cached sequences: at most one each (the prompt's)", kv.Snapshots, c)
				}
			})
		}
	}
}
