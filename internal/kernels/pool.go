package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines that run the parallel loops of
// one model instance. It is created once: starting goroutines per matrix
// product would cost more than a small product itself at decode time.
//
// Calls on one Pool are serialized (each uses every thread), so a Pool is
// safe for concurrent use but gives no parallelism between callers; give
// independent models their own Pools.
type Pool struct {
	threads int
	mu      sync.Mutex
	wake    []chan struct{} // one per worker; the caller is thread 0
	wg      sync.WaitGroup
	closed  bool

	next atomic.Int64 // next chunk to take; chunks are taken dynamically
	job  job

	scratch []byte // quantized activations, grown to the largest call
}

// job describes the work of one parallel call; workers read it after being
// woken through their channel, which orders the writes before the reads.
type job struct {
	chunks int
	run    func(p *Pool, chunk int)

	// For
	fn        func(lo, hi int)
	n, forLen int

	// MatMul and activation conversion
	mm matJob
}

// NewPool starts a pool of threads workers (the caller's goroutine counts as
// one); threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads}
	for i := 1; i < threads; i++ {
		ch := make(chan struct{}, 1)
		p.wake = append(p.wake, ch)
		go p.worker(ch)
	}
	return p
}

// Threads returns the number of threads the pool splits work over.
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, ch := range p.wake {
		close(ch)
	}
}

func (p *Pool) worker(ch chan struct{}) {
	// A locked thread keeps a worker from being descheduled behind another
	// goroutine of the process while the others wait for it.
	runtime.LockOSThread()
	for range ch {
		p.drain()
		p.wg.Done()
	}
}

// drain takes chunks until none are left. Dynamic assignment matters on
// shared machines, where one thread may be preempted mid-product.
func (p *Pool) drain() {
	j := &p.job
	for {
		c := int(p.next.Add(1) - 1)
		if c >= j.chunks {
			return
		}
		j.run(p, c)
	}
}

// start runs the current job on all threads and waits for it; p.mu is held.
func (p *Pool) start() {
	if p.closed {
		panic("kernels: Pool used after Close")
	}
	p.next.Store(0)
	workers := len(p.wake)
	if workers > p.job.chunks-1 {
		workers = p.job.chunks - 1 // no point waking threads without work
	}
	if workers > 0 {
		p.wg.Add(workers)
		for _, ch := range p.wake[:workers] {
			ch <- struct{}{}
		}
	}
	p.drain()
	p.wg.Wait()
}

// For calls fn(lo, hi) over disjoint ranges covering [0, n), in parallel on
// the pool's threads, and returns when all are done. Ranges are about
// n/(4*Threads) long so a slow thread does not hold up the rest.
//
// For itself does not allocate, but a closure that captures variables
// escapes to the heap when passed here, so the caller pays one small
// allocation per call unless fn is a method value or captures nothing.
func (p *Pool) For(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	chunk := (n + 4*p.threads - 1) / (4 * p.threads)
	if p.threads == 1 {
		chunk = n
	}
	p.job.fn, p.job.n, p.job.forLen = fn, n, chunk
	p.job.chunks = (n + chunk - 1) / chunk
	p.job.run = runFor
	p.start()
	p.job.fn = nil
}

func runFor(p *Pool, c int) {
	lo := c * p.job.forLen
	hi := min(lo+p.job.forLen, p.job.n)
	p.job.fn(lo, hi)
}
