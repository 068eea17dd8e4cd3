package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// spinFor is how long an idle worker keeps polling for the next job before
// it parks, and how long the caller polls for the workers to finish. A
// decode step is a chain of ~100 small products, each a fraction of a
// millisecond: waking a parked thread through the scheduler for each of them
// costs tens of microseconds, during which the other thread has taken most
// of the chunks (measured: the caller did ~80 % of a 1B model's decode work
// with channel wake-ups). llama.cpp's threads poll the same way.
const spinFor = 200 * time.Microsecond

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
	parked  []atomic.Bool   // worker i is blocked on wake[i] (or about to be)
	closed  bool
	stop    atomic.Bool

	gen     atomic.Uint64 // bumped once per job; workers poll it
	pending atomic.Int32  // workers still running the current job

	next atomic.Int64 // next chunk to take; chunks are taken dynamically
	job  job

	scratch []byte // quantized activations, grown to the largest call
	actKey  actKey // what actX holds, within one MatMulShared
	actX    []byte
	actLdx  int

	exactCols int // see SetExactColumns

	x8free chan []byte // unpacked-row scratch of repacked products' tiles
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

	// MatVecHeads
	heads headsJob

	// SwiGLU
	dst, gate, up []float32
	ewLen         int // values per chunk
}

// NewPool starts a pool of threads workers (the caller's goroutine counts as
// one); threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, parked: make([]atomic.Bool, threads-1), x8free: make(chan []byte, threads)}
	for i := 1; i < threads; i++ {
		p.wake = append(p.wake, make(chan struct{}, 1))
	}
	for i := range p.wake {
		go p.worker(i)
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
	p.stop.Store(true)
	for _, ch := range p.wake {
		close(ch)
	}
}

// worker runs jobs as their generation appears: it polls for spinFor after
// each job, then parks on its channel until start wakes it.
func (p *Pool) worker(i int) {
	// Not locked to an OS thread: a locked goroutine that yields hands its
	// processor to another thread and must be woken back, which is the very
	// latency the polling avoids. Unlocked, the Gosched in the polling loop
	// is cheap and lets the process's other goroutines (HTTP handlers
	// streaming tokens) run between products.
	// Generation 0 is "no job yet": the first job may be posted before this
	// goroutine first runs, so seen must not be read from gen here.
	seen := uint64(0)
	for {
		if !p.await(i, seen) {
			return
		}
		seen = p.gen.Load()
		p.drain()
		p.pending.Add(-1)
	}
}

// await returns when a job newer than seen exists (true) or the pool is
// closed (false). Parking is announced before the last check of gen, and
// start bumps gen before it looks at parked: whichever happens second sees
// the other, so a job is never missed. A wake-up that arrives after the
// worker found the job by polling leaves a token in the channel, which only
// makes a later park return early and poll again.
//
// The announcement is a Swap, not a Store: Go's atomics are sequentially
// consistent, so a Store would do on real hardware, but qemu-user's arm64
// emulation lets a store-release be passed by the next load-acquire on an
// x86 host, and then both sides missed each other: the worker slept on its
// channel while the caller waited for it (TestExactEveryFormat hung for ten
// minutes in the arm64 test run). A read-modify-write orders both ways
// everywhere, and a park is rare enough (after spinFor idle) to pay for it.
func (p *Pool) await(i int, seen uint64) bool {
	deadline := time.Now().Add(spinFor)
	for n := 0; ; n++ {
		if p.gen.Load() != seen {
			return true
		}
		if p.stop.Load() {
			return false
		}
		if n%64 == 63 {
			runtime.Gosched()
		}
		if n%64 == 63 && time.Now().After(deadline) {
			p.parked[i].Swap(true)
			if p.gen.Load() != seen {
				p.parked[i].Store(false)
				return true
			}
			if _, ok := <-p.wake[i]; !ok {
				return false
			}
			p.parked[i].Store(false)
			deadline = time.Now().Add(spinFor)
		}
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
	p.pending.Store(int32(len(p.wake)))
	p.gen.Add(1)
	for i := range p.wake {
		if p.parked[i].Load() {
			select {
			case p.wake[i] <- struct{}{}:
			default: // a token is already waiting
			}
		}
	}
	p.drain()
	// The workers finish within a chunk of the caller: poll, yielding now
	// and then so that other goroutines (a handler streaming the last
	// token) are not starved by a tight loop.
	for n := 0; p.pending.Load() > 0; n++ {
		if n%64 == 63 {
			runtime.Gosched()
		}
	}
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

// SwiGLU is SwiGLU over the pool's threads when the vectors are long
// enough to be worth a wake-up (a batched step's n·FF values).
func (p *Pool) SwiGLU(dst, gate, up []float32) {
	n := len(dst)
	if p.threads == 1 || n < 1<<14 {
		SwiGLU(dst, gate, up)
		return
	}
	gate, up = gate[:n], up[:n]
	p.mu.Lock()
	defer p.mu.Unlock()
	chunk := (n/(2*p.threads) + 63) &^ 63
	p.job.dst, p.job.gate, p.job.up, p.job.ewLen = dst, gate, up, chunk
	p.job.chunks = (n + chunk - 1) / chunk
	p.job.run = runSwiGLU
	p.start()
	p.job.dst, p.job.gate, p.job.up = nil, nil, nil
}

func runSwiGLU(p *Pool, c int) {
	lo := c * p.job.ewLen
	hi := min(lo+p.job.ewLen, len(p.job.dst))
	SwiGLU(p.job.dst[lo:hi], p.job.gate[lo:hi], p.job.up[lo:hi])
}

func runFor(p *Pool, c int) {
	lo := c * p.job.forLen
	hi := min(lo+p.job.forLen, p.job.n)
	p.job.fn(lo, hi)
}
