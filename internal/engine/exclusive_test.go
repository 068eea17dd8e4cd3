package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"braid/internal/model"
)

// TestExclusiveBetweenSteps: work run with Exclusive while requests decode
// on a pipelined backend finds no step in flight (fakePipe records a
// Forward with steps in flight as a violation), gets a sequence no
// request uses, and leaves every request's greedy tokens as they were.
func TestExclusiveBetweenSteps(t *testing.T) {
	jobs := fakeJobs(9)
	f := newFakePipe(2)
	s, err := NewScheduler(f, SchedulerConfig{Parallel: 3, Context: 64, StepTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	streams := make([]*Stream, len(jobs))
	for i, j := range jobs {
		if streams[i], err = s.Submit(context.Background(), Job{Prompt: j.prompt, MaxTokens: j.max, Sampler: greedy(t, f.vocab), TopLogprobs: -1}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, s)
	var wg sync.WaitGroup
	var ran int
	var excErr error
	wg.Go(func() {
		logits := make([]float32, 3*f.vocab)
		for k := range 20 {
			err := s.Exclusive(context.Background(), func(x *Exclusive) error {
				if n := f.InFlight(); n != 0 {
					return fmt.Errorf("turn %d: %d steps in flight", k, n)
				}
				if x.Backend.Has(x.Seq) {
					return fmt.Errorf("turn %d: sequence %d is in use", k, x.Seq)
				}
				if err := x.Reserve(3); err != nil {
					return err
				}
				var b model.Batch
				for p := range 3 {
					b.Add(int32(k+p), int32(p), x.Seq, true)
				}
				if err := x.Backend.Forward(&b, FullLogits, logits); err != nil {
					return err
				}
				ran++
				return nil
			})
			if err != nil {
				excErr = err
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	for i, st := range streams {
		got, res := collect(t, st)
		if want := fakeGreedy(jobs[i].prompt, jobs[i].max, f.vocab); fmt.Sprint(got) != fmt.Sprint(want) || res.Finish != FinishLength {
			t.Errorf("request %d: %v (%v), greedy %v", i, got, res.Finish, want)
		}
	}
	wg.Wait()
	if excErr != nil || ran != 20 {
		t.Fatalf("exclusive work: %d of 20 turns ran, error %v", ran, excErr)
	}
	checkViolations(t, f)
	kept := map[any]bool{}
	for _, c := range s.lru {
		kept[c.id] = true
	}
	for id := range f.seqs {
		if !kept[id] {
			t.Errorf("sequence %d left in the cache: not a request's kept for prefix reuse", id)
		}
	}
}

// TestExclusiveStopped: a request to a stopped scheduler, or one whose
// context ends first, is answered with the reason; a function's error and
// panic come back as its error.
func TestExclusiveStopped(t *testing.T) {
	f := newFakePipe(1)
	s, err := NewScheduler(f, SchedulerConfig{Parallel: 1, Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(*Exclusive) error { return nil }
	if err := s.Exclusive(context.Background(), noop); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("before Start: %v, want ErrNotRunning", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := s.Start(ctx)
	want := errors.New("the function's own")
	if err := s.Exclusive(context.Background(), func(*Exclusive) error { return want }); !errors.Is(err, want) {
		t.Fatalf("function error: got %v", err)
	}
	if err := s.Exclusive(context.Background(), func(*Exclusive) error { panic("boom") }); err == nil {
		t.Fatal("a panicking function: no error")
	}
	if err := s.Exclusive(context.Background(), noop); err != nil {
		t.Fatalf("after a panic the loop still serves: %v", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := s.Exclusive(cctx, noop); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	cancel()
	<-done
	if err := s.Exclusive(context.Background(), noop); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("after the loop ended: %v, want ErrNotRunning", err)
	}
}
