package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"braid/internal/gguf"
)

// TestLoadModeRead runs a layer split with every rank in read mode: the
// coordinator's rank 0 (Config.LoadMode) and a worker (its --load-mode)
// each hold a copy and map no part of the file, and the split gives the
// tokens and logits of world 1.
func TestLoadModeRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/PID/maps")
	}
	path, err := filepath.Abs(sharedModel(t, "stories260K/stories260K-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSuffix(filepath.Base(path), ".gguf")
	ref, vocab := world1(t, path)
	w := startWorker(t, "127.0.0.1:0", workerEnv(t), "--load-mode", "read")
	cfg := Config{Model: path, Split: "layer", Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true,
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(),
		Nodes: []Node{{Addr: w.addr}}, LoadMode: gguf.LoadRead}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\nworker stderr:\n%s", err, w.stderr())
	}
	defer c.Close()
	if l := c.Load(); l.Mode != gguf.LoadRead || l.Auto || !strings.Contains(l.Reason, "--load-mode read") {
		t.Errorf("rank 0 holds its weights as %+v, want read as asked", l)
	}
	got, err := generate(t, vocab, c.Forward, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, name, ref, got, vocab, false)
	if !strings.Contains(w.stderr(), "worker: weights") || !strings.Contains(w.stderr(), "mode=read") {
		t.Errorf("the worker did not log read mode:\n%s", w.stderr())
	}
	for _, pid := range []string{"self", fmt.Sprint(w.cmd.Process.Pid)} {
		maps, err := os.ReadFile("/proc/" + pid + "/maps")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(maps), path) {
			t.Errorf("process %s maps %s although it was read", pid, path)
		}
	}
}
