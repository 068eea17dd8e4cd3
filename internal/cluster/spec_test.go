package cluster

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
)

// openSpecCluster forms a cluster as openCluster does, with the MTP head on
// rank 0 when mtp is set.
func openSpecCluster(t *testing.T, path, split string, weights []float64, mtp bool, workers ...*proc) *Cluster {
	t.Helper()
	cfg := Config{Model: path, Split: split, TensorSplit: weights, Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true, MTP: mtp,
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}
	for _, w := range workers {
		cfg.Nodes = append(cfg.Nodes, Node{Addr: w.addr})
	}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		for _, w := range workers {
			t.Logf("worker %s stderr:\n%s", w.addr, w.stderr())
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exactSteps is a worker's count of steps run with exact verification, from
// its health endpoint.
func exactSteps(t *testing.T, w *proc) uint64 {
	t.Helper()
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(w.health + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st WorkerStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.ExactSteps
}

// TestExactVerifyOnWorkers: over real workers, a verification-shaped step
// (four tokens of one sequence, every row an output) run with
// SetExactColumns gives logits bit for bit those of four one-token steps,
// on Q4_K_M and Q5_K_M targets, whose multi-column tiles have rounded
// differently from the one-token dot: the Step frame carries the setting
// and every worker applies it around that step (its health endpoint counts
// those steps). Whether the same step without the setting differs is
// logged: it depends on the kernels, which make some formats' small
// products exact by themselves (Q4_K since ffb8408, not Q5_K).
func TestExactVerifyOnWorkers(t *testing.T) {
	env := workerEnv(t)
	ws := []*proc{startWorker(t, "127.0.0.1:0", env, "--health-listen", "127.0.0.1:0"), startWorker(t, "127.0.0.1:0", env, "--health-listen", "127.0.0.1:0")}
	for _, rel := range []string{"tiny-llama/tiny-llama-Q4_K_M.gguf", "tiny-llama/tiny-llama-Q5_K_M.gguf"} {
		path := sharedModel(t, rel)
		for _, sc := range []splitCase{{"tensor", nil, 1}, {"layer", nil, 1}, {"tensor", []float64{1, 2, 3}, 2}} {
			exactVerify(t, path, sc, ws)
		}
	}
}

// exactVerify is TestExactVerifyOnWorkers for one model and split.
func exactVerify(t *testing.T, path string, sc splitCase, ws []*proc) {
	t.Run(filepath.Base(path)+"-"+sc.String(), func(t *testing.T) {
		c := openSpecCluster(t, path, sc.split, sc.weights, false, ws[:sc.workers]...)
		V := c.Vocab()
		before := make([]uint64, sc.workers)
		for i, w := range ws[:sc.workers] {
			before[i] = exactSteps(t, w)
		}
		P := len(testPrompt)
		var b model.Batch
		for i, tok := range testPrompt {
			b.Add(tok%int32(V), int32(i), 0, i == P-1)
		}
		row := make([]float32, V)
		if err := c.Forward(&b, engine.FullLogits, row); err != nil {
			t.Fatal(err)
		}
		// Four one-token steps: the plain decode's rows.
		const k = 4
		toks := make([]int32, k)
		plain := make([]float32, k*V)
		for i := range k {
			toks[i] = argmax(row)
			b.Reset()
			b.Add(toks[i], int32(P+i), 0, true)
			row = plain[i*V : (i+1)*V]
			if err := c.Forward(&b, engine.FullLogits, row); err != nil {
				t.Fatal(err)
			}
		}
		verify := func(exact bool) []float32 {
			if err := c.Truncate(0, P); err != nil {
				t.Fatal(err)
			}
			b.Reset()
			for i, tok := range toks {
				b.Add(tok, int32(P+i), 0, true)
			}
			got := make([]float32, k*V)
			if exact {
				c.SetExactColumns(k)
			}
			err := c.Forward(&b, engine.FullLogits, got)
			c.SetExactColumns(0)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := verify(true); !slices.Equal(got, plain) {
			t.Errorf("the exact verification step's logits are not those of one-token steps (max diff %g)", maxDiff(got, plain))
		}
		for i, w := range ws[:sc.workers] {
			if n := exactSteps(t, w); n != before[i]+1 {
				t.Errorf("rank %d ran %d exact steps, want 1", i+1, n-before[i])
			}
		}
		if got := verify(false); !slices.Equal(got, plain) {
			t.Logf("without the setting the step differs from one-token steps by up to %g (the tiles' rounding)", maxDiff(got, plain))
		} else {
			t.Logf("without the setting the step equals one-token steps here (the kernels are exact for %d columns)", k)
		}
	})
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestHiddenOnWorkers: over real workers, ForwardHidden returns the trunk's
// final-normed hidden states of the output rows as the whole model on one
// node computes them (within the split tolerance), from rank 0 on a tensor
// split and from the last stage's first rank otherwise; Head over one of
// them on rank 0's MTP head gives bit for bit the logits the ranks compute
// for that row in a step that outputs it alone.
func TestHiddenOnWorkers(t *testing.T) {
	env := workerEnv(t)
	ws := []*proc{startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)}
	for _, c := range []struct {
		model string
		sc    []splitCase
	}{
		{"glm4moe/tiny-glm4moe-F32.gguf", []splitCase{{"tensor", nil, 1}, {"layer", nil, 1}, {"tensor", nil, 2}, {"tensor=2,layer=2", nil, 3}}},
		{"qwen35/tiny-qwen35-F32.gguf", []splitCase{{"layer", []float64{1, 3}, 1}, {"layer", nil, 2}}},
	} {
		path := sharedModel(t, c.model)
		want, E := hiddenWorld1(t, path)
		for _, sc := range c.sc {
			t.Run(filepath.Base(c.model)+"-"+sc.String(), func(t *testing.T) {
				cl := openSpecCluster(t, path, sc.split, sc.weights, true, ws[:sc.workers]...)
				if cl.MTPHead() == nil {
					t.Fatal("no MTP head on rank 0")
				}
				V := cl.Vocab()
				P := len(testPrompt)
				var b model.Batch
				for i, tok := range testPrompt {
					b.Add(tok%int32(V), int32(i), 0, true)
				}
				logits, hidden := make([]float32, P*V), make([]float32, P*E)
				if err := cl.ForwardHidden(&b, engine.Output{TopK: 1}, logits, hidden); err != nil {
					t.Fatal(err)
				}
				for p := range P {
					if d := relDiff(hidden[p*E:(p+1)*E], want[p*E:(p+1)*E]); d > splitTolerance("-F32") {
						t.Errorf("position %d: hidden state differs from world 1 by %.3g of the spread", p, d)
					}
				}
				// The last row alone, as a plain prefill outputs it (a
				// second sequence: a recurrent model cannot truncate the
				// first), and the head over its state on rank 0.
				b.Reset()
				for i, tok := range testPrompt[:P-1] {
					b.Add(tok%int32(V), int32(i), 1, false)
				}
				if err := cl.Forward(&b, engine.Output{TopK: 1}, nil); err != nil {
					t.Fatal(err)
				}
				b.Reset()
				b.Add(testPrompt[P-1]%int32(V), int32(P-1), 1, true)
				alone, head := make([]float32, V), make([]float32, V)
				if err := cl.ForwardHidden(&b, engine.FullLogits, alone, hidden[:E]); err != nil {
					t.Fatal(err)
				}
				if err := cl.Head(hidden[:E], head); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(head, alone) {
					t.Errorf("Head on rank 0 differs from the ranks' logits of the row by up to %g", maxDiff(head, alone))
				}
			})
		}
	}
}

// hiddenWorld1 is the whole model's final-normed hidden state of every
// prompt position on one node, and the model's width.
func hiddenWorld1(t *testing.T, path string) ([]float32, int) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: 64, F32: true})
	if err != nil {
		t.Fatal(err)
	}
	V, E, P := m.Cfg.Vocab, m.Cfg.Embd, len(testPrompt)
	var b model.Batch
	for i, tok := range testPrompt {
		b.Add(tok%int32(V), int32(i), 0, true)
	}
	hidden := make([]float32, P*E)
	if err := m.ForwardHidden(cache, &b, make([]float32, P*V), hidden); err != nil {
		t.Fatal(err)
	}
	return hidden, E
}

// TestMTPPlan: with Config.MTP the plan counts the MTP head on rank 0: the
// glm4moe test model's NextN block (716,360 parameters, its README says)
// and the trunk's output head (256 x 512) in float32, less the vocabulary
// slice rank 0 holds already on a tensor split; a model without a head is
// refused before anything is loaded.
func TestMTPPlan(t *testing.T) {
	path := sharedModel(t, "glm4moe/tiny-glm4moe-F32.gguf")
	w := startWorker(t, "127.0.0.1:0", workerEnv(t))
	const block, head, norm = 716360, 256 * 512, 256
	for _, c := range []struct {
		split string
		want  int64
	}{
		{"layer", 4 * (block + head + norm)},
		{"tensor", 4 * (block + head/2 + norm)},
	} {
		cl := openSpecCluster(t, path, c.split, nil, true, w)
		r0 := cl.Plan().Ranks[0]
		if r0.MTP.Weights != c.want || r0.MTP.KV <= 0 || r0.MTP.Scratch <= 0 {
			t.Errorf("%s: rank 0's MTP head is planned as %+v, want weights %d and a KV cache and scratch", c.split, r0.MTP, c.want)
		}
		found := false
		for _, n := range cl.Plan().Notes {
			found = found || strings.Contains(n, "MTP head")
		}
		if !found {
			t.Errorf("%s: the plan's notes do not say rank 0 holds the MTP head: %v", c.split, cl.Plan().Notes)
		}
		cl.Close()
	}
	llama := sharedModel(t, "tiny-llama/tiny-llama-Q8_0.gguf")
	cfg := Config{Model: llama, Threads: 1, MaxBatch: 16, Ctx: 64, MTP: true, Nodes: []Node{{Addr: w.addr}},
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}
	if c, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "has no MTP head") {
		if c != nil {
			c.Close()
		}
		t.Errorf("an MTP head asked of a model without one: %v", err)
	}
}
