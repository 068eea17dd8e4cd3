package engine

import (
	"context"
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
