package kernels

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolWakeups: a worker that has parked (idle past spinFor) is woken by
// the next job however the two race. Each call waits a spinFor-sized gap
// first, so that the worker parks just as the job is posted; a lost wake-up
// shows as a call that never returns (bounded here by a watchdog, which
// names the call). Under qemu-user's arm64 emulation a plain store of the
// parked flag lost a wake-up within the first few thousand calls (see
// Pool.await).
func TestPoolWakeups(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	const calls = 3000 // about a second, natively and under qemu-user
	done := make(chan struct{})
	var at atomic.Int64
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			panic(fmt.Sprintf("kernels: Pool.For call %d did not return in 2 minutes: a parked worker was not woken", at.Load()))
		}
	}()
	defer close(done)
	var sum [2]int
	for i := range calls {
		at.Store(int64(i))
		// Gaps from a fraction of spinFor to a few times it.
		gap := time.Duration(i%7) * spinFor / 2
		for start := time.Now(); time.Since(start) < gap; {
		}
		sum = [2]int{}
		p.For(2, func(lo, hi int) {
			for k := lo; k < hi; k++ {
				sum[k]++
			}
		})
		if sum != [2]int{1, 1} {
			t.Fatalf("call %d: ranges covered %v, want each index once", i, sum)
		}
	}
}
