package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/model"
	"braid/internal/sharedmodels"
	"braid/internal/sharedtest"
)

// checkAgainst compares a cluster run with world 1: the same greedy tokens,
// and logits within the split tolerance.
func checkAgainst(t *testing.T, name string, ref, got reference, vocab int, full bool) {
	t.Helper()
	tol := splitTolerance(name)
	for p := 0; p < len(testPrompt); p++ {
		if d := relDiff(got.prompt[p*vocab:(p+1)*vocab], ref.prompt[p*vocab:(p+1)*vocab]); d > tol {
			t.Errorf("prompt position %d: logits differ from world 1 by %.3g of the spread (tolerance %.0e)", p, d, tol)
		}
	}
	for i := range ref.tokens {
		if got.tokens[i] != ref.tokens[i] {
			t.Fatalf("greedy step %d chose %d, world 1 chose %d (tokens so far %v, world 1 %v)", i, got.tokens[i], ref.tokens[i], got.tokens[:i+1], ref.tokens)
		}
		if full || i%2 == 0 {
			if d := relDiff(got.steps[i], ref.steps[i]); d > tol {
				t.Errorf("greedy step %d: logits differ from world 1 by %.3g of the spread (tolerance %.0e)", i, d, tol)
			}
		}
	}
}

// splitCase is one way to split: --split and --tensor-split, over 1+workers
// ranks.
type splitCase struct {
	split   string
	weights []float64
	workers int
}

func (sc splitCase) String() string {
	s := fmt.Sprintf("%s-w%d", strings.ReplaceAll(sc.split, ",", "x"), 1+sc.workers)
	if sc.weights != nil {
		s += strings.ReplaceAll(fmt.Sprint(sc.weights), " ", ",")
	}
	return s
}

// shape is the split's tensor-parallel ranks per stage and stages.
func (sc splitCase) shape() (tp, pp int) {
	world := 1 + sc.workers
	switch sc.split {
	case "tensor":
		return world, 1
	case "layer":
		return 1, world
	}
	var err error
	if _, err = fmt.Sscanf(sc.split, "tensor=%d,layer=%d", &tp, &pp); err != nil || tp*pp != world {
		panic(fmt.Sprintf("split case %q over %d ranks: %v", sc.split, world, err))
	}
	return tp, pp
}

var splitCases = []splitCase{
	{"tensor", nil, 1},
	{"tensor", nil, 2},
	{"tensor", []float64{3, 1}, 1},
	{"tensor", []float64{1, 2, 3}, 2},
	{"layer", nil, 1},
	{"layer", nil, 2},
	{"layer", []float64{1, 3}, 1},
	{"tensor=2,layer=2", nil, 3},
}

// clusterModels are the shared models the split tests run: all of them, or
// with -short one per architecture (llama twice: random and the trained
// stories260K).
func clusterModels(t *testing.T) []string {
	if !testing.Short() {
		all, pending, err := sharedmodels.Files(sharedModels, model.IsSupported)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pending {
			t.Logf("not run yet: %s", p)
		}
		if len(all) > 0 {
			return all
		}
	}
	var out []string
	for _, rel := range []string{"tiny-llama/tiny-llama-Q8_0.gguf", "stories260K/stories260K-Q8_0.gguf",
		"tiny-qwen2/tiny-qwen2-Q8_0.gguf", "tiny-qwen3/tiny-qwen3-Q8_0.gguf", "tiny-qwen3moe/tiny-qwen3moe-Q8_0.gguf",
		"gpt-oss/tiny-gpt-oss-MXFP4_MOE.gguf"} {
		p := filepath.Join(sharedModels, rel)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		} else if sharedtest.Required() {
			t.Fatalf("%s=1 and %v", sharedtest.Env, err)
		}
	}
	if len(out) == 0 {
		sharedtest.Missing(t, "no shared models under %s: skipping", sharedModels)
	}
	return out
}

// TestSplitsMatchWorld1 runs shared models of every architecture on every
// split over real worker processes and loopback TCP: greedy generation
// gives the same tokens as world 1 (through full rows and through merged
// candidates), and the logits agree within the model package's tolerance.
func TestSplitsMatchWorld1(t *testing.T) {
	env := workerEnv(t)
	ws := []*proc{startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)}
	for _, path := range clusterModels(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			ref, vocab := world1(t, path)
			for _, sc := range splitCases {
				t.Run(sc.String(), func(t *testing.T) {
					c, err := tryCluster(t, path, sc.split, sc.weights, ws[:sc.workers]...)
					tp, pp := sc.shape()
					if msg, refused := sharedmodels.Check(name, tp, pp, sc.weights, err); msg != "" {
						t.Fatal(msg)
					} else if refused {
						t.Logf("the plan is refused, as the refusal table says: %v", err)
						return
					}
					got, err := generate(t, vocab, c.Forward, true)
					if err != nil {
						t.Fatal(err)
					}
					checkAgainst(t, name, ref, got, vocab, false)
					c.Close()
				})
			}
		})
	}
}

func TestTensorSplitF32(t *testing.T) {
	path := sharedModel(t, "tiny-llama/tiny-llama-F32.gguf")
	name := strings.TrimSuffix(filepath.Base(path), ".gguf")
	ref, vocab := world1(t, path)
	env := workerEnv(t)
	w1 := startWorker(t, "127.0.0.1:0", env)
	w2 := startWorker(t, "127.0.0.1:0", env)
	c := openCluster(t, path, "tensor", nil, w1, w2)
	got, err := generate(t, vocab, c.Forward, false)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, name, ref, got, vocab, true)
}
