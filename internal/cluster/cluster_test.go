package cluster

import (
	"path/filepath"
	"strings"
	"testing"
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
		if full {
			if d := relDiff(got.steps[i], ref.steps[i]); d > tol {
				t.Errorf("greedy step %d: logits differ from world 1 by %.3g of the spread (tolerance %.0e)", i, d, tol)
			}
		}
	}
}

func TestTensorSplitTwoWorkers(t *testing.T) {
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
