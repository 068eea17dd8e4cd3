package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"braid/internal/kvcache"
	"braid/internal/model"
)

// fakePipe is a Pipeline whose logits depend only on each sequence's
// tokens so far, never on what else is in its step: every schedule must
// give every request the same greedy tokens. It checks the contract the
// scheduler must keep: a sequence's tokens continue its cache, a sequence
// is in at most one step in flight, no KV method touches a sequence in
// flight, and Forward is not called while steps are in flight.
type fakePipe struct {
	stages, vocab int
	failAt        int // the Collect (counted from 1) that fails; 0: none
	onLaunch      func(b *model.Batch)

	seqs     map[kvcache.SeqID][]int32
	flight   []fakeStep
	busy     map[kvcache.SeqID]int
	collects int

	mu         sync.Mutex
	violations []string
}

// fakeStep is a step in flight: its sequences, and the hash of each
// output row's history.
type fakeStep struct {
	seqs []kvcache.SeqID
	rows []uint64
}

func newFakePipe(stages int) *fakePipe {
	return &fakePipe{stages: stages, vocab: 64, seqs: map[kvcache.SeqID][]int32{}, busy: map[kvcache.SeqID]int{}}
}

func (f *fakePipe) violate(format string, a ...any) {
	f.mu.Lock()
	f.violations = append(f.violations, fmt.Sprintf(format, a...))
	f.mu.Unlock()
}

func (f *fakePipe) touch(op string, ids ...kvcache.SeqID) {
	for _, id := range ids {
		if f.busy[id] > 0 {
			f.violate("%s of sequence %d while it is in a step in flight", op, id)
		}
	}
}

// history hashes a sequence's tokens (FNV-1a over their values).
func history(toks []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, t := range toks {
		h ^= uint64(uint32(t))
		h *= 1099511628211
	}
	return h
}

// fakeRow fills the logits of the next token after a history.
func fakeRow(row []float32, h uint64) {
	for i := range row {
		x := (h ^ uint64(i)*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
		x ^= x >> 31
		row[i] = float32(x >> 40) // 24 bits: exact in a float32
	}
}

// fakeGreedy is what greedy decoding on fakePipe gives after prompt.
func fakeGreedy(prompt []int32, n, vocab int) []int32 {
	toks := append([]int32(nil), prompt...)
	row := make([]float32, vocab)
	var out []int32
	for range n {
		fakeRow(row, history(toks))
		best := 0
		for i := range row {
			if row[i] > row[best] {
				best = i
			}
		}
		out = append(out, int32(best))
		toks = append(toks, int32(best))
	}
	return out
}

func (f *fakePipe) Vocab() int { return f.vocab }

func (f *fakePipe) run(b *model.Batch) ([]uint64, error) {
	var rows []uint64
	for i, id := range b.Seq {
		toks, ok := f.seqs[id]
		if !ok {
			return nil, fmt.Errorf("token %d: sequence %d has no cache", i, id)
		}
		if int(b.Pos[i]) != len(toks) {
			return nil, fmt.Errorf("token %d of sequence %d at position %d; its cache holds %d", i, id, b.Pos[i], len(toks))
		}
		toks = append(toks, b.Tokens[i])
		f.seqs[id] = toks
		if b.Output[i] {
			rows = append(rows, history(toks))
		}
	}
	return rows, nil
}

func (f *fakePipe) write(rows []uint64, logits []float32) {
	for r, h := range rows {
		fakeRow(logits[r*f.vocab:(r+1)*f.vocab], h)
	}
}

func (f *fakePipe) Forward(b *model.Batch, _ Output, logits []float32) error {
	if len(f.flight) > 0 {
		f.violate("Forward with %d steps in flight", len(f.flight))
		return ErrInFlight
	}
	rows, err := f.run(b)
	if err != nil {
		f.violate("Forward: %v", err)
		return err
	}
	f.write(rows, logits)
	return nil
}

func (f *fakePipe) Depth() int    { return f.stages }
func (f *fakePipe) InFlight() int { return len(f.flight) }

func (f *fakePipe) Launch(b *model.Batch, _ Output, _ bool) error {
	if len(f.flight) >= f.stages {
		f.violate("Launch with %d steps in flight over %d stages", len(f.flight), f.stages)
	}
	for _, id := range b.Seq {
		if f.busy[id] > 0 {
			f.violate("sequence %d launched while in a step in flight", id)
		}
	}
	rows, err := f.run(b)
	if err != nil {
		f.violate("Launch: %v", err)
		return err
	}
	// The sequences of the step stay busy until it is collected.
	for _, id := range b.Seq {
		f.busy[id]++
	}
	f.flight = append(f.flight, fakeStep{seqs: append([]kvcache.SeqID(nil), b.Seq...), rows: rows})
	if f.onLaunch != nil {
		f.onLaunch(b)
	}
	return nil
}

func (f *fakePipe) Collect(logits []float32) error {
	if len(f.flight) == 0 {
		f.violate("Collect with nothing in flight")
		return errors.New("nothing in flight")
	}
	f.collects++
	if f.collects == f.failAt {
		// As a cluster: every step in flight is lost, the caches emptied.
		f.flight = nil
		clear(f.busy)
		clear(f.seqs)
		return fmt.Errorf("%w: rank 1 went away", ErrUnavailable)
	}
	st := f.flight[0]
	for _, id := range st.seqs {
		f.busy[id]--
	}
	f.flight = f.flight[1:]
	f.write(st.rows, logits)
	return nil
}

func (f *fakePipe) Drop(id kvcache.SeqID) {
	f.touch("Drop", id)
	delete(f.seqs, id)
}

func (f *fakePipe) Has(id kvcache.SeqID) bool { _, ok := f.seqs[id]; return ok }
func (f *fakePipe) Len(id kvcache.SeqID) int  { return len(f.seqs[id]) }

func (f *fakePipe) Reserve(id kvcache.SeqID, n int) error {
	f.touch("Reserve", id)
	if _, ok := f.seqs[id]; !ok {
		f.seqs[id] = nil
	}
	return nil
}

func (f *fakePipe) CopyPrefix(dst, src kvcache.SeqID, n int) error {
	f.touch("CopyPrefix", dst, src)
	s, ok := f.seqs[src]
	if !ok || n > len(s) {
		return fmt.Errorf("copy-prefix of %d from sequence %d holding %d", n, src, len(s))
	}
	f.seqs[dst] = append([]int32(nil), s[:n]...)
	return nil
}

func (f *fakePipe) Truncate(id kvcache.SeqID, n int) error {
	f.touch("Truncate", id)
	f.seqs[id] = f.seqs[id][:n]
	return nil
}

func (f *fakePipe) ResumePoint(id kvcache.SeqID, n int) int { return min(n, len(f.seqs[id])) }

func (f *fakePipe) Snapshot(id kvcache.SeqID, n int) error {
	f.touch("Snapshot", id)
	return nil
}

func (f *fakePipe) Forget(id kvcache.SeqID, from int) { f.touch("Forget", id) }

func (f *fakePipe) KVConfig() kvcache.Config { return kvcache.Config{BlockSize: 16, Blocks: 1 << 12} }
func (f *fakePipe) KVStats() kvcache.Stats   { return kvcache.Stats{} }
func (f *fakePipe) Close() error             { return nil }

type fakeJob struct {
	prompt []int32
	max    int
}

// fakeJobs are requests of different prompt lengths and lengths, so that
// sequences join and leave while others are in flight.
func fakeJobs(n int) []fakeJob {
	var js []fakeJob
	for i := range n {
		p := make([]int32, 1+(i*5)%9)
		for k := range p {
			p[k] = int32((i*7 + k*3) % 64)
		}
		js = append(js, fakeJob{prompt: p, max: 4 + (i*11)%17})
	}
	return js
}

// runFake submits every job before the loop starts and returns each one's
// tokens and finish, and the scheduler's counters.
func runFake(t *testing.T, f *fakePipe, cfg SchedulerConfig, jobs []fakeJob) ([][]int32, []Result, Counters) {
	t.Helper()
	s, err := NewScheduler(f, cfg)
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
	toks := make([][]int32, len(jobs))
	res := make([]Result, len(jobs))
	for i, st := range streams {
		toks[i], res[i] = collect(t, st)
	}
	// The loop publishes its busy count after it has sent a request's
	// last result, so a reader right after the last result can see the
	// step before: wait (bounded) for the loop to get there.
	c := s.Counters()
	for deadline := time.Now().Add(5 * time.Second); c.Busy != 0 && time.Now().Before(deadline); c = s.Counters() {
		time.Sleep(time.Millisecond)
	}
	return toks, res, c
}

func checkViolations(t *testing.T, f *fakePipe) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		t.Error(v)
	}
}

// TestPipelineOverlapsSteps: on a Pipeline backend the scheduler keeps as
// many steps in flight as there are stages, each sequence in at most one,
// and every request gets exactly the tokens of greedy decoding, as with
// the schedule that runs one step at a time (NoOverlap), while requests
// join and leave with steps in flight.
func TestPipelineOverlapsSteps(t *testing.T) {
	jobs := fakeJobs(11)
	for _, stages := range []int{2, 3} {
		t.Run(fmt.Sprintf("stages%d", stages), func(t *testing.T) {
			cfg := SchedulerConfig{Parallel: 4, Context: 64, StepTokens: 6}
			f := newFakePipe(stages)
			got, res, c := runFake(t, f, cfg, jobs)
			checkViolations(t, f)
			cfg.NoOverlap = true
			g := newFakePipe(stages)
			ref, _, cref := runFake(t, g, cfg, jobs)
			checkViolations(t, g)
			for i, j := range jobs {
				want := fakeGreedy(j.prompt, j.max, f.vocab)
				if fmt.Sprint(got[i]) != fmt.Sprint(want) || res[i].Finish != FinishLength {
					t.Errorf("request %d: overlapped %v (%v), greedy %v", i, got[i], res[i].Finish, want)
				}
				if fmt.Sprint(ref[i]) != fmt.Sprint(want) {
					t.Errorf("request %d: one step at a time %v, greedy %v", i, ref[i], want)
				}
			}
			if c.MaxInFlight != stages || c.OverlappedSteps == 0 {
				t.Errorf("overlapped: at most %d steps in flight over %d stages, %d steps launched beside another", c.MaxInFlight, stages, c.OverlappedSteps)
			}
			if cref.MaxInFlight != 0 || cref.OverlappedSteps != 0 {
				t.Errorf("NoOverlap: %d steps in flight at most, %d overlapped", cref.MaxInFlight, cref.OverlappedSteps)
			}
			if c.Busy != 0 || len(f.flight) != 0 {
				t.Errorf("after the run: %d busy, %d steps in flight", c.Busy, len(f.flight))
			}
		})
	}
}

// TestPipelineFailure: a step that fails with steps in flight fails every
// running request with the backend's error, and the next requests run.
func TestPipelineFailure(t *testing.T) {
	f := newFakePipe(2)
	f.failAt = 5
	cfg := SchedulerConfig{Parallel: 4, Context: 64}
	jobs := fakeJobs(4)
	for i := range jobs {
		jobs[i].max = 20
	}
	_, res, _ := runFake(t, f, cfg, jobs)
	for i, r := range res {
		if r.Finish != FinishError || !errors.Is(r.Err, ErrUnavailable) {
			t.Errorf("request %d after a failed step: %v, %v", i, r.Finish, r.Err)
		}
	}
	f.failAt = 0
	f.collects = 0
	jobs = fakeJobs(3)
	got, res, _ := runFake(t, f, cfg, jobs)
	for i, j := range jobs {
		if want := fakeGreedy(j.prompt, j.max, f.vocab); fmt.Sprint(got[i]) != fmt.Sprint(want) || res[i].Finish != FinishLength {
			t.Errorf("request %d after the failure: %v (%v), greedy %v", i, got[i], res[i].Finish, want)
		}
	}
	checkViolations(t, f)
}

// TestPipelineCancel: a request cancelled while its step is in flight ends
// as cancelled once the step is collected, and the others are unaffected.
func TestPipelineCancel(t *testing.T) {
	f := newFakePipe(2)
	s, err := NewScheduler(f, SchedulerConfig{Parallel: 4, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	jobs := fakeJobs(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []*Stream
	for i, j := range jobs {
		c, n := context.Background(), j.max
		if i == 1 {
			c, n = ctx, 60
		}
		st, err := s.Submit(c, Job{Prompt: j.prompt, MaxTokens: n, Sampler: greedy(t, f.vocab), TopLogprobs: -1})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	// Sequence ids are given in admission order from 1: request 1's is 2.
	// Cancel it when its fourth decode step is launched, so that the
	// cancellation finds it in flight.
	f.onLaunch = func(b *model.Batch) {
		for i, id := range b.Seq {
			if id == 2 && int(b.Pos[i]) == len(jobs[1].prompt)+3 {
				cancel()
			}
		}
	}
	run(t, s)
	for i, st := range streams {
		got, res := collect(t, st)
		if i == 1 {
			// The step in flight at the cancellation is still sampled.
			if res.Finish != FinishCancelled || len(got) != 5 {
				t.Errorf("cancelled request: %v after %d tokens, want cancelled after 5", res.Finish, len(got))
			}
			continue
		}
		if want := fakeGreedy(jobs[i].prompt, jobs[i].max, f.vocab); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("request %d: %v, greedy %v", i, got, want)
		}
	}
	checkViolations(t, f)
}
