package model

import (
	"errors"
	"fmt"
	"sync"
)

// LocalGroup is a tensor-parallel group of ranks in one process (goroutines
// sharing memory), for tests and single-process splits. It implements the
// one-shot all-reduce of the cluster: every rank sums every rank's partial in
// rank order, so all ranks hold bit-identical results, the same sums the TCP
// transport computes.
type LocalGroup struct {
	n     int
	mu    sync.Mutex
	cond  sync.Cond
	gen   uint64
	count int
	err   error
	parts [][]float32 // each rank's buffer during an all-reduce
	sums  [][]float32 // each rank's private result, grown as needed
}

// ErrAborted is wrapped by every call on a LocalGroup or LocalStage after
// Abort.
var ErrAborted = errors.New("model: local group aborted")

// NewLocalGroup makes a group of size ranks.
func NewLocalGroup(size int) *LocalGroup {
	g := &LocalGroup{n: size, parts: make([][]float32, size), sums: make([][]float32, size)}
	g.cond.L = &g.mu
	return g
}

// Comm is rank r's view of the group.
func (g *LocalGroup) Comm(r int) Comm { return localComm{g, r} }

// Abort wakes every rank waiting in the group and makes every later call
// fail: a rank that fails a step calls it so that its peers do not wait for
// it forever.
func (g *LocalGroup) Abort(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = fmt.Errorf("%w: %v", ErrAborted, err)
	}
	g.cond.Broadcast()
	g.mu.Unlock()
}

// barrier returns when all ranks have reached it (or the group is aborted).
func (g *LocalGroup) barrier() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	gen := g.gen
	g.count++
	if g.count == g.n {
		g.count = 0
		g.gen++
		g.cond.Broadcast()
		return nil
	}
	for gen == g.gen && g.err == nil {
		g.cond.Wait()
	}
	return g.err
}

type localComm struct {
	g *LocalGroup
	r int
}

func (c localComm) Rank() int { return c.r }
func (c localComm) Size() int { return c.g.n }

// AllReduceSum publishes x, waits for every rank, sums all partials in rank
// order into a private buffer, waits again (so no rank overwrites its x
// while another still reads it) and copies the sum back.
func (c localComm) AllReduceSum(x []float32) error {
	g := c.g
	g.parts[c.r] = x
	if err := g.barrier(); err != nil {
		return err
	}
	for r, p := range g.parts {
		if len(p) != len(x) {
			err := fmt.Errorf("model: all-reduce of %d values on rank %d but %d on rank %d", len(x), c.r, len(p), r)
			g.Abort(err)
			return err
		}
	}
	if cap(g.sums[c.r]) < len(x) {
		g.sums[c.r] = make([]float32, len(x))
	}
	sum := g.sums[c.r][:len(x)]
	copy(sum, g.parts[0])
	for _, p := range g.parts[1:] {
		for i, v := range p {
			sum[i] += v
		}
	}
	if err := g.barrier(); err != nil {
		return err
	}
	copy(x, sum)
	return nil
}

// LocalStage is one rank's StageLink in an in-process pipeline: a
// rendezvous with the previous and the next stage (Send returns once the
// receiver has copied x).
type LocalStage struct {
	prev, next *localPipe
	done       chan struct{}
	once       *sync.Once
	err        *error
}

type localPipe struct {
	ch  chan []float32
	ack chan error
}

// NewLocalStages links stages ranks into a pipeline: stage i receives from
// stage i-1 and sends to stage i+1. For tensor parallelism inside the
// stages, make one pipeline per tensor-parallel rank.
func NewLocalStages(stages int) []*LocalStage {
	done := make(chan struct{})
	once := new(sync.Once)
	var err error
	pipes := make([]*localPipe, stages+1)
	for i := 1; i < stages; i++ {
		pipes[i] = &localPipe{ch: make(chan []float32), ack: make(chan error)}
	}
	out := make([]*LocalStage, stages)
	for i := range out {
		out[i] = &LocalStage{prev: pipes[i], next: pipes[i+1], done: done, once: once, err: &err}
	}
	return out
}

// Abort wakes every stage of the pipeline waiting to send or receive and
// makes every later transfer fail.
func (s *LocalStage) Abort(err error) {
	s.once.Do(func() {
		*s.err = fmt.Errorf("%w: %v", ErrAborted, err)
		close(s.done)
	})
}

// Recv waits for the previous stage's Send and copies its values into x.
func (s *LocalStage) Recv(x []float32) error {
	if s.prev == nil {
		return errors.New("model: the first stage has no previous stage to receive from")
	}
	select {
	case y := <-s.prev.ch:
		var err error
		if len(y) != len(x) {
			err = fmt.Errorf("model: stage transfer of %d values, receiver expects %d", len(y), len(x))
		} else {
			copy(x, y)
		}
		select {
		case s.prev.ack <- err:
		case <-s.done:
			return *s.err
		}
		return err
	case <-s.done:
		return *s.err
	}
}

// Send hands x to the next stage and waits until it is copied.
func (s *LocalStage) Send(x []float32) error {
	if s.next == nil {
		return errors.New("model: the last stage has no next stage to send to")
	}
	select {
	case s.next.ch <- x:
	case <-s.done:
		return *s.err
	}
	select {
	case err := <-s.next.ack:
		return err
	case <-s.done:
		return *s.err
	}
}
