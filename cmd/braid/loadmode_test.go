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
