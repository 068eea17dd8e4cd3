package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"braid/internal/model"
	"braid/internal/sample"
)

// shiftRef replays a context shift on a token list as the scheduler makes
// it: keep the first keep tokens, drop half (or discard) of the rest.
func shiftRef(toks []int32, keep, discard int) []int32 {
	n := len(toks) - 1
	left := n - keep
	if discard <= 0 {
		discard = left / 2
	}
	discard = min(discard, left-1)
	return append(slices.Clone(toks[:keep]), toks[keep+discard:]...)
}

// TestContextShift: with ContextShift a greedy generation longer than the
// context goes on through shifts, and what it writes after each shift is
// what the model writes, from scratch, after the shortened text (the
// re-evaluated cache is exactly the model's on that text); without it the
// same request ends at the full context with FinishLength.
func TestContextShift(t *testing.T) {
	m := loadStories(t)
	const ctxLen = 64
	prompt := []int32{1, 403, 407, 261, 287, 427, 297, 10, 11, 12}
	for _, tc := range []struct {
		name          string
		keep, discard int
	}{
		{"keep BOS, half", 1, 0},
		{"keep prompt, half", -1, 0},
		{"keep 4, discard 10", 4, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startScheduler(t, m, SchedulerConfig{Parallel: 2, Context: ctxLen, ContextShift: true, PrefixCache: -1})
			const want = 150
			st, err := s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: want, Sampler: greedy(t, m.Cfg.Vocab),
				IgnoreEOG: true, NKeep: tc.keep, NDiscard: tc.discard})
			if err != nil {
				t.Fatal(err)
			}
			got, res := collect(t, st)
			if res.Finish != FinishLength || len(got) != want || res.Shifts == 0 {
				t.Fatalf("finish %v, %d tokens, %d shifts (err %v); want length, %d tokens, shifts", res.Finish, len(got), res.Shifts, res.Err, want)
			}
			keep := tc.keep
			if keep < 0 {
				keep = len(prompt)
			}
			// Replay: the text the scheduler held, shift by shift; after
			// each, the next tokens (up to the next shift) must be the
			// model's greedy continuation of the shortened text.
			toks := slices.Clone(prompt)
			i, shifts := 0, 0
			for i < len(got) {
				toks = append(toks, got[i])
				i++
				if len(toks) < ctxLen || i == len(got) {
					continue
				}
				toks = shiftRef(toks, keep, tc.discard)
				shifts++
				n := min(ctxLen-len(toks), len(got)-i)
				ref := generatorRef(t, m, toks, n)
				if !slices.Equal(ref, got[i:i+len(ref)]) {
					t.Fatalf("after shift %d (%d tokens kept): scheduler wrote %v, the model from scratch %v", shifts, len(toks), got[i:i+len(ref)], ref)
				}
			}
			if shifts != res.Shifts {
				t.Errorf("replay made %d shifts, the scheduler reports %d", shifts, res.Shifts)
			}
			if res.CacheLen != len(toks)-1 {
				t.Errorf("CacheLen %d, want %d (the replayed text less its last token)", res.CacheLen, len(toks)-1)
			}
			if c := s.Counters(); c.ContextShifts != int64(res.Shifts) || c.ShiftTokens == 0 {
				t.Errorf("counters: %d shifts, %d tokens evaluated again", c.ContextShifts, c.ShiftTokens)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		s := startScheduler(t, m, SchedulerConfig{Parallel: 1, Context: ctxLen})
		st, err := s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: 150, Sampler: greedy(t, m.Cfg.Vocab), IgnoreEOG: true})
		if err != nil {
			t.Fatal(err)
		}
		got, res := collect(t, st)
		if res.Finish != FinishLength || len(prompt)+len(got) != ctxLen || res.Shifts != 0 {
			t.Fatalf("finish %v, %d tokens, %d shifts; want length at the context (%d)", res.Finish, len(got), res.Shifts, ctxLen-len(prompt))
		}
	})
	t.Run("with spec refused", func(t *testing.T) {
		cache, err := m.NewCache(model.CacheSize{Positions: ctxLen})
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewScheduler(NewLocal(m, cache), SchedulerConfig{Parallel: 1, Context: ctxLen, ContextShift: true, Spec: &Spec{}})
		if err == nil || !strings.Contains(err.Error(), "context shift with speculative decoding") {
			t.Fatalf("err %v", err)
		}
	})
}

// TestIgnoreEOGBans: IgnoreEOG sets the end-of-generation tokens' logits
// to -Inf, so none is ever sampled (llama-server's ignore_eos). stories260K
// never writes its </s>, so the test calls end-of-generation the tokens the
// model does write: the first two of a greedy story.
func TestIgnoreEOGBans(t *testing.T) {
	m := loadStories(t)
	prompt := []int32{1, 403}
	story := generatorRef(t, m, prompt, 40)
	eog := []int32{story[0], story[1]}
	slices.Sort(eog)
	isEOG := func(id int32) bool { return slices.Contains(eog, id) }
	s := startScheduler(t, m, SchedulerConfig{Parallel: 2, Context: 128, IsEOG: isEOG})
	if !slices.Equal(s.eog, eog) {
		t.Fatalf("banned list %v, want %v", s.eog, eog)
	}
	for _, temp := range []float32{0, 1.5} {
		p := sample.DefaultParams()
		p.Seed, p.Temperature = 7, temp
		smp := func() *sample.Sampler {
			smp, err := sample.New(p, m.Cfg.Vocab)
			if err != nil {
				t.Fatal(err)
			}
			return smp
		}
		st, _ := s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: 60, Sampler: smp()})
		if got, res := collect(t, st); temp == 0 && (res.Finish != FinishStop || len(got) != 0) {
			t.Errorf("greedy without the ban: %d tokens, finish %v; want </s> at once", len(got), res.Finish)
		}
		st, _ = s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: 60, Sampler: smp(), IgnoreEOG: true})
		got, res := collect(t, st)
		if len(got) != 60 || res.Finish != FinishLength || slices.ContainsFunc(got, isEOG) {
			t.Errorf("temperature %g with the ban: %d tokens, finish %v, %v (banned %v)", temp, len(got), res.Finish, got, eog)
		}
	}
}
