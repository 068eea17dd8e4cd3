package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/gguf"
	"braid/internal/hub"
	"braid/internal/hub/hubtest"
	"braid/internal/modelgen"
	"braid/internal/plan"
	"braid/internal/quant"
)

// TestSurveySources: asked with the load's model identity (SHA-256 and hub
// reference), each worker says where its weights would come from, and a
// load then does just that with those bytes: a worker with the file at
// the coordinator's path reads its shard, one with the model in its hub
// cache reads it there, one that may pull downloads the whole model from
// the (fake) hub, one started with --no-pull receives its shard's slices
// from the coordinator. After the load each holds its shard (nothing to
// read); after an unload the puller reads its hub cache and the receiver
// the shard it cached. A worker that cannot be reached, and one whose hub
// does not answer, are reported so.
func TestSurveySources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llama-survey-Q8_0.gguf")
	if err := modelgen.WriteFile(path, modelgen.Config{Arch: "llama", Layers: 5, Embd: 128, FF: 256, Heads: 4, KVHeads: 2,
		Vocab: 512, Context: 256, Type: quant.Q8_0, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const repo = "test/Survey-GGUF"
	h := hubtest.New(hubtest.Repo{Name: repo, Files: []hubtest.File{{Path: filepath.Base(path), Data: data}}})
	defer h.Close()
	pullInto := func(dir string) *hub.Model {
		t.Helper()
		m, err := (&hub.Client{Endpoint: h.URL}).Pull(context.Background(), hub.Cache{Dir: dir}, hub.Spec{Repo: repo, Quant: "Q8_0"})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mod := pullInto(t.TempDir()) // the coordinator's copy, in its hub cache
	ref := &HubModel{Repo: mod.Repo, Commit: mod.Commit, Quant: mod.Quant}
	for _, f := range mod.Files {
		ref.Files = append(ref.Files, f.File)
	}
	hubEnv := func(home, endpoint string) []string {
		return append(workerEnv(t), "HF_ENDPOINT="+endpoint, "HF_HOME="+home, "HF_HUB_CACHE=", "HF_TOKEN=", "HF_HUB_OFFLINE=")
	}
	cached := t.TempDir()
	pullInto(filepath.Join(cached, "hub"))
	wRead := startWorker(t, "127.0.0.1:0", hubEnv(t.TempDir(), h.URL))
	wCache := startWorker(t, "127.0.0.1:0", hubEnv(cached, h.URL))
	wPull := startWorker(t, "127.0.0.1:0", hubEnv(t.TempDir(), h.URL))
	wRecv := startWorker(t, "127.0.0.1:0", hubEnv(t.TempDir(), h.URL), "--no-pull")
	nowhere := "/nonexistent/braid/" + filepath.Base(path)
	nodes := []Node{{Addr: wRead.addr, Model: path}, {Addr: wCache.addr, Model: nowhere}, {Addr: wPull.addr, Model: nowhere}, {Addr: wRecv.addr, Model: nowhere}}
	even := []float64{1, 1, 1, 1, 1}
	cfg := Config{Model: mod.Path(), Nodes: nodes, Split: "layer", TensorSplit: even, Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true,
		Hub: ref, Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}

	f, err := gguf.Open(mod.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// survey asks the workers of cfg, plans as Open does (the same
	// weights, context and batch) and returns the sources.
	survey := func(cfg Config) ([]Source, *plan.Plan) {
		t.Helper()
		s := Ask(context.Background(), cfg)
		defer s.Close()
		ranks := []plan.Rank{{Name: "local"}}
		for _, n := range s.Nodes {
			ranks = append(ranks, plan.Rank{Name: n.Addr, Mem: n.Mem})
		}
		mode, err := plan.ParseMode(cfg.Split, len(ranks))
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Make(f, plan.Request{Ranks: ranks, Mode: mode, Weights: cfg.TensorSplit, Ctx: cfg.Ctx, Parallel: 1,
			MaxBatch: cfg.MaxBatch, Threads: 1, KVF32: cfg.KVF32})
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := s.Sources(f, p)
		if err != nil {
			t.Fatal(err)
		}
		return srcs, p
	}
	type want struct {
		action string
		bytes  int64 // -1: the rank's shard
		where  string
	}
	check := func(label string, srcs []Source, wants []want) {
		t.Helper()
		if len(srcs) != len(wants) {
			t.Fatalf("%s: %d sources for %d ranks", label, len(srcs), len(wants))
		}
		for i, s := range srcs {
			w := wants[i]
			t.Logf("%s: rank %d (%s): %s %d bytes: %s", label, i, s.Addr, s.Action, s.Bytes, s.Where)
			b := w.bytes
			if b < 0 {
				b = s.Shard
			}
			if s.Err != nil || s.Rank != i || s.Action != w.action || s.Bytes != b || s.Shard <= 0 || !strings.Contains(s.Where, w.where) {
				t.Errorf("%s: rank %d (%s): %s %d bytes (shard %d) from %q, err %v; want %s %d bytes from %q",
					label, i, s.Addr, s.Action, s.Bytes, s.Shard, s.Where, s.Err, w.action, b, w.where)
			}
		}
	}

	before, p := survey(cfg)
	check("before the load", before, []want{
		{SourceRead, -1, "its shard of " + mod.Path()},
		{SourceRead, -1, "its copy at " + path},
		{SourceRead, -1, "its hub cache " + filepath.Join(cached, "hub")},
		{SourcePull, int64(len(data)), "from the hub " + h.URL},
		{SourceReceive, -1, "--no-pull"},
	})
	if t.Failed() {
		for _, w := range []*proc{wRead, wCache, wPull, wRecv} {
			t.Logf("worker %s stderr:\n%s", w.addr, w.stderr())
		}
		t.FailNow()
	}

	// The load does what the workers said, with those bytes.
	served := h.Served.Load()
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Served.Load() - served; got != before[3].Bytes {
		t.Errorf("the hub served %d bytes; the survey said rank 3 pulls %d", got, before[3].Bytes)
	}
	if got := c.StreamedBytes(); got != uint64(before[4].Bytes) {
		t.Errorf("the coordinator streamed %d bytes; the survey said rank 4 receives %d", got, before[4].Bytes)
	}
	for i, rp := range c.Plan().Ranks {
		if shardSpec(rp.Shard) != shardSpec(p.Ranks[i].Shard) {
			t.Errorf("rank %d: the load's shard %s differs from the survey's plan's %s", i, rp.Shard.String(), p.Ranks[i].Shard.String())
		}
	}
	c.Close()

	// Loaded: every worker holds its shard and reads nothing.
	loaded, _ := survey(cfg)
	check("loaded", loaded, []want{
		{SourceRead, -1, "its shard of"},
		{SourceRead, 0, "holds this shard already"},
		{SourceRead, 0, "holds this shard already"},
		{SourceRead, 0, "holds this shard already"},
		{SourceRead, 0, "holds this shard already"},
	})

	// Unloaded: the puller has the model in its hub cache now, the
	// receiver its shard in its shard cache.
	if c, err = Open(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.Unload(); err != nil {
		t.Fatal(err)
	}
	unloaded, _ := survey(cfg)
	check("unloaded", unloaded, []want{
		{SourceRead, -1, "its shard of"},
		{SourceRead, -1, "its copy at " + path},
		{SourceRead, -1, "its hub cache"},
		{SourceRead, -1, "its hub cache"},
		{SourceRead, -1, "the shard it received before"},
	})

	// A worker that cannot be reached, and one whose hub does not answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	wOffline := startWorker(t, "127.0.0.1:0", hubEnv(t.TempDir(), "http://"+gone))
	cfg2 := cfg
	cfg2.Nodes = []Node{{Addr: gone}, {Addr: wOffline.addr, Model: nowhere}}
	cfg2.TensorSplit, cfg2.ConnectTimeout = nil, time.Second
	srcs, _ := survey(cfg2)
	if s := srcs[1]; s.Err == nil || !s.Unreachable || s.Action != "" || s.Addr != gone || !strings.Contains(s.Err.Error(), "not reachable") {
		t.Errorf("an unreachable worker: %+v", s)
	}
	if s := srcs[2]; s.Err != nil || s.Action != SourceReceive || s.Bytes != s.Shard || !strings.Contains(s.Where, "does not give it") {
		t.Errorf("a worker whose hub does not answer: %+v", s)
	}

	// The question is checked: a malformed one is refused and the session
	// closed; plain Info carries no source.
	for _, q := range []struct {
		payload []byte
		want    string
	}{
		{[]byte{kindInfo}, ""},
		{append([]byte{kindInfo}, `{"sha256":"../../etc"}`...), "model SHA-256"},
		{append([]byte{kindInfo}, `{"sha256":`...), "malformed"},
	} {
		tr, err := dist.Connect(context.Background(), dist.MeshConfig{Rank: 0, Addrs: []string{"", wRead.addr}, Timeout: 5 * time.Second,
			ConnectTimeout: 5 * time.Second, Logger: quietLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.SendControl(1, wire.Tag{Step: 1, Op: wire.OpStep}, q.payload); err != nil {
			t.Fatal(err)
		}
		_, p, err := tr.RecvControl(1)
		tr.Close()
		switch {
		case err != nil || len(p) == 0:
			t.Errorf("%q: %v", q.payload, err)
		case q.want == "":
			var info infoMsg
			if p[0] != kindOK || parseJSON(p[1:], &info) != nil || info.Source != nil || info.DataAddr == "" {
				t.Errorf("plain Info: %q", p)
			}
		case p[0] != kindError || !strings.Contains(string(p), q.want):
			t.Errorf("%q: answered %q, want an error about %q", q.payload, p, q.want)
		}
	}
}
