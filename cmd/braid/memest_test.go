package main

import (
	"os"
	"path/filepath"
	"testing"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/sharedtest"
	"braid/internal/sysinfo"
)

// TestEstimateMemory checks the single-node fit estimate: the model
// layer's own sizes for a supported family (a sliding-window model keeps
// rings, not a row per position, so its cache is below the naive count),
// and weights in a file on tmpfs counted as already in memory.
func TestEstimateMemory(t *testing.T) {
	src := filepath.Join(shared, "models", "gpt-oss", "tiny-gpt-oss-Q8_0.gguf")
	data, err := os.ReadFile(src)
	if err != nil {
		sharedtest.Missing(t, "no shared gpt-oss model: %v", err)
	}
	m, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const ctx = 4096
	e := estimateMemory(m, ctx)
	c, err := model.ReadConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	full := model.FullShard(c)
	want := model.KVBytes(model.CacheConfig(c, &full, model.CacheSize{Positions: ctx, Ctx: ctx, MaxStep: 512}))
	naive := int64(2 * c.Layers * ctx * c.KVHeads * (c.HeadDim + c.ValueDim))
	if e.kv != want || e.kv >= naive {
		t.Errorf("KV estimate %d bytes, want the cache's %d (below the naive %d: the sliding layer keeps rings)", e.kv, want, naive)
	}
	if w, _ := model.WeightBytes(m, c, &full); e.weights != w {
		t.Errorf("weights %d bytes, the binder keeps %d", e.weights, w)
	}
	if e.resident != 0 && !sysinfo.InMemoryFS(src) {
		t.Errorf("a file on disk counted as resident (%d bytes)", e.resident)
	}
	if !sysinfo.InMemoryFS("/dev/shm") {
		t.Skip("/dev/shm is not tmpfs here")
	}
	shm := filepath.Join("/dev/shm", "braid-memest-test.gguf")
	if err := os.WriteFile(shm, data, 0o600); err != nil {
		t.Skipf("cannot write to /dev/shm: %v", err)
	}
	defer os.Remove(shm)
	ms, err := gguf.Open(shm)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	es := estimateMemory(ms, ctx)
	// On tmpfs the file is in memory already; only the weights repacked
	// at load for this CPU's kernels are new memory.
	if r, _ := model.RepackBytes(ms, c, &full); es.repack != r {
		t.Errorf("on tmpfs: repacked %d bytes, the binder repacks %d", es.repack, r)
	}
	if es.resident != es.weights || es.total() != es.kv+es.scratch+es.repack {
		t.Errorf("on tmpfs: resident %d of %d weight bytes, total %d (repacked %d): want the weights counted as in memory", es.resident, es.weights, es.total(), es.repack)
	}
}
