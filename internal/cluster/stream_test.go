package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

// streamModel writes a small llama model whose every split is a real one
// (8 heads over 4 KV heads, Q8_0, 256-wide) and returns its path.
func streamModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "llama-stream.gguf")
	cfg := modelgen.Config{Arch: "llama", Layers: 3, Embd: 256, FF: 768, Heads: 8, KVHeads: 4, Vocab: 512, Context: 256,
		Type: quant.Q8_0, Seed: 7}
	if err := modelgen.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// openAt forms a cluster whose workers are told the model is at a path that
// does not exist on their node.
func openAt(t *testing.T, path, split string, weights []float64, workers ...*proc) *Cluster {
	t.Helper()
	cfg := Config{Model: path, Split: split, TensorSplit: weights, Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true,
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}
	for _, w := range workers {
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

// TestStreamWeights: workers without a copy of the model (the path does not
// exist there, --models-dir is empty) receive their slices from the
// coordinator, generate what world 1 generates, and load from their cache
// the next time, streaming nothing.
func TestStreamWeights(t *testing.T) {
	path := streamModel(t)
	ref, vocab := world1(t, path)
	empty := t.TempDir()
	w1 := startWorker(t, "127.0.0.1:0", workerEnv(t), "--models-dir", empty)
	w2 := startWorker(t, "127.0.0.1:0", workerEnv(t), "--models-dir", empty)
	for _, split := range []string{"tensor", "layer"} {
		c := openAt(t, path, split, nil, w1, w2)
		if c.StreamedBytes() == 0 {
			t.Errorf("%s: the coordinator streamed nothing to workers without the model", split)
		}
		got, err := generate(t, vocab, c.Forward, true)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainst(t, path+"-"+split, ref, got, vocab, false)
		// Unload frees the workers' weights: the next load reads them again.
		if err := c.Unload(); err != nil {
			t.Fatal(err)
		}
		c = openAt(t, path, split, nil, w1, w2)
		if n := c.StreamedBytes(); n != 0 {
			t.Errorf("%s: the second load streamed %d bytes; the workers should have loaded their cache", split, n)
		}
		got, err = generate(t, vocab, c.Forward, true)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainst(t, path+"-"+split+"-cached", ref, got, vocab, false)
		c.Unload()
	}
	for _, w := range []*proc{w1, w2} {
		log := w.stderr()
		if n := strings.Count(log, "received and cached the shard"); n != 2 {
			t.Errorf("worker %s received %d shards, want 2 (tensor, layer):\n%s", w.addr, n, log)
		}
		if n := strings.Count(log, "loading the shard from the shard cache"); n != 2 {
			t.Errorf("worker %s loaded %d shards from its cache, want 2:\n%s", w.addr, n, log)
		}
	}
}

// TestSplitFiles: `braid split` writes one shard file per rank, holding
// only that rank's slices, and workers load theirs from --models-dir
// without a copy of the model or any streaming.
func TestSplitFiles(t *testing.T) {
	path := streamModel(t)
	ref, vocab := world1(t, path)
	for _, split := range []string{"tensor", "layer"} {
		dir := t.TempDir()
		out, errOut, code := braid(t, "split", "-m", path, "--workers", "2", "--split", split, "--tensor-split", "1,1,1", "--out", dir)
		if code != 0 {
			t.Fatalf("braid split: exit %d: %s", code, errOut)
		}
		files := strings.Fields(out)
		if len(files) != 3 {
			t.Fatalf("braid split printed %q, want 3 files", out)
		}
		full, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for r, f := range files {
			m, err := gguf.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			rank, _ := m.Uint(keyShardRank)
			held, _ := m.Uint(keyShardBytes)
			m.Close()
			if rank != uint64(r) || held == 0 || held > uint64(full.Size())*3/4 {
				t.Errorf("%s: rank %d file says rank %d holding %d bytes of a %d-byte model", split, r, rank, held, full.Size())
			}
		}
		// Each worker sees only its own file.
		var ws []*proc
		for r := 1; r <= 2; r++ {
			own := t.TempDir()
			if err := os.Link(files[r], filepath.Join(own, filepath.Base(files[r]))); err != nil {
				t.Fatal(err)
			}
			ws = append(ws, startWorker(t, "127.0.0.1:0", workerEnv(t), "--models-dir", own))
		}
		c := openAt(t, path, split, []float64{1, 1, 1}, ws...)
		if n := c.StreamedBytes(); n != 0 {
			t.Errorf("%s: %d bytes streamed to workers that hold shard files", split, n)
		}
		got, err := generate(t, vocab, c.Forward, true)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainst(t, path+"-split-"+split, ref, got, vocab, false)
		c.Close()
		for _, w := range ws {
			if !strings.Contains(w.stderr(), "loading the shard from a shard file under --models-dir") {
				t.Errorf("worker %s did not say it loaded its shard file:\n%s", w.addr, w.stderr())
			}
			w.kill()
		}
	}
}

// TestSplitFilesRepacked: `braid split --layout x8` writes the linear
// layers' slices in the x8 layout (unpacking gives the model's bytes of
// each slice back, byte for byte); workers whose kernels take that layout
// bind them as they are and generate what world 1 generates, and a worker
// whose kernels take the plain layout (BRAID_REPACK=off) refuses the file,
// naming both layouts, and receives its slices from the coordinator.
func TestSplitFilesRepacked(t *testing.T) {
	path := streamModel(t)
	ref, vocab := world1(t, path)
	dir := t.TempDir()
	out, errOut, code := braid(t, "split", "-m", path, "--workers", "2", "--split", "tensor", "--tensor-split", "1,1,1", "--layout", "x8", "--out", dir)
	if code != 0 {
		t.Fatalf("braid split: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "in the x8.v1 layout") {
		t.Errorf("braid split did not say what it repacked:\n%s", errOut)
	}
	files := strings.Fields(out)
	if len(files) != 3 {
		t.Fatalf("braid split printed %q, want 3 files", out)
	}
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c, err := model.ReadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	for r, f := range files {
		m, err := gguf.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		lay, _ := m.String(model.KeyShardLayout)
		names, _ := m.Strings(model.KeyShardPacked)
		_, spec, _ := readShardMeta(m)
		var sh model.Shard
		if err := json.Unmarshal([]byte(spec), &sh); err != nil {
			t.Fatal(err)
		}
		if lay != kernels.X8.Versioned() || !slices.Contains(names, "blk.0.attn_output.weight") || !slices.Contains(names, "blk.2.ffn_up.weight") {
			t.Errorf("rank %d: layout %q, packed %v; want %s with the attention output and FFN", r, lay, names, kernels.X8.Versioned())
		}
		// Every packed slice, read back from the file and unpacked, is the
		// model's slice.
		packs, err := model.PackPlan(src, c, &sh, kernels.X8, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(packs) == 0 {
			t.Fatalf("rank %d: nothing to pack", r)
		}
		for _, p := range packs {
			st, _ := src.Tensor(p.Tensor)
			ft, _ := m.Tensor(p.Tensor)
			var plain, packed []byte
			for k := int64(0); k < p.Count; k++ {
				o := p.Off + k*p.Stride
				plain = append(plain, st.Data[o:o+p.Len]...)
				packed = append(packed, ft.Data[o:o+p.Len]...)
			}
			pm := p.Matrix
			pm.Data, pm.Layout = packed, kernels.X8
			if bytes.Equal(plain, packed) {
				t.Errorf("rank %d: %s [%d runs from %d] is not repacked in the file", r, p.Tensor, p.Count, p.Off)
			} else if got := kernels.Unpack(pm).Data; !bytes.Equal(got, plain) {
				t.Errorf("rank %d: %s [%d runs from %d] unpacks to other bytes than the model's slice", r, p.Tensor, p.Count, p.Off)
			}
		}
		m.Close()
	}
	own := func(f string, env ...string) *proc {
		d := t.TempDir()
		if err := os.Link(f, filepath.Join(d, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
		return startWorker(t, "127.0.0.1:0", append(workerEnv(t), env...), "--models-dir", d)
	}
	takes := kernels.LayoutFor(quant.Q8_0) == kernels.X8
	w1 := own(files[1])
	w2 := own(files[2], "BRAID_REPACK=off")
	cl := openAt(t, path, "tensor", []float64{1, 1, 1}, w1, w2)
	got, err := generate(t, vocab, cl.Forward, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, path+"-split-x8", ref, got, vocab, false)
	if cl.StreamedBytes() == 0 {
		t.Errorf("nothing streamed: the worker with BRAID_REPACK=off used a file in the x8 layout")
	}
	cl.Close()
	if takes {
		if log := w1.stderr(); !strings.Contains(log, "loading the shard from a shard file under --models-dir") || !strings.Contains(log, "in the shard file's x8.v1 layout") {
			t.Errorf("worker 1 (kernels taking x8) did not bind its file as written:\n%s", log)
		}
	}
	log := w2.stderr()
	if !strings.Contains(log, "not using a shard file of this model") || !strings.Contains(log, "x8.v1") || !strings.Contains(log, "Q8_0 in the plain layout") {
		t.Errorf("worker 2 (BRAID_REPACK=off) did not refuse the x8 file naming both layouts:\n%s", log)
	}
}

// TestRefuseShardOnce: a shard file refused for the same reason is said
// once, however many times a load looks for it; a new reason is said.
func TestRefuseShardOnce(t *testing.T) {
	var buf bytes.Buffer
	w := &Worker{log: slog.New(slog.NewTextHandler(&buf, nil))}
	stale := errors.New("layout x8.v0, this worker's kernels take x8.v1")
	for i := 0; i < 3; i++ {
		w.refuseShard("/cache/a.gguf", stale)
	}
	w.refuseShard("/cache/b.gguf", stale)
	w.refuseShard("/cache/a.gguf", errors.New("another shard"))
	if n := strings.Count(buf.String(), "not using a shard file"); n != 3 {
		t.Errorf("%d refusals logged, want 3 (a once, b, a's new reason):\n%s", n, buf.String())
	}
}
