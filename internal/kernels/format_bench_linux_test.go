package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"

	"braid/internal/quant"
)

// decodeFormats are the weight formats of issue 19's bandwidth table: Q4_K
// is the yardstick, the others should stream their weights as fast.
var decodeFormats = []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q5_K, quant.Q8_0, quant.IQ4_XS, quant.MXFP4, quant.F16}

// decodeShape is the matrix of about size bytes of typ weights, 4096 values
// a row (a hidden size of the 7-8B class), in whole multiples of 64 rows.
func decodeShape(typ quant.Type, size int) (rows, cols int) {
	cols = 4096
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		panic(err)
	}
	return max(64, size/int(rb)/64*64), cols
}

// decodeMiB is the weight size of BenchmarkDecodeFormats in MiB:
// BRAID_BENCH_MIB, else 128, four times this machine's 32 MiB L3, so that
// every product streams its weights from memory as a decode step does.
func decodeMiB(b *testing.B) int {
	s := os.Getenv("BRAID_BENCH_MIB")
	if s == "" {
		return 128
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("BRAID_BENCH_MIB=%q: want a positive number of MiB", s)
	}
	return n
}

// BenchmarkDecodeFormats is the decode matrix-vector product (one
// activation vector, converted to the kernel's activation format as in a
// decode step) of a matrix far larger than the last-level cache, in each
// format of decodeFormats, on the pool's threads (BRAID_THREADS=1 for the
// one-thread figure). It reports GB/s of weight bytes streamed, the figure
// scripts/compare-formats.sh sets beside llama.cpp's for the same shapes.
//
// With one thread the product runs on the benchmark's own OS thread, so
// it also reports cpu-GB/s, the bytes per second of that thread's CPU time:
// on a shared machine the wall figure counts the time other processes held
// the core, the CPU-time figure does not (it still feels their memory
// traffic).
//
// The Hot variant runs the same row dots on a 512 KiB matrix that stays
// in L2: the kernel's compute speed in the same unit. A format whose hot
// figure is not well above the cold one is bound by its arithmetic, not by
// memory.
func BenchmarkDecodeFormats(b *testing.B) {
	p := NewPool(benchThreads())
	defer p.Close()
	mib := decodeMiB(b)
	for _, typ := range decodeFormats {
		rows, cols := decodeShape(typ, mib<<20)
		b.Run(fmt.Sprintf("Cold/%s/%dx%d", typ, rows, cols), func(b *testing.B) {
			w, x := benchMatrix(typ, rows, cols), benchActs(cols)
			dst := make([]float32, rows)
			p.MatMul(dst, w, x, 1) // faults the pages in
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.SetBytes(int64(len(w.Data)))
			b.ResetTimer()
			t0 := threadCPU(b)
			for i := 0; i < b.N; i++ {
				p.MatMul(dst, w, x, 1)
			}
			reportGBs(b, len(w.Data), t0, p.threads == 1)
		})
	}
	for _, typ := range decodeFormats {
		rows, cols := decodeShape(typ, 512<<10)
		b.Run(fmt.Sprintf("Hot/%s/%dx%d", typ, rows, cols), func(b *testing.B) {
			// The row dots alone, on activations converted once: at this
			// size the conversion MatMul does per call would be a visible
			// share.
			impl := implFor(typ)
			w, xf := benchMatrix(typ, rows, cols), benchActs(cols)
			ldw := len(w.Data) / rows
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rb, err := impl.act.RowBytes(int64(cols))
			if err != nil {
				b.Fatal(err)
			}
			x := make([]byte, rb)
			actQuantizers[impl.act](x, xf)
			b.SetBytes(int64(len(w.Data)))
			b.ResetTimer()
			t0 := threadCPU(b)
			var sink float32
			for i := 0; i < b.N; i++ {
				for r := 0; r < rows; r++ {
					sink += impl.dot(cols, w.Data[r*ldw:(r+1)*ldw], x)
				}
			}
			reportGBs(b, len(w.Data), t0, true)
			_ = sink
		})
	}
}

// benchActs is n normally distributed activations.
func benchActs(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// reportGBs reports the weight bytes streamed per second of wall time and,
// when the work ran on this OS thread (cpu), per second of its CPU time
// since t0.
func reportGBs(b *testing.B, size int, t0 int64, cpu bool) {
	bytes := float64(size) * float64(b.N)
	b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
	if cpu {
		b.ReportMetric(bytes/float64(threadCPU(b)-t0), "cpu-GB/s")
	}
}
