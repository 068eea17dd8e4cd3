//go:build amd64 && unix

package kernels

import (
	"fmt"
	"math"
	"testing"

	"braid/internal/quant"
)

// TestKQuantDotOrderMatMul: MatMul through the dot-order kernels (every
// candidate with an mmDot: the AVX2 ones of kquant_md2_amd64.s here, the
// AVX-512 ones where the CPU has them) on random shapes, rows a multiple of
// nothing and 1 to 16 vectors (above the kernel's width MatMul runs it on
// groups of columns), gives each vector the bits of the one-vector product
// and is within the reference tolerance of the pure-Go kernel; with the
// prefetches on and off (Intel's and AMD's paths).
func TestKQuantDotOrderMatMul(t *testing.T) {
	saved := kqPrefetchOn
	defer func() { kqPrefetchOn = saved }()
	tested := false
	p := NewPool(2)
	defer p.Close()
	p.SetExactColumns(16)
	defer p.SetExactColumns(0)
	for _, typ := range kqTypes {
		for _, impl := range fast[typ] {
			if impl.mmDot == nil {
				continue
			}
			tested = true
			// n = 1..16: every column count of the kernel, and every
			// split into a group of 8 and a shorter one.
			for trial := 0; trial < 16; trial++ {
				name := fmt.Sprintf("%s/%s/%d", typ, impl.name, trial)
				r := kqRand(name)
				rows := 1 + r.IntN(150)
				cols := 256 * (1 + r.IntN(10))
				n := trial + 1
				kqPrefetchOn = byte(trial % 2)
				w := Matrix{Type: typ, Rows: rows, Cols: cols, Data: kqRandWeights(r, typ, rows*cols/256, "rand")}
				x := make([]float32, n*cols)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				all := make([]float32, n*rows)
				p.mu.Lock()
				p.matMulWith(impl, all, &w, x, n)
				p.mu.Unlock()
				ref := make([]float32, n*rows)
				p.mu.Lock()
				p.matMulWith(generic[typ], ref, &w, x, n)
				p.mu.Unlock()
				ldw := len(w.Data) / rows
				xq := make([]byte, cols/256*kqQ8KSize)
				for v := 0; v < n; v++ {
					one := make([]float32, rows)
					p.mu.Lock()
					p.matMulWith(impl, one, &w, x[v*cols:(v+1)*cols], 1)
					p.mu.Unlock()
					if err := quant.Quantize(quant.Q8_K, x[v*cols:(v+1)*cols], xq); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < rows; i++ {
						got := all[v*rows+i]
						if math.Float32bits(got) != math.Float32bits(one[i]) {
							t.Fatalf("%s: %dx%d by %d vectors: vector %d row %d: %.9g (%#x), alone %.9g (%#x)", name, rows, cols, n, v, i, got, math.Float32bits(got), one[i], math.Float32bits(one[i]))
						}
						want := ref[v*rows+i]
						tol := 1e-6*kqMagnitude(typ, w.Data[i*ldw:(i+1)*ldw], xq, cols) + 1e-30
						if math.Abs(float64(got)-float64(want)) > tol {
							t.Fatalf("%s: vector %d row %d: %.9g, reference %.9g (diff %.3g > tol %.3g)", name, v, i, got, want, got-want, tol)
						}
					}
				}
			}
		}
	}
	if !tested {
		t.Skip("no dot-order K-quant kernel on this CPU")
	}
}

// TestKQuantDotOrderNoOverread runs the dot-order kernels on weights and
// activations that end at a guard page: their last row and column must
// not read past the last block.
func TestKQuantDotOrderNoOverread(t *testing.T) {
	tested := false
	for _, typ := range kqTypes {
		for _, impl := range fast[typ] {
			if impl.mmDot == nil {
				continue
			}
			tested = true
			for cols := 1; cols <= impl.mmDotCols; cols++ {
				const n, rows = 512, 3
				r := kqRand(fmt.Sprintf("%s/%s/%d", typ, impl.name, cols))
				ldw := n / 256 * typ.TypeSize()
				w0 := kqRandWeights(r, typ, rows*n/256, "exact")
				var x0 []byte
				for c := 0; c < cols; c++ {
					x0 = append(x0, kqRandActs(r, n, "exact")...)
				}
				w, x := kqGuarded(t, w0), kqGuarded(t, x0)
				dst := make([]float32, cols*rows)
				impl.mmDot(n, w, ldw, x, kqQ8KSize*n/256, dst, rows, rows, cols)
				for c := 0; c < cols; c++ {
					for i := 0; i < rows; i++ {
						want := impl.dot(n, w0[i*ldw:(i+1)*ldw], x0[c*kqQ8KSize*n/256:])
						if got := dst[c*rows+i]; math.Float32bits(got) != math.Float32bits(want) {
							t.Errorf("%s/%s cols=%d: [%d,%d] = %.9g, the row dot %.9g", typ, impl.name, cols, c, i, got, want)
						}
					}
				}
			}
		}
	}
	if !tested {
		t.Skip("no dot-order K-quant kernel on this CPU")
	}
}
