package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/sample"
	"braid/internal/sharedtest"
)

// loadStories opens the shared stories260K model or skips.
func loadStories(t *testing.T) *model.Model {
	t.Helper()
	f, err := gguf.Open(stories + ".gguf")
	if err != nil {
		sharedtest.Missing(t, "shared test data absent (%v): skipping", err)
	}
	t.Cleanup(func() { f.Close() })
	pool := kernels.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func greedy(t *testing.T, vocab int) *sample.Sampler {
	p := sample.DefaultParams()
	p.Temperature = 0
	s, err := sample.New(p, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newScheduler(t *testing.T, m *model.Model, cfg SchedulerConfig) *Scheduler {
	t.Helper()
	cache, err := m.NewCache(model.CacheSize{Positions: cfg.Parallel * cfg.Context, Ctx: cfg.Context})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScheduler(NewLocal(m, cache), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startScheduler runs a scheduler until the test ends.
func startScheduler(t *testing.T, m *model.Model, cfg SchedulerConfig) *Scheduler {
	t.Helper()
	return run(t, newScheduler(t, m, cfg))
}

// run runs s's loop until the test ends.
func run(t *testing.T, s *Scheduler) *Scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	done := s.Start(ctx)
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// TestSchedulerStart: the loop counts as running as soon as Start returns
// (a server says ready right after), and no longer once it has ended.
func TestSchedulerStart(t *testing.T) {
	s := newScheduler(t, loadStories(t), SchedulerConfig{Parallel: 1, Context: 64})
	if s.Running() {
		t.Fatal("running before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := s.Start(ctx)
	if !s.Running() {
		t.Error("not running when Start returned")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10 s after its context ended")
	}
	if s.Running() {
		t.Error("running after Run returned")
	}
}

func collect(t *testing.T, st *Stream) ([]int32, Result) {
	t.Helper()
	var toks []Token
	for {
		var done bool
		var err error
		toks, done, err = st.Recv(context.Background(), toks)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	ids := make([]int32, len(toks))
	for i, tk := range toks {
		ids[i] = tk.ID
	}
	return ids, st.Result()
}

func generatorRef(t *testing.T, m *model.Model, prompt []int32, n int) []int32 {
	cache, err := m.NewCache(model.CacheSize{Positions: 256})
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	_, err = NewGenerator(NewLocal(m, cache)).Generate(context.Background(), Request{
		Prompt: prompt, MaxTokens: n, Sampler: greedy(t, m.Cfg.Vocab),
		Emit: func(id int32) error { out = append(out, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSchedulerMatchesGenerator: one request alone through the scheduler
// gives the Generator's greedy tokens, and concurrent requests are decoded
// in shared steps.
func TestSchedulerMatchesGenerator(t *testing.T) {
	m := loadStories(t)
	s := startScheduler(t, m, SchedulerConfig{Parallel: 4, Context: 256})
	prompt := []int32{1, 403, 407, 261, 378, 302}
	want := generatorRef(t, m, prompt, 40)
	st, err := s.Submit(context.Background(), Job{Prompt: prompt, MaxTokens: 40, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, res := collect(t, st)
	if res.Finish != FinishLength || res.GenTokens != 40 {
		t.Fatalf("finish %v after %d tokens, want length after 40", res.Finish, res.GenTokens)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d: scheduler %d, generator %d", i, got[i], want[i])
		}
	}

	// Four at once (queued before the loop starts, since this model decodes
	// 30 tokens faster than goroutines start): they must share steps.
	s2 := newScheduler(t, m, SchedulerConfig{Parallel: 4, Context: 256})
	var wg sync.WaitGroup
	for i := range 4 {
		st, err := s2.Submit(context.Background(), Job{Prompt: []int32{1, int32(300 + i)}, MaxTokens: 30, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, res := collect(t, st)
			if len(got) != 30 || res.Finish != FinishLength {
				t.Errorf("request %d: %d tokens, finish %v", i, len(got), res.Finish)
			}
		}()
	}
	run(t, s2)
	wg.Wait()
	after := s2.Counters()
	if after.MaxStepSequences < 2 {
		t.Errorf("at most %d sequence decoded per step under 4 concurrent requests", after.MaxStepSequences)
	}
	if steps := after.Steps; steps >= 4*30 {
		t.Errorf("%d steps for 4x30 tokens: not batched", steps)
	}
	if after.Busy != 0 || after.Queue != 0 {
		t.Errorf("after all finished: busy %d, queue %d", after.Busy, after.Queue)
	}
}

// TestSchedulerPrefixReuse: a second turn that extends the first reuses its
// cached positions and still gives the Generator's tokens.
func TestSchedulerPrefixReuse(t *testing.T) {
	m := loadStories(t)
	s := startScheduler(t, m, SchedulerConfig{Parallel: 2, Context: 256})
	turn1 := []int32{1, 403, 407, 261, 378, 302, 270, 291}
	st, _ := s.Submit(context.Background(), Job{Prompt: turn1, MaxTokens: 20, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	out1, _ := collect(t, st)
	turn2 := append(append(append([]int32{}, turn1...), out1...), 13, 400, 401)
	st, _ = s.Submit(context.Background(), Job{Prompt: turn2, MaxTokens: 20, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	out2, res := collect(t, st)
	// The cache holds turn1 and all generated tokens but the last.
	if want := len(turn1) + len(out1) - 1; res.CachedTokens != want {
		t.Errorf("reused %d tokens, want %d", res.CachedTokens, want)
	}
	if c := s.Counters(); c.ReusedTokens != int64(res.CachedTokens) {
		t.Errorf("counter says %d reused, result %d", c.ReusedTokens, res.CachedTokens)
	}
	want := generatorRef(t, m, turn2, 20)
	for i := range want {
		if out2[i] != want[i] {
			t.Fatalf("token %d after reuse: %d, generator %d", i, out2[i], want[i])
		}
	}
}

// TestSchedulerCancelAndQueue: a cancelled request ends within a step while
// another keeps running; a full queue refuses with ErrQueueFull.
func TestSchedulerCancelAndQueue(t *testing.T) {
	m := loadStories(t)
	s := startScheduler(t, m, SchedulerConfig{Parallel: 1, Context: 256, MaxQueue: 1})
	ctx, cancel := context.WithCancel(context.Background())
	a, err := s.Submit(ctx, Job{Prompt: []int32{1}, MaxTokens: 250, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Recv(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// a holds the only slot; b waits; c finds the queue full.
	b, err := s.Submit(context.Background(), Job{Prompt: []int32{1, 300}, MaxTokens: 5, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Counters().Queue != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Submit(context.Background(), Job{Prompt: []int32{1}, MaxTokens: 5, Sampler: greedy(t, m.Cfg.Vocab)}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("third request: err = %v, want ErrQueueFull", err)
	}
	cancel()
	_, ra := collect(t, a)
	if ra.Finish != FinishCancelled {
		t.Errorf("cancelled request finished with %v", ra.Finish)
	}
	got, rb := collect(t, b)
	if rb.Finish != FinishLength || len(got) != 5 {
		t.Errorf("queued request: finish %v, %d tokens", rb.Finish, len(got))
	}
	if _, err := s.Submit(context.Background(), Job{Prompt: make([]int32, 256), MaxTokens: 1, Sampler: greedy(t, m.Cfg.Vocab)}); err == nil {
		t.Error("a prompt filling the context was accepted")
	}
}

// TestSchedulerChunkedPrefill: a prompt longer than the step budget is read
// in chunks while a running stream keeps getting a token every step.
func TestSchedulerChunkedPrefill(t *testing.T) {
	m := loadStories(t)
	long := make([]int32, 200)
	long[0] = 1
	for i := 1; i < len(long); i++ {
		long[i] = int32(260 + i%200)
	}
	// The model is not safe for concurrent use: the reference runs first.
	want := generatorRef(t, m, long, 10)
	s := startScheduler(t, m, SchedulerConfig{Parallel: 2, Context: 256, StepTokens: 16})
	a, _ := s.Submit(context.Background(), Job{Prompt: []int32{1}, MaxTokens: 60, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	if _, _, err := a.Recv(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Submit(context.Background(), Job{Prompt: long, MaxTokens: 10, Sampler: greedy(t, m.Cfg.Vocab), TopLogprobs: -1})
	got, _ := collect(t, b)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d after chunked prefill: %d, generator %d", i, got[i], want[i])
		}
	}
	collect(t, a)
	// The long prompt took 200/15 steps at least; a decoded in all of them.
	if c := s.Counters(); c.StepSequences[0] > 1 {
		t.Errorf("%d steps ran prefill only while a stream was decoding", c.StepSequences[0])
	}
}
