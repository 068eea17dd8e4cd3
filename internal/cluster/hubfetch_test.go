package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/hub"
	"braid/internal/hub/hubtest"
)

// TestWorkersPullFromHub: a coordinator that names its model by hub
// repository has each worker without a copy fetch its own from the hub
// (verified by the same SHA-256) instead of streaming the weights; the
// tokens are world 1's. A worker started with --no-pull receives its
// shard as before, and one that has the model in its hub cache loads it
// from there with nothing fetched.
func TestWorkersPullFromHub(t *testing.T) {
	path := streamModel(t)
	ref, vocab := world1(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(hubtest.Repo{Name: "test/Stream-GGUF", Files: []hubtest.File{{Path: "llama-stream-Q8_0.gguf", Data: data}}})
	defer h.Close()

	// The coordinator's own copy, pulled into its hub cache.
	cl := &hub.Client{Endpoint: h.URL}
	mod, err := cl.Pull(context.Background(), hub.Cache{Dir: t.TempDir()}, hub.Spec{Repo: "test/Stream-GGUF", Quant: "Q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	ref1 := &HubModel{Repo: mod.Repo, Commit: mod.Commit, Quant: mod.Quant}
	for _, f := range mod.Files {
		ref1.Files = append(ref1.Files, f.File)
	}
	open := func(split string, workers ...*proc) *Cluster {
		t.Helper()
		cfg := Config{Model: mod.Path(), Split: split, Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true, Hub: ref1,
			Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}
		for _, w := range workers {
			// Not at the coordinator's path on the workers' "nodes".
			cfg.Nodes = append(cfg.Nodes, Node{Addr: w.addr, Model: "/nonexistent/braid/" + filepath.Base(path)})
		}
		c, err := Open(context.Background(), cfg)
		if err != nil {
			for _, w := range workers {
				t.Logf("worker %s stderr:\n%s", w.addr, w.stderr())
			}
			t.Fatal(err)
		}
		return c
	}
	hubEnv := func(home string) []string {
		return append(workerEnv(t), "HF_ENDPOINT="+h.URL, "HF_HOME="+home, "HF_HUB_CACHE=", "HF_TOKEN=")
	}
	homes := []string{t.TempDir(), t.TempDir()}
	w1 := startWorker(t, "127.0.0.1:0", hubEnv(homes[0]))
	w2 := startWorker(t, "127.0.0.1:0", hubEnv(homes[1]))
	served := h.Served.Load()
	c := open("tensor", w1, w2)
	if n := c.StreamedBytes(); n != 0 {
		t.Errorf("the coordinator streamed %d bytes to workers that can pull", n)
	}
	if got := h.Served.Load() - served; got != 2*int64(len(data)) {
		t.Errorf("the hub served %d bytes to two workers, want %d", got, 2*len(data))
	}
	for _, home := range homes {
		blob := filepath.Join(home, "hub", "models--test--Stream-GGUF", "blobs", mod.Files[0].SHA256)
		if fi, err := os.Stat(blob); err != nil || fi.Size() != int64(len(data)) {
			t.Errorf("the worker's hub cache lacks the model: %v", err)
		}
	}
	got, err := generate(t, vocab, c.Forward, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, "pulled", ref, got, vocab, false)
	if err := c.Unload(); err != nil {
		t.Fatal(err)
	}

	// The same workers again: from their hub caches, nothing fetched.
	served = h.Served.Load()
	c = open("layer", w1, w2)
	if n := c.StreamedBytes(); n != 0 || h.Served.Load() != served {
		t.Errorf("a load from the workers' hub caches streamed %d and fetched %d bytes", n, h.Served.Load()-served)
	}
	got, err = generate(t, vocab, c.Forward, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, "cached", ref, got, vocab, false)
	c.Close()

	// --no-pull: the shard is streamed, the hub is not asked.
	w3 := startWorker(t, "127.0.0.1:0", hubEnv(t.TempDir()), "--no-pull")
	served = h.Served.Load()
	c = open("tensor", w3)
	if c.StreamedBytes() == 0 || h.Served.Load() != served {
		t.Errorf("--no-pull: streamed %d, fetched %d", c.StreamedBytes(), h.Served.Load()-served)
	}
	got, err = generate(t, vocab, c.Forward, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, "no-pull", ref, got, vocab, false)
	c.Close()
	if !strings.Contains(w3.stderr(), "--no-pull") {
		t.Errorf("the --no-pull worker does not say why it did not pull:\n%s", w3.stderr())
	}

	// A hub reference that does not name the model is refused: stream.
	bad := *ref1
	bad.Files = []hub.File{{Path: "x.gguf", Size: 1, SHA256: strings.Repeat("0", 64)}}
	ref1 = &bad
	w4 := startWorker(t, "127.0.0.1:0", hubEnv(t.TempDir()))
	served = h.Served.Load()
	c = open("tensor", w4)
	if c.StreamedBytes() == 0 || h.Served.Load() != served {
		t.Errorf("a wrong hub reference: streamed %d, fetched %d", c.StreamedBytes(), h.Served.Load()-served)
	}
	c.Close()
}

// The coordinator learns a hub blob's hash from its name, without reading
// it; anything else is hashed.
func TestHubBlobSHA256(t *testing.T) {
	dir := t.TempDir()
	sum := strings.Repeat("ab", 32)
	blob := filepath.Join(dir, "models--o--r", "blobs", sum)
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob, []byte("not what the name says"), 0o644)
	link := filepath.Join(dir, "models--o--r", "snapshots", strings.Repeat("c", 40), "m.gguf")
	os.MkdirAll(filepath.Dir(link), 0o755)
	os.Symlink(filepath.Join("..", "..", "blobs", sum), link)
	if got, _, err := newHashCache("").SHA256(link); err != nil || got != sum {
		t.Errorf("hub blob: %s, %v", got, err)
	}
	other := filepath.Join(dir, "blobs", sum) // not in a models-- folder
	os.MkdirAll(filepath.Dir(other), 0o755)
	os.WriteFile(other, []byte("x"), 0o644)
	if got, _, err := newHashCache("").SHA256(other); err != nil || got == sum {
		t.Errorf("a file merely named like a hash was not hashed: %s, %v", got, err)
	}
}
