package engine

import (
	"context"
	"errors"
	"fmt"

	"braid/internal/kvcache"
)

// Exclusive is what a function run by Scheduler.Exclusive may use: the
// backend, between two steps, and a sequence of its own in the cache.
type Exclusive struct {
	Backend Backend
	// Seq is a sequence id no request uses; it is dropped after the
	// function returns.
	Seq kvcache.SeqID
	s   *Scheduler
}

// Reserve makes room for n positions of Seq, evicting sequences kept for
// prefix reuse while the cache is full (never a running request's).
func (x *Exclusive) Reserve(n int) error {
	return x.s.reserveRetry(func() error { return x.Backend.Reserve(x.Seq, n) })
}

type exclusiveReq struct {
	ctx  context.Context
	fn   func(*Exclusive) error
	done chan error
}

// ErrNotRunning is Exclusive's error when the scheduler has stopped (or
// never started).
var ErrNotRunning = errors.New("engine: the scheduler is not running")

// Exclusive runs fn on the scheduler's goroutine between two steps, with
// the backend to itself: the way to use a backend that only the loop may
// touch (a cluster's connections) for work that is not a generation, such
// as embeddings over a split. Running requests wait for fn (their next
// step comes after it), so fn should be short: one input, not a batch. On
// a pipelined backend no step is left in flight when fn runs. It returns
// fn's error, ctx's if it ends first (fn then does not run, or its result
// is dropped), or ErrNotRunning.
func (s *Scheduler) Exclusive(ctx context.Context, fn func(*Exclusive) error) error {
	if !s.running.Load() {
		return ErrNotRunning
	}
	r := &exclusiveReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.exclusive <- r:
	case <-s.stopped:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runExclusive serves the exclusive requests that came, if no pipelined
// step is in flight; while one is, it holds the next launches back
// (exclusiveWait) so that the pipeline drains.
func (s *Scheduler) runExclusive() {
	for {
		if s.exclusiveNext == nil {
			select {
			case r := <-s.exclusive:
				s.exclusiveNext = r
			default:
				return
			}
		}
		if s.pipe != nil && s.pipe.InFlight() > 0 {
			return
		}
		r := s.exclusiveNext
		s.exclusiveNext = nil
		s.serveExclusive(r)
	}
}

func (s *Scheduler) serveExclusive(r *exclusiveReq) {
	if err := r.ctx.Err(); err != nil {
		r.done <- err
		return
	}
	x := &Exclusive{Backend: s.b, Seq: s.newID(), s: s}
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("engine: exclusive work panicked: %v", p)
			}
		}()
		return r.fn(x)
	}()
	s.b.Drop(x.Seq)
	r.done <- err
}

// failExclusive answers every exclusive request still queued when the
// loop ends.
func (s *Scheduler) failExclusive() {
	if s.exclusiveNext != nil {
		s.exclusiveNext.done <- ErrNotRunning
		s.exclusiveNext = nil
	}
	for {
		select {
		case r := <-s.exclusive:
			r.done <- ErrNotRunning
		default:
			return
		}
	}
}
