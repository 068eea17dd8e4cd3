package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/modelgen"
	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// deltaCase is one head's inputs for n tokens, strided as the layer lays
// them out (the q/k rows of all key heads, the v/o rows of all value
// heads, the gates of all value heads), and a starting state.
type deltaCase struct {
	in deltaIn
	h0 []float32
}

func newDeltaCase(rng *rand.Rand, n, D int, collinear bool) *deltaCase {
	const pad = 3 // other heads' values between a token's rows
	ldqk, ldv, ldg := 2*D+pad, D+pad, 2
	in := deltaIn{q: make([]float32, n*ldqk), ldqk: ldqk, v: make([]float32, n*ldv), o: make([]float32, n*ldv), ldv: ldv,
		g: make([]float32, n*ldg), beta: make([]float32, n*ldg), ldg: ldg, n: n, dim: D, scale: float32(1 / math.Sqrt(float64(D)))}
	in.k = in.q[D:]
	base := make([]float32, D)
	for i := range base {
		base[i] = float32(rng.NormFloat64())
	}
	for t := 0; t < n; t++ {
		for _, v := range [][]float32{in.q[t*ldqk : t*ldqk+D], in.k[t*ldqk : t*ldqk+D]} {
			for i := range v {
				v[i] = float32(rng.NormFloat64())
				if collinear {
					// Keys and queries a few degrees apart: the
					// triangular system is at its least diagonal.
					v[i] = base[i] + 0.05*v[i]
				}
			}
			l2Normalize(v, 1e-6)
		}
		for i := range D {
			in.v[t*ldv+i] = float32(rng.NormFloat64())
		}
		in.beta[t*ldg] = sigmoid32(float32(2 * rng.NormFloat64()))
		// Decays from none (g = 0) to a near-total forget (e^-30).
		switch t % 7 {
		case 0:
			in.g[t*ldg] = 0
		case 3:
			in.g[t*ldg] = -30
		default:
			in.g[t*ldg] = -float32(math.Exp(rng.Float64()*4 - 3))
		}
	}
	h0 := make([]float32, D*D)
	for i := range h0 {
		h0[i] = float32(0.3 * rng.NormFloat64())
	}
	return &deltaCase{in: in, h0: h0}
}

// reference runs the rule as the model card states it (S = Hᵀ, one token
// at a time) in float64: the outputs and the final state, transposed back.
func (c *deltaCase) reference() (o, h []float64) {
	in := &c.in
	D := in.dim
	S := make([]float64, D*D) // S[i*D+m] = H[m*D+i]
	for m := range D {
		for i := range D {
			S[i*D+m] = float64(c.h0[m*D+i])
		}
	}
	o = make([]float64, in.n*D)
	for t := 0; t < in.n; t++ {
		q, k, v := in.q[t*in.ldqk:], in.k[t*in.ldqk:], in.v[t*in.ldv:]
		decay, beta := math.Exp(float64(in.g[t*in.ldg])), float64(in.beta[t*in.ldg])
		for i := range S {
			S[i] *= decay
		}
		for m := range D {
			var kv float64
			for i := range D {
				kv += S[i*D+m] * float64(k[i])
			}
			delta := beta * (float64(v[m]) - kv)
			for i := range D {
				S[i*D+m] += float64(k[i]) * delta
			}
			var om float64
			for i := range D {
				om += S[i*D+m] * float64(q[i])
			}
			o[t*D+m] = om * float64(in.scale)
		}
	}
	h = make([]float64, D*D)
	for m := range D {
		for i := range D {
			h[m*D+i] = S[i*D+m]
		}
	}
	return o, h
}

// runBlocks runs the case as deltaHeads runs one head's run: blocks of
// deltaChunkLen tokens, each in the chunked form or the recurrent one.
func (c *deltaCase) runBlocks(chunked bool, cs *deltaChunk) (o, h []float32) {
	in := c.in
	in.o = make([]float32, len(c.in.o))
	h = append([]float32(nil), c.h0...)
	for t0 := 0; t0 < in.n; t0 += deltaChunkLen {
		b := in
		b.q, b.k = in.q[t0*in.ldqk:], in.k[t0*in.ldqk:]
		b.v, b.o = in.v[t0*in.ldv:], in.o[t0*in.ldv:]
		b.g, b.beta = in.g[t0*in.ldg:], in.beta[t0*in.ldg:]
		b.n = min(deltaChunkLen, in.n-t0)
		if chunked {
			cs.run(h, &b)
		} else {
			deltaRecurrent(h, &b)
		}
	}
	o = make([]float32, in.n*in.dim)
	for t := 0; t < in.n; t++ {
		copy(o[t*in.dim:(t+1)*in.dim], in.o[t*in.ldv:])
	}
	return o, h
}

// relErr is the largest |got - want| over the largest |want|.
func relErr(got []float32, want []float64) float64 {
	var d, m float64
	for i, w := range want {
		d = max(d, math.Abs(float64(got[i])-w))
		m = max(m, math.Abs(w))
	}
	return d / m
}

// TestDeltaChunkedMatchesRecurrent: the chunked form of the gated delta
// rule gives the outputs and the state the recurrence gives, within float
// rounding, for runs of 1, C-1, C, C+1 and longer (several blocks, a
// partial last one), from a non-zero state, with decays from none to a
// total forget and with nearly collinear keys; and so does the recurrent
// form, both against a float64 reference.
func TestDeltaChunkedMatchesRecurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 3))
	C := deltaChunkLen
	for _, D := range []int{32, 128} {
		cs := &deltaChunk{}
		cs.alloc(D, C)
		for _, n := range []int{1, 2, C - 1, C, C + 1, 2*C + 17, 5 * C} {
			for _, collinear := range []bool{false, true} {
				c := newDeltaCase(rng, n, D, collinear)
				wo, wh := c.reference()
				ro, rh := c.runBlocks(false, cs)
				co, ch := c.runBlocks(true, cs)
				const tol = 2e-5
				for _, r := range []struct {
					what string
					got  []float32
					want []float64
				}{{"recurrent outputs", ro, wo}, {"recurrent state", rh, wh}, {"chunked outputs", co, wo}, {"chunked state", ch, wh}} {
					if e := relErr(r.got, r.want); !(e <= tol) {
						t.Errorf("D=%d n=%d collinear=%v: %s off by %.3g of their largest value (tolerance %g)", D, n, collinear, r.what, e, tol)
					}
				}
			}
		}
	}
}

// TestDeltaChunkedLogits: on every shared qwen35 model, a prompt of 150
// positions run in one batch (the chunked form: blocks of 64, 64 and 22)
// gives, at every position, the logits of the same prompt run one token
// per step (the recurrent form): within float rounding for the float
// files, within the golden tolerance for the quantized ones (their
// activations are rounded to 8 bits before every product, and a MoE
// router may swap a near tie). With the pool's exact columns on (as in
// speculative verification), steps of 20 tokens keep the recurrent form
// and give the one-token logits bit for bit.
func TestDeltaChunkedLogits(t *testing.T) {
	if raceEnabled && testing.Short() {
		// Arithmetic, not interleavings: under the race detector a
		// token-by-token run takes ~30 s per model. The chunked form's
		// workers run under it in TestDeltaNetSnapshots.
		t.Skip("the race run skips the 150-step comparisons")
	}
	paths, _ := filepath.Glob(filepath.Join(sharedModels, "qwen35*", "*.gguf"))
	if len(paths) == 0 {
		sharedtest.Missing(t, "no qwen35 models under %s", sharedModels)
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, path := range paths {
		name := filepath.Base(path)

		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := New(f, pool, Options{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 150
			rng := rand.New(rand.NewPCG(7, 7))
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(rng.IntN(m.Cfg.Vocab))
			}
			V := m.Cfg.Vocab
			run := func(step int) []float32 {
				cache, err := m.NewCache(CacheSize{Positions: 256, F32: true})
				if err != nil {
					t.Fatal(err)
				}
				out := make([]float32, n*V)
				var b Batch
				for lo := 0; lo < n; lo += step {
					b.Reset()
					hi := min(lo+step, n)
					for i := lo; i < hi; i++ {
						b.Add(toks[i], int32(i), 0, true)
					}
					if err := m.Forward(cache, &b, out[lo*V:hi*V]); err != nil {
						t.Fatal(err)
					}
				}
				return out
			}
			one, all := run(1), run(n)
			tol := 1e-4
			if !floatModel(name) {
				tol = tolerance(name)
			}
			var worst float64
			for p := 0; p < n; p++ {
				w := one[p*V : (p+1)*V]
				if msg := rowMismatch(all[p*V:(p+1)*V], w, tol); msg != "" {
					t.Errorf("position %d, one batch against one token per step: %s", p, msg)
				}
				lo, hi := w[0], w[0]
				for _, x := range w {
					lo, hi = min(lo, x), max(hi, x)
				}
				d, _ := maxDiff(all[p*V:(p+1)*V], w)
				worst = max(worst, d/float64(hi-lo))
			}
			t.Logf("chunked against recurrent: largest logit difference %.3g of the spread", worst)
			pool.SetExactColumns(20)
			exact := run(20)
			pool.SetExactColumns(0)
			for i := range one {
				if exact[i] != one[i] {
					t.Fatalf("exact steps of 20 tokens: logit %d of position %d is %g, one token per step gives %g", i%V, i/V, exact[i], one[i])
				}
			}
		})
	}
}

// BenchmarkDeltaRule times one value head of Qwen3.6's geometry (state
// 128 x 128) over a 512-token prompt in each form; ns/op per prompt.
func BenchmarkDeltaRule(b *testing.B) {
	const n, D = 512, 128
	c := newDeltaCase(rand.New(rand.NewPCG(1, 2)), n, D, false)
	cs := &deltaChunk{}
	cs.alloc(D, deltaChunkLen)
	for _, form := range []string{"recurrent", "chunked"} {
		b.Run(form, func(b *testing.B) {
			for b.Loop() {
				c.runBlocks(form == "chunked", cs)
			}
		})
	}
}

// TestDeltaNetStepAllocs: a qwen35 decode step (the recurrent form) and a
// 40-token prompt step (the chunked form) allocate nothing once the
// buffers have grown.
func TestDeltaNetStepAllocs(t *testing.T) {
	m := bindGen(t, modelgen.Config{Arch: "qwen35", Layers: 4, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, HeadDim: 16, RopeDim: 8, Vocab: 300,
		Type: quant.Q8_0, SSMState: 16, SSMKeyHeads: 2, SSMValueHeads: 4, SSMConv: 4, FullAttnInterval: 4}, 64)
	cache, err := m.NewCache(CacheSize{Positions: 512})
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, 40*m.Cfg.Vocab)
	var b Batch
	pos := int32(0)
	step := func(n int) func() {
		return func() {
			if int(pos)+n > 500 {
				if err := cache.Truncate(0, 0); err != nil {
					t.Fatal(err)
				}
				pos = 0
			}
			b.Reset()
			for range n {
				b.Add(int32(pos%250)+3, pos, 0, true)
				pos++
			}
			if err := m.Forward(cache, &b, logits); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Grow the attention scores to the longest context first.
	for range 13 {
		step(40)()
	}
	for _, n := range []int{1, 40} {
		s := step(n)
		if a := testing.AllocsPerRun(20, s); a != 0 {
			t.Errorf("a step of %d tokens allocates %.2f times", n, a)
		}
	}
}

// BenchmarkDeltaPrefill times a 512-token prompt (one step) of the model
// at $BRAID_BENCH_QWEN35 (a qwen35 GGUF, e.g. braid genmodel --preset
// qwen3.6-27b-small) with the DeltaNet layers in each form, at 1 and 2
// threads; -count=N repeats the whole set, so the forms interleave.
// tok/s is the prompt's tokens over the step, cpu-s/op the process's CPU
// time per step (less at the mercy of a shared machine's load).
func BenchmarkDeltaPrefill(b *testing.B) {
	path := os.Getenv("BRAID_BENCH_QWEN35")
	if path == "" {
		b.Skip("set BRAID_BENCH_QWEN35 to a qwen35 GGUF")
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const n = 512
	for _, threads := range []int{1, 2} {
		pool := kernels.NewPool(threads)
		m, err := New(f, pool, Options{MaxBatch: n})
		if err != nil {
			b.Fatal(err)
		}
		cache, err := m.NewCache(CacheSize{Positions: n})
		if err != nil {
			b.Fatal(err)
		}
		var bt Batch
		for i := range n {
			bt.Add(int32(i*7919%(m.Cfg.Vocab-3)+3), int32(i), 0, i == n-1)
		}
		logits := make([]float32, m.Cfg.Vocab)
		for _, form := range []string{"recurrent", "chunked"} {
			b.Run(fmt.Sprintf("t%d/%s", threads, form), func(b *testing.B) {
				m.deltaRecurrent = form == "recurrent"
				cpu := cpuSeconds()
				for b.Loop() {
					cache.Drop(0)
					if err := m.Forward(cache, &bt, logits); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tok/s")
				b.ReportMetric((cpuSeconds()-cpu)/float64(b.N), "cpu-s/op")
			})
		}
		pool.Close()
	}
}

// TestDeltaNetSnapshots: a 100-token prompt run in one batch keeps the
// states its sequence asked for at lengths 30, 64 and 99 (the chunked
// runs cut there); a sequence resumed from each (CopyPrefix, or Truncate
// back to one) and fed the rest of the prompt gives the logits of the run
// that never stopped, on every shared qwen35 float model.
func TestDeltaNetSnapshots(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(sharedModels, "qwen35*", "*-F32.gguf"))
	if len(paths) == 0 {
		sharedtest.Missing(t, "no qwen35 float models under %s", sharedModels)
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := New(f, pool, Options{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 100
			rng := rand.New(rand.NewPCG(9, 9))
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(rng.IntN(m.Cfg.Vocab))
			}
			V := m.Cfg.Vocab
			cache, err := m.NewCache(CacheSize{Positions: 1024, Ctx: 256, F32: true})
			if err != nil {
				t.Fatal(err)
			}
			run := func(seq kvcache.SeqID, from int) []float32 {
				t.Helper()
				var b Batch
				for i := from; i < n; i++ {
					b.Add(toks[i], int32(i), seq, true)
				}
				out := make([]float32, (n-from)*V)
				if err := m.Forward(cache, &b, out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if err := cache.Reserve(0, 0); err != nil {
				t.Fatal(err)
			}
			keep := []int{30, 64, 99}
			for _, k := range keep {
				if err := cache.Snapshot(0, k); err != nil {
					t.Fatal(err)
				}
			}
			all := run(0, 0)
			check := func(what string, got []float32, from int) {
				t.Helper()
				for p := from; p < n; p++ {
					if msg := rowMismatch(got[(p-from)*V:(p-from+1)*V], all[p*V:(p+1)*V], 1e-4); msg != "" {
						t.Errorf("%s, position %d: %s", what, p, msg)
						return
					}
				}
			}
			for i, k := range keep {
				seq := kvcache.SeqID(10 + i)
				if got := cache.ResumePoint(0, k); got != k {
					t.Fatalf("ResumePoint(%d) = %d", k, got)
				}
				if err := cache.CopyPrefix(seq, 0, k); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("resumed at %d", k), run(seq, k), k)
				cache.Drop(seq)
			}
			if err := cache.Truncate(0, 64); err != nil {
				t.Fatal(err)
			}
			if got := cache.Snapshots(0); !slices.Equal(got, []int{30}) {
				t.Errorf("after truncating to 64: snapshots %v, want [30]", got)
			}
			check("truncated to 64", run(0, 64), 64)
		})
	}
}
