package kernels

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"braid/internal/quant"
	"golang.org/x/sys/cpu"
)

func randMatrix(rng *rand.Rand, typ quant.Type, rows, cols int) *Matrix {
	m := &Matrix{Type: typ, Rows: rows, Cols: cols}
	for r := 0; r < rows; r++ {
		m.Data = append(m.Data, randRow(rng, typ, cols)...)
	}
	return m
}

// TestMatMul compares MatMul with a naive loop: dequantize the weights and
// the converted activations, then dot in float64.
func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := []struct{ rows, cols, n int }{{1, 32, 1}, {7, 64, 1}, {37, 96, 3}, {130, 256, 17}, {64, 4096 + 32, 2}, {33, 512, 9}, {9, 128, 5}}
	for _, threads := range []int{1, 2, 3} {
		p := NewPool(threads)
		for _, typ := range append(myTypes[:len(myTypes):len(myTypes)], lowBitTypes...) {
			act := implFor(typ).act
			for _, s := range shapes {
				if s.cols%typ.BlockSize() != 0 {
					continue
				}
				w := randMatrix(rng, typ, s.rows, s.cols)
				x := make([]float32, s.n*s.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, s.n*s.rows)
				p.MatMul(dst, w, x, s.n)
				rb, _ := typ.RowBytes(int64(s.cols))
				for j := 0; j < s.n; j++ {
					xa := convAct(act, x[j*s.cols:(j+1)*s.cols])
					for i := 0; i < s.rows; i++ {
						want, tol := refDot(t, typ, act, s.cols, w.Data[i*int(rb):(i+1)*int(rb)], xa)
						got := dst[j*s.rows+i]
						if math.Abs(float64(got)-want) > tol+1e-30 {
							t.Fatalf("threads=%d %s %dx%d n=%d: dst[%d,%d] = %.9g, want %.9g", threads, typ, s.rows, s.cols, s.n, j, i, got, want)
						}
					}
				}
			}
		}
		p.Close()
	}
}

// TestMatMulShared checks that products sharing their activations give
// exactly MatMul's results, whatever the order of formats (a conversion is
// reused only by the format it was made for), and allocate nothing.
func TestMatMulShared(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	p := NewPool(2)
	defer p.Close()
	types := []quant.Type{quant.Q4_K, quant.Q4_K, quant.Q6_K, quant.Q4_K, quant.Q8_0, quant.F16, quant.F16, quant.F32, quant.Q5_K, quant.Q4_0}
	const cols = 512
	for _, n := range []int{1, 2, 8, 13} {
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		var outs []MatOut
		var want [][]float32
		for i, typ := range types {
			w := randMatrix(rng, typ, 40+8*i, cols)
			d := make([]float32, n*w.Rows)
			p.MatMul(d, w, x, n)
			want = append(want, d)
			outs = append(outs, MatOut{Dst: make([]float32, n*w.Rows), W: w})
		}
		p.MatMulShared(x, n, outs...)
		for i, o := range outs {
			for k := range o.Dst {
				if math.Float32bits(o.Dst[k]) != math.Float32bits(want[i][k]) {
					t.Fatalf("n=%d product %d (%s): dst[%d] = %g, MatMul gives %g", n, i, types[i], k, o.Dst[k], want[i][k])
				}
			}
		}
		if a := testing.AllocsPerRun(10, func() { p.MatMulShared(x, n, outs...) }); a != 0 {
			t.Errorf("n=%d: %v allocations per MatMulShared", n, a)
		}
		// A plain MatMul after it converts afresh: change x and compare.
		for i := range x {
			x[i] = -x[i]
		}
		p.MatMul(outs[1].Dst, outs[1].W, x, n)
		ref := make([]float32, len(outs[1].Dst))
		q := NewPool(1)
		q.MatMul(ref, outs[1].W, x, n)
		q.Close()
		for k := range ref {
			if math.Abs(float64(ref[k]-outs[1].Dst[k])) > 1e-3*(1+math.Abs(float64(ref[k]))) {
				t.Fatalf("n=%d: MatMul after MatMulShared used stale activations: %g vs %g", n, outs[1].Dst[k], ref[k])
			}
		}
	}
}

func TestMatMulAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	p := NewPool(2)
	defer p.Close()
	for _, typ := range myTypes {
		for _, n := range []int{1, 8} {
			w := randMatrix(rng, typ, 256, 512)
			x := make([]float32, n*512)
			dst := make([]float32, n*256)
			p.MatMul(dst, w, x, n) // grows the scratch
			if a := testing.AllocsPerRun(20, func() { p.MatMul(dst, w, x, n) }); a != 0 {
				t.Errorf("%s n=%d: %v allocations per MatMul", typ, n, a)
			}
		}
	}
}

func TestFor(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, n := range []int{1, 2, 7, 100, 1001} {
			seen := make([]int32, n)
			p.For(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&seen[i], 1)
				}
			})
			for i, v := range seen {
				if v != 1 {
					t.Fatalf("threads=%d n=%d: index %d visited %d times", threads, n, i, v)
				}
			}
		}
		p.Close()
	}
}

// TestPoolSwiGLU checks the pooled SwiGLU against the plain one on lengths
// below and above the size it splits at, unaligned tails included, and in
// place; it must not allocate.
func TestPoolSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, threads := range []int{1, 2, 3} {
		p := NewPool(threads)
		for _, n := range []int{1, 100, 1 << 14, 65536, 65536 + 37} {
			gate, up := make([]float32, n), make([]float32, n)
			for i := range gate {
				gate[i], up[i] = float32(rng.NormFloat64()*4), float32(rng.NormFloat64())
			}
			want := make([]float32, n)
			SwiGLU(want, gate, up)
			got := make([]float32, n)
			p.SwiGLU(got, gate, up)
			p.SwiGLU(gate, gate, up) // in place
			for i := range want {
				if got[i] != want[i] || gate[i] != want[i] {
					t.Fatalf("threads=%d n=%d: [%d] = %g (in place %g), want %g", threads, n, i, got[i], gate[i], want[i])
				}
			}
			if a := testing.AllocsPerRun(5, func() { p.SwiGLU(got, up, up) }); a != 0 {
				t.Errorf("threads=%d n=%d: %v allocations", threads, n, a)
			}
		}
		p.Close()
	}
}

// asmLanded turns on the expectations of TestSelection once the assembly
// kernels are in.
const asmLanded = true

// TestSelection checks that this CPU gets the widest kernels it supports:
// a silent fallback to slower code is the bug this catches.
func TestSelection(t *testing.T) {
	sel := map[quant.Type]Choice{}
	for _, c := range Selected() {
		sel[c.Type] = c
	}
	for _, typ := range myTypes {
		if _, ok := sel[typ]; !ok {
			t.Errorf("%s: no kernel selected", typ)
		}
	}
	if ForcedGeneric() {
		for _, c := range Selected() {
			if c.Impl != "generic" {
				t.Errorf("BRAID_KERNELS=generic, but %s uses %s", c.Type, c.Impl)
			}
		}
		return
	}
	want := map[quant.Type]string{}
	x := &cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI:
		want[quant.Q8_0], want[quant.Q4_0] = "avx512vnni", "avx512vnni"
	case x.HasAVX2 && x.HasFMA:
		want[quant.Q8_0], want[quant.Q4_0] = "avx2", "avx2"
	case cpu.ARM64.HasASIMDDP:
		want[quant.Q8_0], want[quant.Q4_0] = "neon-dotprod", "neon-dotprod"
	}
	switch {
	case x.HasAVX512F && x.HasF16C:
		want[quant.F16], want[quant.F32] = "avx512", "avx512"
	case x.HasAVX2 && x.HasFMA && x.HasF16C:
		want[quant.F16], want[quant.F32] = "avx2", "avx2"
	case cpu.ARM64.HasASIMD:
		want[quant.F16], want[quant.F32] = "neon", "neon"
	}
	for typ, impl := range want {
		if !asmLanded {
			break
		}
		if got := sel[typ].Impl; got != impl {
			t.Errorf("%s: selected %q, want %q on this CPU (features %v)", typ, got, impl, Features())
		}
	}
	t.Logf("features %v", Features())
	for _, c := range Selected() {
		t.Logf("%-7s %-12s act %s", c.Type, c.Impl, c.Act)
	}
}

// TestForcedGeneric reruns TestSelection in a child process with
// BRAID_KERNELS=generic, since the variable is read once at start-up.
func TestForcedGeneric(t *testing.T) {
	if ForcedGeneric() {
		t.Skip("already forced")
	}
	// pick is the function the child uses; check it in-process first.
	for typ, d := range pick(generic, fast, true) {
		if d != generic[typ] {
			t.Errorf("%s: forced generic picked %s", typ, d.name)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSelection$", "-test.v")
	cmd.Env = append(os.Environ(), "BRAID_KERNELS=generic")
	out, err := cmd.CombinedOutput()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// Under qemu-user without binfmt_misc the child cannot start.
		t.Skipf("cannot run the test binary as a child here: %v", err)
	}
	if err != nil {
		t.Fatalf("child with BRAID_KERNELS=generic: %v\n%s", err, out)
	}
}
