package cluster

import (
	"bytes"
	"encoding/binary"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// braid runs the binary and returns stdout, stderr and the exit status.
func braid(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(braidBin, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestRunOnWorkers: `braid run --workers` prints what `braid run` prints on
// one node (greedy), for each split; `braid logits --workers` writes the
// same logits within tolerance; `braid bench --workers` runs.
func TestRunOnWorkers(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	env := workerEnv(t)
	w1, w2 := startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)
	workers := w1.addr + "," + w2.addr
	base := []string{"run", "-m", path, "-p", "Once upon a time", "-n", "16", "--temp", "0", "-t", "1"}
	want, errOut, code := braid(t, base...)
	if code != 0 {
		t.Fatalf("single node: exit %d: %s", code, errOut)
	}
	// --net-spin 0: every rank parks at once instead of polling.
	for _, split := range [][]string{{"--split", "tensor"}, {"--split", "layer"}, {"--split", "tensor", "--tensor-split", "1,2,1"}, {"--split", "tensor", "--net-spin", "0"}} {
		args := append(append(append([]string{}, base...), "--workers", workers), split...)
		got, errOut, code := braid(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", split, code, errOut)
		}
		if got != want {
			t.Errorf("%v: braid run over workers printed %q, one node %q", split, got, want)
		}
	}

	// Logits of every position, through full vocabulary slices.
	dir := t.TempDir()
	one, split := filepath.Join(dir, "one.f32"), filepath.Join(dir, "split.f32")
	toks := "1,403,263,93,291,7,22,5"
	if _, e, c := braid(t, "logits", "-m", path, "--tokens", toks, "--out", one, "-t", "1"); c != 0 {
		t.Fatalf("logits: %s", e)
	}
	if _, e, c := braid(t, "logits", "-m", path, "--tokens", toks, "--out", split, "-t", "1", "--workers", workers, "--split", "tensor"); c != 0 {
		t.Fatalf("logits --workers: %s", e)
	}
	a, b := readF32(t, one), readF32(t, split)
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("logits files of %d and %d values", len(a), len(b))
	}
	vocab := len(a) / 8
	for p := 0; p < 8; p++ {
		if d := relDiff(b[p*vocab:(p+1)*vocab], a[p*vocab:(p+1)*vocab]); d > splitTolerance(path) {
			t.Errorf("position %d: logits over workers differ by %.3g of the spread", p, d)
		}
	}

	out, e, c := braid(t, "bench", "-m", path, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--workers", workers, "--split", "layer", "--json")
	if c != 0 || !strings.Contains(out, "decode_tps_median") {
		t.Errorf("bench --workers: exit %d, %s %s", c, out, e)
	}
	out, e, c = braid(t, "bench", "-m", path, "-p", "0", "-n", "4", "-r", "1", "-t", "1", "--workers", workers, "--split", "tensor", "--profile")
	for _, want := range []string{"compute µs", "per layer", "communication share of the step", "frames per step with rank 2 (" + w2.addr + "): 1.00 sent, 1.00 received"} {
		if c != 0 || !strings.Contains(out, want) {
			t.Errorf("bench --profile: exit %d, output lacks %q:\n%s%s", c, want, out, e)
		}
	}
}

func readF32(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestRunFailsCleanly: `braid run` against a worker that is gone exits
// non-zero with an error naming the rank and the address.
func TestRunFailsCleanly(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	_, errOut, code := braid(t, "run", "-m", path, "-p", "Once", "-n", "4", "--temp", "0", "--workers", dead, "--net-timeout", "2s")
	if code == 0 {
		t.Fatal("braid run with a dead worker exited 0")
	}
	if !strings.Contains(errOut, "rank 1") || !strings.Contains(errOut, dead) {
		t.Errorf("the error does not name rank 1 at %s:\n%s", dead, errOut)
	}
	_, errOut, code = braid(t, "run", "-m", path, "-p", "Once", "--split", "tensor")
	if code != 2 || !strings.Contains(errOut, "need --workers") {
		t.Errorf("--split without workers: exit %d: %s", code, errOut)
	}
}
