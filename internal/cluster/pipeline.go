package cluster

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"braid/internal/engine"
	"braid/internal/model"
)

// A step is launched (Step frames out, this rank's part run) and later
// collected (every worker's result in, the rows merged). Forward does both
// at once; engine.Pipeline's Launch and Collect let several steps be in
// flight on a layer split, so that the first stage (this rank) runs one
// group of sequences' step while the later stages run another's.
//
// Why this stays in step on every rank: each worker runs its Step frames
// in the order sent and answers each with one result, in order; the data
// plane's messages carry their step number, and each pair of ranks sees a
// step's messages in the same order as the step frames. KV operations
// made between launches (the scheduler ends a collected group's sequences
// and admits new ones) ride with the next Step frame, so every worker
// applies them after the steps already launched, as this rank did (its
// part of those steps ran inside their Launch). The scheduler never
// touches a sequence of a step in flight.

// flightStep is a launched step not yet collected.
type flightStep struct {
	no    uint64
	rows  int
	out   engine.Output
	start time.Time
	// hidden receives the output rows' hidden states (ForwardHidden), nil
	// when the step did not ask.
	hidden []float32
	// this rank's part: its time in the step and the waits inside it
	local, allReduce, pipeline time.Duration
}

// Stages is the number of pipeline stages.
func (c *Cluster) Stages() int { return c.mode.PP }

// Depth is how many steps to keep in flight (engine.Pipeline): one per
// stage, fewer when stages share this node's cores. The ranks on this node
// (rank 0 and the workers whose data frames come through shared memory)
// compute at once only as far as its cores go, so a step in flight beyond
// that only waits for a core while it splits the sequences into smaller
// groups (measured: 3 stages on 2 cores, 2 steps in flight beat 3). Ranks
// elsewhere count as having their own cores.
func (c *Cluster) Depth() int {
	if c.mesh == nil {
		return c.mode.PP
	}
	local := func(r int) bool { return r == 0 || c.mesh.Peer(r).Kind == "tcp+shm" }
	threads := func(r int) int {
		if r == 0 {
			return c.pool.Threads()
		}
		return c.workers[r-1].info.Threads
	}
	return pipelineDepth(c.mode.PP, c.mode.TP, local, threads, runtime.NumCPU())
}

// pipelineDepth is Depth for pp stages of tp ranks (rank = stage*tp + i):
// the stages whose ranks all run on this node's cores (local) count as far
// as cores / (the most threads one of them uses) of them fit; the others
// count in full.
func pipelineDepth(pp, tp int, local func(rank int) bool, threads func(rank int) int, cores int) int {
	here, need := 0, 1
	for s := 0; s < pp; s++ {
		all, t := true, 0
		for i := 0; i < tp; i++ {
			all = all && local(s*tp+i)
			t += max(threads(s*tp+i), 1)
		}
		if all {
			here++
			need = max(need, t)
		}
	}
	return pp - here + min(here, max(1, cores/need))
}

// InFlight is the number of launched steps not yet collected.
func (c *Cluster) InFlight() int { return len(c.flight) }

// Launch starts a step on every rank and returns once this rank's part
// has run (engine.Pipeline). A step that overlaps others runs whole
// (split false); split cuts it into Depth micro-batches, as Forward does.
// Its rows come from the Collect that finishes it.
func (c *Cluster) Launch(b *model.Batch, out engine.Output, split bool) error {
	if c.closed {
		return errors.New("cluster: closed")
	}
	if !c.formed {
		if err := c.reform(); err != nil {
			return err
		}
	}
	rows := b.Outputs()
	if !out.Full && out.TopK <= 0 {
		out.TopK = 1
	}
	if out.Full && rows > c.maxFullRows() {
		return fmt.Errorf("%w: %d rows of full logits in one pipelined step; a result frame carries at most %d (use Forward)", model.ErrBadBatch, rows, c.maxFullRows())
	}
	parts := 1
	if split {
		parts = c.Depth()
	}
	return c.launch(b, out, parts, nil)
}

// Collect waits for the oldest step in flight and writes its output rows
// into logits (engine.Pipeline).
func (c *Cluster) Collect(logits []float32) error {
	if len(c.flight) == 0 {
		return errors.New("cluster: Collect with no step in flight")
	}
	if rows := c.flight[0].rows; len(logits) < rows*c.vocab {
		err := fmt.Errorf("%w: logits buffer holds %d values, step %d needs %d", model.ErrBadBatch, len(logits), c.flight[0].no, rows*c.vocab)
		c.teardown(err) // its results and those of the later steps would go unread
		return err
	}
	return c.collect(logits)
}

// launch sends the Step frame of b (cut into up to parts micro-batches) to
// every worker and runs this rank's part of it; with hidden set, the
// step returns the output rows' hidden states there. The frame carries
// SetExactColumns's bound.
func (c *Cluster) launch(b *model.Batch, out engine.Output, parts int, hidden []float32) error {
	start := time.Now()
	c.stepNo++
	msg := stepMsg{Step: c.stepNo, Full: out.Full, TopK: out.TopK, Parts: max(parts, 1), Ops: c.ops, Batch: *b,
		Hidden: hidden != nil, Exact: c.exact}
	c.buf = appendStep(c.buf[:0], &msg)
	c.ops = c.ops[:0]
	for _, w := range c.workers {
		if err := c.send(w, c.buf); err != nil {
			err = fmt.Errorf("%w: step %d: %w", ErrUnavailable, c.stepNo, c.whyGone(w, err))
			c.teardown(err)
			return err
		}
		w.stepReqs.Add(1)
	}
	c.flight = append(c.flight, flightStep{no: c.stepNo, rows: b.Outputs(), out: out, start: start, hidden: hidden})
	ld, lerr := c.local.run(c.stepNo, nil, b, msg.Parts, msg.Hidden)
	if lerr != nil {
		// Wake the workers waiting on this rank at once, then gather
		// what they say about every step in flight: the most telling
		// cause names the rank that failed.
		if c.mesh != nil {
			c.mesh.Close()
		}
		var errs []error
		for _, w := range c.workers {
			for k := range c.flight {
				if _, err := c.recvReq(w, w.req-uint64(len(c.flight)-1-k), nil); err != nil {
					errs = append(errs, err)
					var re *remoteError
					if !errors.As(err, &re) {
						break // the session is gone: nothing more comes
					}
				}
			}
		}
		err := c.stepError(lerr, errs)
		c.teardown(err)
		return err
	}
	f := &c.flight[len(c.flight)-1]
	f.local = ld
	f.allReduce, f.pipeline = c.local.waits()
	return nil
}

// collect receives every worker's result of the oldest step in flight and
// merges its rows into logits.
func (c *Cluster) collect(logits []float32) error {
	f := c.flight[0]
	c.flight = append(c.flight[:0], c.flight[1:]...)
	var errs []error
	for _, w := range c.workers {
		// Every step in flight sent each worker one request, and nothing
		// else is sent meanwhile: this step's is len(c.flight) before the
		// last.
		p, err := c.recvReq(w, w.req-uint64(len(c.flight)), nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w.stepResps.Add(1)
		if err := parseResult(p, &w.res); err != nil {
			errs = append(errs, c.sessErr(w, err))
		}
	}
	if len(errs) > 0 {
		err := c.stepError(nil, errs)
		c.teardown(err)
		return err
	}
	if c.profiling {
		c.profSteps++
		c.profTime += time.Since(f.start)
	}
	c.localTotals.add(f.local, f.allReduce, f.pipeline)
	for _, w := range c.workers {
		w.totals.add(time.Duration(w.res.Compute), time.Duration(w.res.Reduce), time.Duration(w.res.Stage))
		w.publish()
	}
	if f.rows == 0 {
		return nil
	}
	if err := c.merge(f.rows, f.out, logits); err != nil {
		c.teardown(err)
		return err
	}
	if f.hidden != nil {
		if err := c.mergeHidden(f.rows, f.hidden); err != nil {
			c.teardown(err)
			return err
		}
	}
	return nil
}

// mergeHidden copies a step's hidden states from the rank that sent them:
// the first of the last stage (rank.sendsHidden), this one on a tensor
// split.
func (c *Cluster) mergeHidden(rows int, hidden []float32) error {
	E := c.local.cfg.Embd
	from := (c.mode.PP - 1) * c.mode.TP
	src := c.local.hidden
	if from > 0 {
		r := &c.workers[from-1].res
		if r.Rows != rows || r.HiddenWidth != E {
			return fmt.Errorf("cluster: step %d: %s returned %d rows of hidden states of %d for %d outputs of %d", c.stepNo, c.describe(from), r.Rows, r.HiddenWidth, rows, E)
		}
		src = r.Hidden
	}
	if len(src) != rows*E {
		return fmt.Errorf("cluster: step %d: %d hidden values for %d outputs of %d", c.stepNo, len(src), rows, E)
	}
	copy(hidden[:rows*E], src)
	return nil
}
