package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"braid/internal/modelgen"
	"braid/internal/plan"
	"braid/internal/quant"
)

// genModel writes a random-weight model of a real shape, big enough that a
// leaked shard would show in the worker's resident memory.
func genModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gen-llama-Q8_0.gguf")
	err := modelgen.WriteFile(path, modelgen.Config{Arch: "llama", Name: "gen", Layers: 6, Embd: 512, FF: 2048, Heads: 8, KVHeads: 4,
		Vocab: 2048, Context: 512, Type: quant.Q8_0, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// rss reads a process's resident set in bytes.
func rss(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			v, _ := strconv.ParseInt(f[0], 10, 64)
			return v << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestLoadUnloadCycles loads and unloads a shard on a worker many times:
// its resident memory after an unload does not grow from cycle to cycle.
func TestLoadUnloadCycles(t *testing.T) {
	path := genModel(t)
	w := startWorker(t, "127.0.0.1:0", workerEnv(t))
	cycles := 8
	if testing.Short() {
		cycles = 5
	}
	var after []int64
	var loadedRSS int64
	for i := 0; i < cycles; i++ {
		c := openCluster(t, path, "tensor", nil, w)
		if _, err := decode(c, c.Vocab(), 2); err != nil {
			t.Fatal(err)
		}
		loadedRSS = rss(t, w.cmd.Process.Pid)
		if err := c.Unload(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		after = append(after, rss(t, w.cmd.Process.Pid))
	}
	t.Logf("worker RSS loaded %s; after each unload %v", plan.Bytes(loadedRSS), after)
	base := after[2]
	if last := after[len(after)-1]; last > base+6<<20 {
		t.Errorf("worker RSS grew from %s (cycle 3) to %s (cycle %d) across load/unload cycles", plan.Bytes(base), plan.Bytes(last), cycles)
	}
}

// TestRefusedWhenItDoesNotFit: a worker offering less memory than its
// shard needs makes the plan refuse, with the numbers per rank, before
// anything is loaded; the worker stays up.
func TestRefusedWhenItDoesNotFit(t *testing.T) {
	path := genModel(t)
	w := startWorker(t, "127.0.0.1:0", workerEnv(t), "--mem-limit", "1M")
	_, err := Open(context.Background(), Config{Model: path, Split: "tensor", TensorSplit: []float64{1, 1}, Threads: 1, MaxBatch: 16, Ctx: 64,
		Timeout: 5 * time.Second, ConnectTimeout: 3 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(), Nodes: []Node{{Addr: w.addr}}})
	if err == nil {
		t.Fatal("a plan that does not fit was loaded")
	}
	if !strings.Contains(err.Error(), "does not fit") || !strings.Contains(err.Error(), w.addr) {
		t.Errorf("the refusal lacks the reason or the rank: %v", err)
	}
	t.Logf("%v", err)
	if strings.Contains(w.stderr(), "worker: loaded") {
		t.Error("the worker loaded a shard that does not fit")
	}
	if !w.alive() {
		t.Fatal("the worker died")
	}
}
