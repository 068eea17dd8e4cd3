package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"braid/internal/gguf"
	"braid/internal/grammar"
	"braid/internal/sample"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
)

// TestConstrainedBatching: constrained and free sequences decoded in the
// same steps. Every constrained output follows its grammar (complete when
// the sequence stopped), and the free sequences give exactly the tokens
// they give without the constrained ones beside them.
func TestConstrainedBatching(t *testing.T) {
	m := loadStories(t)
	f, err := gguf.Open(stories + ".gguf")
	if err != nil {
		sharedtest.Missing(t, "shared test data absent (%v)", err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.ParseGBNF(`root ::= "{\"n\": " [1-9] [0-9]{0,3} ", \"w\": \"" [a-z ]{1,12} "\"}"`)
	if err != nil {
		t.Fatal(err)
	}
	gd := grammar.NewGuide(g, grammar.NewVocab(grammar.TokenPieces(tok, nil), tok.EOGs()))
	sampler := func(seed uint64) *sample.Sampler {
		p := sample.DefaultParams()
		p.Temperature, p.Seed = 1.2, seed
		s, err := sample.New(p, m.Cfg.Vocab)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	free := func(s *Scheduler, i int) Job {
		return Job{Prompt: []int32{1, int32(300 + i)}, MaxTokens: 40, Sampler: sampler(uint64(i)), TopLogprobs: -1}
	}
	// The free sequences alone.
	alone := startScheduler(t, m, SchedulerConfig{Parallel: 4, Context: 256, IsEOG: tok.IsEOG})
	want := make([][]int32, 3)
	for i := range want {
		st, err := alone.Submit(context.Background(), free(alone, i))
		if err != nil {
			t.Fatal(err)
		}
		want[i], _ = collect(t, st)
	}

	s := startScheduler(t, m, SchedulerConfig{Parallel: 4, Context: 256, IsEOG: tok.IsEOG})
	var wg sync.WaitGroup
	var mu sync.Mutex
	complete := 0
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < 3 {
				st, err := s.Submit(context.Background(), free(s, i))
				if err != nil {
					t.Error(err)
					return
				}
				got, _ := collect(t, st)
				if len(got) != len(want[i]) {
					t.Errorf("free sequence %d: %d tokens beside constrained ones, %d alone", i, len(got), len(want[i]))
					return
				}
				for k := range want[i] {
					if got[k] != want[i][k] {
						t.Errorf("free sequence %d: token %d differs beside constrained ones", i, k)
						return
					}
				}
				return
			}
			st, err := s.Submit(context.Background(), Job{Prompt: []int32{1, int32(400 + i)}, MaxTokens: 60, Sampler: sampler(uint64(100 + i)),
				TopLogprobs: -1 + i%2*3, Constraint: gd.NewConstraint()})
			if err != nil {
				t.Error(err)
				return
			}
			ids, res := collect(t, st)
			text := tok.Decode(ids)
			ok, done := g.Check(text)
			if !ok || res.Finish == FinishStop && !done {
				t.Errorf("constrained sequence %d (%v): %q does not follow the grammar", i, res.Finish, text)
			}
			if res.Finish == FinishStop {
				mu.Lock()
				complete++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if complete == 0 {
		t.Error("no constrained sequence completed")
	}
}

// budgetRecorder is a free "constraint" that records the budgets the
// scheduler tells it.
type budgetRecorder struct {
	mu   sync.Mutex
	left []int
}

func (b *budgetRecorder) Budget(left int) { b.mu.Lock(); b.left = append(b.left, left); b.mu.Unlock() }
func (b *budgetRecorder) Sample(s *sample.Sampler, row []float32, _ bool) int32 {
	return s.Sample(row)
}
func (b *budgetRecorder) Advance(int32) bool { return false }

// TestConstraintBudget: before each token the scheduler tells a budgeted
// constraint how many tokens are left, the token itself included: MaxTokens
// counts down to 1, and so does the context where it is the nearer limit.
func TestConstraintBudget(t *testing.T) {
	m := loadStories(t)
	s := startScheduler(t, m, SchedulerConfig{Parallel: 2, Context: 20})
	for _, c := range []struct {
		prompt, max int
		want        []int
	}{
		{2, 5, []int{5, 4, 3, 2, 1}},
		{15, 100, []int{5, 4, 3, 2, 1}}, // the context: 20 - 15
	} {
		p := sample.DefaultParams()
		p.Seed = 1
		smp, err := sample.New(p, m.Cfg.Vocab)
		if err != nil {
			t.Fatal(err)
		}
		prompt := make([]int32, c.prompt)
		for i := range prompt {
			prompt[i] = int32(10 + i)
		}
		rec := &budgetRecorder{}
		st, err := s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: c.max, Sampler: smp, TopLogprobs: -1, IgnoreEOG: true, Constraint: rec})
		if err != nil {
			t.Fatal(err)
		}
		collect(t, st)
		rec.mu.Lock()
		if !slices.Equal(rec.left, c.want) {
			t.Errorf("prompt %d, max %d: budgets %v, want %v", c.prompt, c.max, rec.left, c.want)
		}
		rec.mu.Unlock()
	}
}
