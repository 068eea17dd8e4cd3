package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/model"
)

// inprocWorker is a Worker served on this process's goroutines.
type inprocWorker struct {
	w    *Worker
	stop context.CancelFunc
	done chan error
}

func startInproc(t *testing.T, addr string) *inprocWorker {
	t.Helper()
	var ln net.Listener
	var err error
	// The address of a worker that just left may take a moment to be free.
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(WorkerConfig{Threads: 1, Logger: quietLogger(t), HashCacheDir: t.TempDir(), ShardCacheDir: t.TempDir()}, ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	w.SetLeaveReason("told to stop by the test")
	ctx, cancel := context.WithCancel(context.Background())
	p := &inprocWorker{w: w, stop: cancel, done: make(chan error, 1)}
	go func() { p.done <- w.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-p.done; p.done <- nil })
	return p
}

func healthOf(t *testing.T, w *Worker, method, path string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	w.HealthHandler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	var v map[string]any
	json.Unmarshal(rec.Body.Bytes(), &v)
	return rec.Code, v
}

// TestWorkerLeaves: a worker whose Serve context ends (SIGTERM in braid
// worker) tells its coordinator it leaves: the next step fails at once
// with an error naming the rank and the reason, Heal reports it between
// requests too, and the cluster re-forms by Heal when a worker is back at
// the address. The probes follow: session and rank while it serves, /ready
// 503 once it is leaving. In process, so that the race detector sees the
// stop racing the session.
func TestWorkerLeaves(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-F32.gguf")
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	w := startInproc(t, addr)
	if code, v := healthOf(t, w.w, "GET", "/health"); code != 200 || v["status"] != "ok" || v["session"] != false {
		t.Errorf("/health before a coordinator: %d %v", code, v)
	}
	if code, _ := healthOf(t, w.w, "POST", "/ready"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ready: %d", code)
	}
	if code, _ := healthOf(t, w.w, "GET", "/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", code)
	}
	c, err := Open(context.Background(), Config{Model: path, Split: "tensor", Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true,
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, ReformTimeout: 2 * time.Second, Logger: quietLogger(t),
		HashCacheDir: t.TempDir(), Nodes: []Node{{Addr: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	logits := make([]float32, c.Vocab())
	step := func(pos int32) error {
		var b model.Batch
		b.Add(1, pos, 0, true)
		return c.Forward(&b, engine.Output{TopK: 1}, logits)
	}
	if err := step(0); err != nil {
		t.Fatal(err)
	}
	if code, v := healthOf(t, w.w, "GET", "/health"); code != 200 || v["session"] != true || v["rank"] != 1.0 || v["world"] != 2.0 {
		t.Errorf("/health in a session: %d %v", code, v)
	}
	if err := c.Heal(); err != nil {
		t.Errorf("Heal on a formed cluster: %v", err)
	}

	// The worker stops between steps: the next step says why.
	w.stop()
	<-w.done
	w.done <- nil
	if code, v := healthOf(t, w.w, "GET", "/ready"); code != 503 || !strings.Contains(v["reason"].(string), "leaving") {
		t.Errorf("/ready of a worker that left: %d %v", code, v)
	}
	err = step(1)
	want := "rank 1 (" + addr + ") left the cluster: told to stop by the test"
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("the step after the worker left: %v\nwant ErrUnavailable with %q", err, want)
	}
	if err := c.Heal(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Heal with the worker gone: %v", err)
	}

	// Back at the same address: Heal re-forms (after its backoff).
	w = startInproc(t, addr)
	heal := func(ok func(error) bool) error {
		var err error
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if err = c.Heal(); ok(err) {
				return err
			}
		}
		t.Fatalf("Heal did not get there within 60 s: %v", err)
		return err
	}
	heal(func(err error) bool { return err == nil })
	if c.Reforms() != 1 {
		t.Errorf("%d re-forms, want 1", c.Reforms())
	}
	if err := step(0); err != nil {
		t.Fatalf("a step after the re-form: %v", err)
	}

	// It stops while the cluster is idle: Heal notices, with the reason.
	w.stop()
	err = heal(func(err error) bool { return err != nil })
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("Heal after the worker left while idle: %v\nwant %q", err, want)
	}
}
