package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/sharedtest"
)

const sharedModels = "../../../shared/testdata/models"

var braidBin string

// TestMain builds the real braid binary once: the tests run `braid worker`
// processes as a user would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "braid-cluster-")
	if err != nil {
		panic(err)
	}
	braidBin = filepath.Join(dir, "braid")
	if out, err := exec.Command("go", "build", "-o", braidBin, "braid/cmd/braid").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running `braid worker`.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	health string // http://HOST:PORT of --health-listen, if given
	args   []string
	env    []string
	mu     sync.Mutex
	errb   bytes.Buffer
	done   chan struct{}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// startWorker runs `braid worker --listen listen args...` and waits for the
// address it prints.
func startWorker(t *testing.T, listen string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, args: args, env: env}
	p.start(listen)
	t.Cleanup(p.kill)
	return p
}

func (p *proc) start(listen string) {
	t := p.t
	t.Helper()
	args := append([]string{"worker", "--listen", listen, "-t", "1"}, p.args...)
	cmd := exec.Command(braidBin, args...)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "BRAID_SECRET=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, p.env...)
	cmd.Stderr = lockedWriter{&p.mu, &p.errb}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(p.done) }()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("worker exited before printing its address: %s", p.stderr())
		}
		f := strings.Fields(line)
		if len(f) < 5 || f[2] != "listening" {
			t.Fatalf("unexpected first line from the worker: %q", line)
		}
		p.addr = f[4]
		if _, h, ok := strings.Cut(line, "health "); ok {
			p.health = strings.TrimSuffix(h, ")")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("worker printed no address: %s", p.stderr())
	}
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errb.String()
}

// kill ends the worker with SIGKILL (kill -9) and waits for it.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// restart starts the worker again on the same address.
func (p *proc) restart() {
	p.kill()
	p.mu.Lock()
	p.errb.Reset()
	p.mu.Unlock()
	p.start(p.addr)
}

// workerEnv keeps the workers' hash cache out of the user's.
func workerEnv(t *testing.T) []string {
	return []string{"XDG_CACHE_HOME=" + t.TempDir()}
}

func sharedModel(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(sharedModels, rel)
	if _, err := os.Stat(p); err != nil {
		sharedtest.Missing(t, "shared test model absent (%s): skipping", p)
	}
	return p
}

func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// openCluster forms a cluster over the given workers.
func openCluster(t *testing.T, path string, split string, weights []float64, workers ...*proc) *Cluster {
	t.Helper()
	c, err := tryCluster(t, path, split, weights, workers...)
	if err != nil {
		for _, w := range workers {
			t.Logf("worker %s stderr:\n%s", w.addr, w.stderr())
		}
		t.Fatal(err)
	}
	return c
}

// tryCluster is openCluster returning the error.
func tryCluster(t *testing.T, path string, split string, weights []float64, workers ...*proc) (*Cluster, error) {
	t.Helper()
	cfg := Config{Model: path, Split: split, TensorSplit: weights, Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true,
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}
	for _, w := range workers {
		cfg.Nodes = append(cfg.Nodes, Node{Addr: w.addr})
	}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// reference is a world-1 run: the prompt's logits, then greedy steps.
type reference struct {
	prompt []float32
	tokens []int32
	steps  [][]float32
}

var testPrompt = []int32{1, 39, 460, 112, 14, 255, 240, 120, 164, 303, 255, 249}

const greedySteps = 12

// forwardFunc is a backend's Forward.
type forwardFunc func(b *model.Batch, out engine.Output, logits []float32) error

// generate prefills testPrompt with full logits at every position, then
// decodes greedily; with cands the odd decode steps ask for candidates only
// (the rows are then -Inf but for the candidates).
func generate(t *testing.T, vocab int, fwd forwardFunc, cands bool) (reference, error) {
	t.Helper()
	var r reference
	var b model.Batch
	for i, tok := range testPrompt {
		b.Add(tok%int32(vocab), int32(i), 0, true)
	}
	r.prompt = make([]float32, len(testPrompt)*vocab)
	if err := fwd(&b, engine.FullLogits, r.prompt); err != nil {
		return r, err
	}
	row := r.prompt[(len(testPrompt)-1)*vocab:]
	pos := int32(len(testPrompt))
	for step := 0; step < greedySteps; step++ {
		out := engine.FullLogits
		if cands && step%2 == 1 {
			out = engine.Output{TopK: 1}
		}
		tok := argmax(row)
		r.tokens = append(r.tokens, tok)
		b.Reset()
		b.Add(tok, pos, 0, true)
		pos++
		row = make([]float32, vocab)
		if err := fwd(&b, out, row); err != nil {
			return r, fmt.Errorf("greedy step %d: %w", step, err)
		}
		r.steps = append(r.steps, row)
	}
	return r, nil
}

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

// world1 runs the reference on one node.
func world1(t *testing.T, path string) (reference, int) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: 64, F32: true})
	if err != nil {
		t.Fatal(err)
	}
	l := engine.NewLocal(m, cache)
	r, err := generate(t, m.Cfg.Vocab, l.Forward, false)
	if err != nil {
		t.Fatal(err)
	}
	return r, m.Cfg.Vocab
}

// relDiff is max |a-b| over a row divided by the spread of b.
func relDiff(a, b []float32) float64 {
	lo, hi := b[0], b[0]
	d := 0.0
	for i, v := range b {
		lo, hi = min(lo, v), max(hi, v)
		d = max(d, float64(abs32(a[i]-v)))
	}
	return d / float64(hi-lo)
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// splitTolerance is the model package's documented bound on a split's
// logits relative to world size 1 (internal/model/split_test.go): max
// |diff| / spread of the row, by weight type.
func splitTolerance(name string) float64 {
	switch {
	case strings.Contains(name, "-F32"):
		return 1e-5
	case strings.Contains(name, "-F16"), strings.Contains(name, "-BF16"):
		return 1e-3
	}
	return 2e-2
}
