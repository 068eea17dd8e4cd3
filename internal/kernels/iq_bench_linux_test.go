package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time this OS thread has used.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Skipf("thread CPU clock: %v", err)
	}
	return ts.Nano()
}

// BenchmarkDotIQThreadCPU times every grid and ternary kernel on one
// 4096-value row (in L1) and reports, besides wall time, the CPU time of
// the benchmarking thread per dot (cpu-ns/op): on a shared machine the
// wall time counts the time other processes held the core, the thread's
// CPU time does not, so the kernels can be compared while it is busy.
func BenchmarkDotIQThreadCPU(b *testing.B) {
	for _, typ := range iqTypes {
		for _, impl := range kqImpls(typ) {
			b.Run(fmt.Sprintf("%s/%s", typ, impl.name), func(b *testing.B) {
				const n = 4096
				r := rand.New(rand.NewPCG(7, 8))
				w := iqRandWeights(r, typ, n/256, "rand")
				x := kqRandActs(r, n, "quantized")
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ResetTimer()
				t0 := threadCPU(b)
				var sink float32
				for i := 0; i < b.N; i++ {
					sink += impl.dot(n, w, x)
				}
				b.ReportMetric(float64(threadCPU(b)-t0)/float64(b.N), "cpu-ns/op")
				_ = sink
			})
		}
	}
}
