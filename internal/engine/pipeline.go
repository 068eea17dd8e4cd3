package engine

import (
	"errors"
	"fmt"
	"time"

	"braid/internal/model"
)

// Pipeline is a Backend whose consecutive steps can overlap: a cluster
// whose layers are split into stages. While one step's hidden states are
// in a later stage, the first stage can already run the next step, if that
// step does not wait for the first one's tokens: the scheduler keeps the
// running sequences in as many groups as steps can usefully be in flight
// (Depth: a stage each), and each group's step is in a different stage.
//
// Steps are collected in the order they were launched. While steps are in
// flight, Forward must not be called, and the KV methods may only touch
// sequences that are in no step in flight (they are replayed on the other
// ranks after those steps, in the order made).
type Pipeline interface {
	Backend
	// Depth is how many steps to keep in flight: one per stage, or fewer
	// when stages share cores (1: steps do not overlap).
	Depth() int
	// Launch starts a step: when it returns, b and out may be reused and
	// the step runs on in the later stages. split cuts the step into Depth
	// micro-batches, as Forward does (a single sequence's prompt);
	// steps of groups that overlap anyway run whole, so that each stage
	// multiplies all of a group's tokens at once. A failed Launch fails
	// every step in flight (as a failed Forward, the cluster re-forms).
	Launch(b *model.Batch, out Output, split bool) error
	// Collect waits for the oldest step in flight and writes its output
	// rows into logits, as Forward does. On error every step in flight is
	// lost.
	Collect(logits []float32) error
	// InFlight is the number of steps launched and not yet collected.
	InFlight() int
}

// ErrInFlight is what a Pipeline's Forward returns while steps are in
// flight: the caller mixed the two ways of running steps.
var ErrInFlight = errors.New("engine: Forward while pipelined steps are in flight")

// stepOverlapped is step for a Pipeline backend: it launches the next step
// of every group whose previous step has been collected, while the pipeline
// has room, then collects the oldest step in flight and samples its
// sequences. A group is a set of running sequences that are launched
// together; groups are re-formed from the idle sequences at each launch,
// sized so that the sequences spread evenly over the stages (the cut of
// Forward's micro-batches: with n idle sequences and r groups still to
// form, the next takes n/r of them). When every group's batch holds the
// tokens of one of Forward's micro-batches, every sequence's logits are
// bit for bit those of the schedule that does not overlap (TestPipeline*).
func (s *Scheduler) stepOverlapped() {
	groups := min(s.pipe.Depth(), len(s.active))
	// Work waiting to run between steps (Exclusive) holds new launches
	// back until the pipeline has drained.
	for s.exclusiveNext == nil && s.pipe.InFlight() < groups {
		idle := 0
		for _, q := range s.active {
			if !q.inFlight {
				idle++
			}
		}
		if idle == 0 {
			break
		}
		take := max(1, idle/(groups-s.pipe.InFlight()))
		if !s.launchGroup(take, groups == 1) {
			return
		}
	}
	if s.pipe.InFlight() == 0 {
		return
	}
	g := s.flight[0]
	s.flight = s.flight[1:]
	err := s.pipe.Collect(s.logits)
	now := time.Now()
	if err != nil {
		s.failAll(err)
		return
	}
	s.stepDone(nil)
	vocab := s.b.Vocab()
	for _, q := range g {
		q.inFlight = false
		if q.logits < 0 {
			continue
		}
		row := s.logits[q.logits*vocab : (q.logits+1)*vocab]
		if f := s.sampleInto(q, row, now); f != FinishNone {
			s.end(q, f, q.failed, q.failed == nil)
			q.ended = true
		}
	}
	a := s.active[:0]
	for _, q := range s.active {
		if !q.ended {
			a = append(a, q)
		}
	}
	clear(s.active[len(a):])
	s.active = a
	s.busy.Store(int64(len(s.active)))
	s.groupPool = append(s.groupPool, g[:0])
}

// launchGroup launches the next step of the first take idle sequences (in
// admission order): each decoding one's next token, then prompt chunks
// under the step budget, as step does. It reports whether the launch
// succeeded (on failure every sequence has been failed).
func (s *Scheduler) launchGroup(take int, split bool) bool {
	var g []*seq
	if n := len(s.groupPool); n > 0 {
		g, s.groupPool = s.groupPool[n-1][:0], s.groupPool[:n-1]
	}
	for _, q := range s.active {
		if len(g) == take {
			break
		}
		if !q.inFlight {
			g = append(g, q)
		}
	}
	out, decoding := s.buildBatch(g)
	s.flight = append(s.flight, g)
	for _, q := range g {
		q.inFlight = true
	}
	err := s.pipe.Launch(&s.batch, out, split)
	s.countStep(decoding)
	if err != nil {
		s.failAll(err)
		return false
	}
	n := int64(s.pipe.InFlight())
	if n > 1 {
		s.overlapped.Add(1)
	}
	if n > s.maxInFlight.Load() {
		s.maxInFlight.Store(n)
	}
	return true
}

// buildBatch fills s.batch with one step of the sequences in g: the next
// token of each decoding one first, then prompt chunks under the step's
// token budget. It sets each sequence's output row (-1: none) and returns
// what the rows must hold and how many sequences decode.
func (s *Scheduler) buildBatch(g []*seq) (Output, int) {
	s.batch.Reset()
	budget := s.cfg.StepTokens
	outs, decoding := 0, 0
	for _, q := range g {
		q.logits = -1
		if q.fed == len(q.prompt) {
			pos := len(q.toks) - 1
			s.batch.Add(q.toks[pos], int32(pos), q.id, true)
			q.logits = outs
			outs++
			decoding++
			budget--
		}
	}
	for _, q := range g {
		if q.fed == len(q.prompt) || budget == 0 {
			continue
		}
		n := min(len(q.prompt)-q.fed, budget)
		for i := q.fed; i < q.fed+n; i++ {
			last := i == len(q.prompt)-1
			s.batch.Add(q.prompt[i], int32(i), q.id, last)
			if last {
				q.logits = outs
				outs++
			}
		}
		q.fed += n
		budget -= n
		if q.shifts > 0 {
			s.shiftToks.Add(int64(n))
		} else {
			s.promptToks.Add(int64(n))
		}
	}
	// What the output rows must hold: the ranks' best candidates where
	// every sequence's sampler can use them exactly, else full rows.
	var out Output
	for _, q := range g {
		if q.logits >= 0 {
			out = out.Merge(s.need(q))
		}
	}
	return out, decoding
}

// need is what q's output row must hold: NeedFor, with room for the
// banned end-of-generation tokens among the candidates.
func (s *Scheduler) need(q *seq) Output {
	j := q.st.job
	o := NeedFor(j.Sampler.Params(), len(q.toks), j.TopLogprobs >= 0 || j.Constraint != nil)
	if j.IgnoreEOG && !o.Full {
		// Each rank's list may hold every banned token before the one
		// that is picked.
		o.TopK += len(s.eog)
	}
	return o
}

// stepDone records a step's outcome for /health: a backend that could not
// run it is degraded until the next step that runs.
func (s *Scheduler) stepDone(err error) {
	if err != nil && errors.Is(err, ErrUnavailable) {
		why := err.Error()
		s.degraded.Store(&why)
	} else if err == nil && s.degraded.Load() != nil {
		s.degraded.Store(nil)
	}
}

// countStep records a step that decoded n sequences (for /metrics and
// the largest batch seen).
func (s *Scheduler) countStep(n int) {
	s.steps.Add(1)
	s.stepSeqs[n].Add(1)
	if int64(n) > s.maxStep.Load() {
		s.maxStep.Store(int64(n))
	}
}

// failAll ends every running sequence after a failed step: the backend
// commits nothing of a failed step (and a cluster loses every step in
// flight), so their caches no longer match their tokens. The cached
// prefixes go too: a cluster re-forms with empty caches.
func (s *Scheduler) failAll(err error) {
	s.stepDone(err)
	for _, q := range s.active {
		s.end(q, FinishError, fmt.Errorf("engine: step failed: %w", err), false)
	}
	clear(s.active)
	s.active = s.active[:0]
	clear(s.flight)
	s.flight = s.flight[:0]
	s.busy.Store(0)
	for i := range s.lru {
		s.b.Drop(s.lru[i].id)
	}
	clear(s.lru)
	s.lru = s.lru[:0]
	s.cachedN.Store(0)
}
