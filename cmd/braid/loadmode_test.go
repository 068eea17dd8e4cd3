package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/sharedtest"
	"braid/internal/sysinfo"
)

// TestLoadModesSameLogits loads one model in each --load-mode and runs the
// same prompt: the logits are bit for bit those of mmap, each load says
// its mode on stderr, and auto, on a disk file that fits, reads.
func TestLoadModesSameLogits(t *testing.T) {
	path := filepath.Join(shared, "models", "stories260K", "stories260K-F32.gguf")
	if _, err := os.Stat(path); err != nil {
		sharedtest.Missing(t, "no shared stories260K model: %v", err)
	}
	prompt := []int32{1, 403, 407, 261, 378, 90, 302}
	run := func(mode string) ([]float32, string, *loaded) {
		var errb bytes.Buffer
		l, err := loadModel(&modelFlags{path: path, threads: 1, ctx: 64, batch: 16, loadMode: mode}, 1, &errb)
		if err != nil {
			if mode == "mlock" && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOMEM)) {
				t.Skipf("mlock refused here: %v", err)
			}
			t.Fatalf("--load-mode %s: %v", mode, err)
		}
		defer l.Close()
		var b model.Batch
		for i, tok := range prompt {
			b.Add(tok, int32(i), 0, true)
		}
		logits := make([]float32, len(prompt)*l.backend.Vocab())
		if err := l.backend.Forward(&b, engine.FullLogits, logits); err != nil {
			t.Fatal(err)
		}
		return logits, errb.String(), l
	}
	ref, _, _ := run("mmap")
	for _, mode := range []string{"read", "mlock", "auto"} {
		got, stderr, l := run(mode)
		for i := range ref {
			if got[i] != ref[i] {
				t.Fatalf("--load-mode %s: logit %d is %v, mmap gave %v", mode, i, got[i], ref[i])
			}
		}
		want := l.load.Mode
		switch {
		case mode != "auto":
			if want.String() != mode || l.load.Auto {
				t.Errorf("--load-mode %s loaded as %s (auto %v)", mode, want, l.load.Auto)
			}
		case sysinfo.InMemoryFS(path):
			if want != gguf.LoadMmap {
				t.Errorf("auto read a file on tmpfs: %s", l.load.Reason)
			}
		default:
			// A model of a megabyte fits any node braid runs on.
			if want != gguf.LoadRead || !l.load.Auto {
				t.Errorf("auto chose %s for a small model on disk: %s", want, l.load.Reason)
			}
		}
		if !strings.Contains(stderr, "braid: weights: "+want.String()+" (") {
			t.Errorf("--load-mode %s: stderr does not say the mode: %q", mode, stderr)
		}
	}
}

// TestPlanLoadMode: braid plan counts what rank 0's load mode holds. Read
// mode holds the whole file, so on a layer split rank 0's weights are the
// file's size; auto maps a shard that reads part of the file; a copy that
// does not fit the memory given is refused.
func TestPlanLoadMode(t *testing.T) {
	path := filepath.Join(shared, "models", "stories260K", "stories260K-F32.gguf")
	st, err := os.Stat(path)
	if err != nil {
		sharedtest.Missing(t, "no shared stories260K model: %v", err)
	}
	rank0 := func(out string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "0" && f[1] == "local" {
				return f
			}
		}
		t.Fatalf("no rank 0 row in:\n%s", out)
		return nil
	}
	out, errOut, code := braid(t, "", "plan", "-m", path, "--ranks", "2", "--mem", "1G", "--load-mode", "read")
	if code != 0 {
		t.Fatalf("plan --load-mode read: exit %d: %s", code, errOut)
	}
	// Columns: rank name stage layers heads kv ffn vocab weights...; the
	// weights are "N.N KiB" (two fields).
	if w := strings.Join(rank0(out)[8:10], " "); w != plan.Bytes(st.Size()) {
		t.Errorf("read mode: rank 0's weights %s, want the file's %s:\n%s", w, plan.Bytes(st.Size()), out)
	}
	if !strings.Contains(out, "rank 0 (this node): weights held as read (--load-mode read)") {
		t.Errorf("no note of rank 0's load mode:\n%s", out)
	}
	out, _, code = braid(t, "", "plan", "-m", path, "--ranks", "2", "--mem", "1G")
	if w := strings.Join(rank0(out)[8:10], " "); code != 0 || w == plan.Bytes(st.Size()) || !strings.Contains(out, "weights held as mmap (auto: this rank reads") {
		t.Errorf("auto on half the layers: exit %d, rank 0's weights %s; want mmap of its part:\n%s", code, w, out)
	}
	// Rank 0 needs about 2.1 MiB mapped and 2.6 MiB with a copy.
	if _, errOut, code = braid(t, "", "plan", "-m", path, "--ranks", "2", "--mem", "2.3M", "--load-mode", "mmap"); code != 0 {
		t.Errorf("mmap in 2.3 MiB: exit %d, stderr %q; want a fit", code, errOut)
	}
	_, errOut, code = braid(t, "", "plan", "-m", path, "--ranks", "2", "--mem", "2.3M", "--load-mode", "read")
	if code != 1 || !strings.Contains(errOut, "rank 0 (local): needs 2.6 MiB") || !strings.Contains(errOut, "DOES NOT FIT") {
		t.Errorf("a copy larger than --mem: exit %d, stderr %q; want a refusal", code, errOut)
	}
}
