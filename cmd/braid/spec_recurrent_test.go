package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSpecWorkersRecurrent: speculative decoding of the recurrent
// qwen35 target split over workers (tensor, two layer stages, and three
// stages, the last holding only the attention layer and so no recurrent
// state): the state snapshots each verification keeps, and the rollbacks
// to them, are replayed on every rank, and the output is the split's own
// without --spec. (The draft model's drafts are all rejected on this
// random-weight target: every step rolls back to the state after its
// pending token; rollbacks to later drafts are checked on one node.)
func TestRunSpecWorkersRecurrent(t *testing.T) {
	model := filepath.Join(shared, "models", "qwen35", "tiny-qwen35-Q8_0.gguf")
	draft := filepath.Join(shared, "models", "stories260K", "stories260K-Q8_0.gguf")
	needShared(t, model)
	needShared(t, draft)
	w1, w2 := startWorker(t, nil), startWorker(t, nil)
	for _, split := range [][]string{
		{"--workers", w1 + "," + w2, "--split", "tensor"},
		{"--workers", w1, "--split", "layer"},
		{"--workers", w1 + "," + w2, "--split", "layer"},
	} {
		base := append([]string{"run", "-m", model, "-p", "Once upon a time", "-n", "40", "--temp", "0", "-t", "1"}, split...)
		want, errOut, code := braid(t, "", base...)
		if code != 0 {
			t.Fatalf("%v: plain run: exit %d: %s", split, code, errOut)
		}
		for _, spec := range [][]string{{"--spec", "ngram", "--spec-n-max", "4", "--spec-n-min", "4"}, {"--spec", "draft", "--model-draft", draft, "--spec-n-max", "3", "--spec-n-min", "3"}} {
			got, errOut, code := braid(t, "", append(base, spec...)...)
			if code != 0 {
				t.Fatalf("%v %v: exit %d: %s", split, spec, code, errOut)
			}
			if got != want {
				t.Errorf("%v %v: output differs from the split without --spec:\n got %q\nwant %q", split, spec, got, want)
			}
			i := strings.Index(errOut, "speculative decoding (")
			if i < 0 {
				t.Errorf("%v %v: no summary: %s", split, spec, errOut)
				continue
			}
			sum := strings.SplitN(errOut[i:], "\n", 2)[0]
			t.Logf("%v %v: %s", split, spec, sum)
			if spec[1] == "draft" && strings.Contains(sum, "drafted 0,") {
				t.Errorf("%v %v: no drafts verified, so no rollback: %s", split, spec, sum)
			}
		}
	}
}
