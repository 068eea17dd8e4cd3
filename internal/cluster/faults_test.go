package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/engine"
	"braid/internal/model"
)

const faultModel = "tiny-llama/tiny-llama-Q8_0.gguf"

// decode runs greedy steps from the prompt on a backend, returning the
// tokens; it stops at the first error.
func decode(c *Cluster, vocab, steps int) ([]int32, error) {
	var b model.Batch
	for i, tok := range testPrompt {
		b.Add(tok%int32(vocab), int32(i), 0, i == len(testPrompt)-1)
	}
	c.Drop(0)
	row := make([]float32, vocab)
	if err := c.Forward(&b, engine.Output{TopK: 1}, row); err != nil {
		return nil, err
	}
	var toks []int32
	pos := int32(len(testPrompt))
	for i := 0; i < steps; i++ {
		tok := argmax(row)
		toks = append(toks, tok)
		b.Reset()
		b.Add(tok, pos, 0, true)
		pos++
		if err := c.Forward(&b, engine.Output{TopK: 1}, row); err != nil {
			return toks, err
		}
	}
	return toks, nil
}

// TestFramesPerDecodeStep asserts from the counters that a decode step is
// exactly one request to and one response from each worker.
func TestFramesPerDecodeStep(t *testing.T) {
	path := sharedModel(t, faultModel)
	env := workerEnv(t)
	for _, split := range []string{"tensor", "layer"} {
		t.Run(split, func(t *testing.T) {
			c := openCluster(t, path, split, nil, startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env))
			vocab := c.Vocab()
			var b model.Batch
			for i, tok := range testPrompt {
				b.Add(tok, int32(i), 0, i == len(testPrompt)-1)
			}
			row := make([]float32, vocab)
			if err := c.Forward(&b, engine.Output{TopK: 1}, row); err != nil {
				t.Fatal(err)
			}
			before := c.Counters()
			const steps = 10
			pos := int32(len(testPrompt))
			for i := 0; i < steps; i++ {
				b.Reset()
				b.Add(argmax(row), pos, 0, true)
				pos++
				if err := c.Forward(&b, engine.Output{TopK: 1}, row); err != nil {
					t.Fatal(err)
				}
			}
			after := c.Counters()
			for i := range after {
				a, z := after[i], before[i]
				if a.StepRequests-z.StepRequests != steps || a.StepResults-z.StepResults != steps {
					t.Errorf("rank %d: %d step requests and %d results for %d decode steps", a.Rank, a.StepRequests-z.StepRequests, a.StepResults-z.StepResults, steps)
				}
				if a.FramesSent-z.FramesSent != steps || a.FramesReceived-z.FramesReceived != steps {
					t.Errorf("rank %d: the session carried %d frames out and %d in for %d decode steps, want exactly one each per step",
						a.Rank, a.FramesSent-z.FramesSent, a.FramesReceived-z.FramesReceived, steps)
				}
			}
		})
	}
}

// TestKillWorkerMidGeneration kills a worker with SIGKILL during decoding:
// the step fails with an error naming the rank and its address, the
// coordinator carries on, and once the worker is back the cluster re-forms
// by itself and generates the same tokens again.
func TestKillWorkerMidGeneration(t *testing.T) {
	path := sharedModel(t, faultModel)
	env := workerEnv(t)
	w1, w2 := startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)
	c := openCluster(t, path, "tensor", nil, w1, w2)
	want, err := decode(c, c.Vocab(), 8)
	if err != nil {
		t.Fatal(err)
	}
	var b model.Batch
	for i, tok := range testPrompt {
		b.Add(tok, int32(i), 0, i == len(testPrompt)-1)
	}
	c.Drop(0)
	row := make([]float32, c.Vocab())
	if err := c.Forward(&b, engine.Output{TopK: 1}, row); err != nil {
		t.Fatal(err)
	}
	w2.kill()
	b.Reset()
	b.Add(argmax(row), int32(len(testPrompt)), 0, true)
	err = c.Forward(&b, engine.Output{TopK: 1}, row)
	if err == nil {
		t.Fatal("a step with a killed worker succeeded")
	}
	if !strings.Contains(err.Error(), "rank 2") || !strings.Contains(err.Error(), w2.addr) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("the error does not name rank 2 at %s or is not ErrUnavailable: %v", w2.addr, err)
	}
	t.Logf("step error: %v", err)
	// While the worker is down, steps fail fast with the reason.
	if _, err := decode(c, c.Vocab(), 2); err == nil || !strings.Contains(err.Error(), w2.addr) {
		t.Errorf("with the worker down: %v, want an error naming %s", err, w2.addr)
	}
	w2.restart()
	got, err := decode(c, c.Vocab(), 8)
	if err != nil {
		t.Fatalf("after the worker restarted: %v\nworker log:\n%s", err, w2.stderr())
	}
	if !equalTokens(got, want) {
		t.Errorf("after the re-form the tokens are %v, before %v", got, want)
	}
	if c.Reforms() == 0 {
		t.Error("the cluster did not count a re-form")
	}
	if !w1.alive() {
		t.Error("worker 1 died")
	}
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// proxy forwards TCP connections to target until closed; cut closes every
// connection it carries (a link that drops) and keeps accepting new ones.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		a, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			a.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, a, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(a, b); a.Close() }()
		go func() { defer p.wg.Done(); io.Copy(b, a); b.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestLinkLostMidGeneration routes the data-plane link between rank 0 and
// rank 1 through a proxy and cuts it between steps: the step fails naming
// rank 1, and the next one re-forms over a new connection.
func TestLinkLostMidGeneration(t *testing.T) {
	path := sharedModel(t, faultModel)
	env := workerEnv(t)
	w1 := startWorker(t, "127.0.0.1:0", env)
	// The worker's data port is learned from a first cluster.
	c0 := openCluster(t, path, "tensor", nil, w1)
	data := c0.workers[0].info.DataAddr
	want, err := decode(c0, c0.Vocab(), 6)
	if err != nil {
		t.Fatal(err)
	}
	c0.Close()
	px := newProxy(t, data)
	cfg := Config{Model: path, Split: "tensor", Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true, Timeout: 10 * time.Second,
		ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(),
		Nodes: []Node{{Addr: w1.addr}}, Links: map[[2]int]string{{0, 1}: px.ln.Addr().String()}}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := decode(c, c.Vocab(), 3); err != nil {
		t.Fatal(err)
	}
	px.cut()
	_, err = decode(c, c.Vocab(), 3)
	if err == nil {
		t.Fatal("steps over a cut link succeeded")
	}
	if !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("the error does not name rank 1: %v", err)
	}
	t.Logf("step error: %v", err)
	got, err := decode(c, c.Vocab(), 6)
	if err != nil {
		t.Fatalf("after the link came back: %v", err)
	}
	if !equalTokens(got, want) {
		t.Errorf("tokens after the re-form %v, want %v", got, want)
	}
}

// TestHungWorker stops a worker (SIGSTOP): the step fails at the deadline
// naming the rank; after SIGCONT the cluster re-forms.
func TestHungWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a deadline")
	}
	path := sharedModel(t, faultModel)
	env := workerEnv(t)
	w1 := startWorker(t, "127.0.0.1:0", env)
	cfg := Config{Model: path, Split: "tensor", Threads: 1, MaxBatch: 16, Ctx: 64, KVF32: true, Timeout: 1500 * time.Millisecond,
		ConnectTimeout: 3 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(), Nodes: []Node{{Addr: w1.addr}}}
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, err := decode(c, c.Vocab(), 4)
	if err != nil {
		t.Fatal(err)
	}
	w1.cmd.Process.Signal(syscall.SIGSTOP)
	start := time.Now()
	_, err = decode(c, c.Vocab(), 4)
	w1.cmd.Process.Signal(syscall.SIGCONT)
	if err == nil {
		t.Fatal("steps with a stopped worker succeeded")
	}
	if !strings.Contains(err.Error(), "rank 1") || !errors.Is(err, dist.ErrTimeout) && !strings.Contains(err.Error(), "timed out") {
		t.Errorf("want a timeout naming rank 1, got: %v", err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	got, err := decode(c, c.Vocab(), 4)
	if err != nil {
		t.Fatalf("after SIGCONT: %v\n%s", err, w1.stderr())
	}
	if !equalTokens(got, want) {
		t.Errorf("tokens %v, want %v", got, want)
	}
}

// TestGarbageConnections sends random bytes, a frame header claiming a huge
// payload and a Step claiming a huge batch to a worker: each connection is
// closed with a log line, the worker stays up and serves a coordinator.
func TestGarbageConnections(t *testing.T) {
	path := sharedModel(t, faultModel)
	w := startWorker(t, "127.0.0.1:0", workerEnv(t))
	send := func(b []byte) {
		conn, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(b)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.Copy(io.Discard, conn) // until the worker closes it
		conn.Close()
	}
	junk := make([]byte, 4096)
	rand.Read(junk)
	send(junk)
	var hdr [wire.HeaderSize]byte
	wire.Put(hdr[:], &wire.Header{Type: wire.TypeHello, Stripes: 1})
	binary.LittleEndian.PutUint32(hdr[24:], 0xfffffff0) // payload length
	send(hdr[:])
	hdr = [wire.HeaderSize]byte{}
	wire.Put(hdr[:], &wire.Header{Type: wire.TypeControl, Stripes: 1})
	binary.LittleEndian.PutUint32(hdr[24:], 1<<31)
	send(hdr[:])

	// An authenticated session that sends a malformed Step: a batch of 2^30
	// tokens in a few bytes.
	tr, err := dist.Connect(context.Background(), dist.MeshConfig{Rank: 0, Addrs: []string{"", w.addr}, Timeout: 5 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte{kindStep}
	bad = binary.LittleEndian.AppendUint64(bad, 1)
	bad = append(bad, 0)
	bad = binary.LittleEndian.AppendUint32(bad, 1) // top-k
	bad = binary.LittleEndian.AppendUint32(bad, 1) // micro-batches
	bad = binary.LittleEndian.AppendUint32(bad, 0) // KV operations
	bad = binary.LittleEndian.AppendUint32(bad, 1<<30)
	if err := tr.SendControl(1, wire.Tag{Step: 1, Op: wire.OpStep}, bad); err != nil {
		t.Fatal(err)
	}
	_, p, err := tr.RecvControl(1)
	if err != nil || len(p) == 0 || p[0] != kindError || !strings.Contains(string(p), "token count") {
		t.Errorf("malformed step: response %q, %v; want an error about the token count", p, err)
	}
	tr.Close()

	if !w.alive() {
		t.Fatalf("the worker died:\n%s", w.stderr())
	}
	c := openCluster(t, path, "tensor", nil, w)
	if _, err := decode(c, c.Vocab(), 3); err != nil {
		t.Fatal(err)
	}
	log := w.stderr()
	for _, want := range []string{"bad magic", "exceeds the limit of 65536", "exceeds the limit of 67108864", "token count"} {
		if !strings.Contains(log, want) {
			t.Errorf("the worker log does not mention %q:\n%s", want, log)
		}
	}
}

// TestWrongSecret: a coordinator with another secret is refused with a
// clear reason; the worker stays up.
func TestWrongSecret(t *testing.T) {
	path := sharedModel(t, faultModel)
	dir := t.TempDir()
	sf := filepath.Join(dir, "secret")
	if err := os.WriteFile(sf, []byte("the-right-secret-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, "127.0.0.1:0", workerEnv(t), "--secret-file", sf)
	for _, tc := range []struct {
		secret []byte
		want   string
	}{{[]byte("a-wrong-secret-456"), "secret"}, {nil, "secret"}} {
		_, err := Open(context.Background(), Config{Model: path, Split: "tensor", Threads: 1, MaxBatch: 16, Ctx: 64, Secret: tc.secret,
			Timeout: 5 * time.Second, ConnectTimeout: 3 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(), Nodes: []Node{{Addr: w.addr}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("secret %q: %v, want a refusal about the %s naming rank 1", tc.secret, err, tc.want)
		}
		t.Logf("secret %q: %v", tc.secret, err)
	}
	c, err := Open(context.Background(), Config{Model: path, Split: "tensor", Threads: 1, MaxBatch: 16, Ctx: 64, Secret: []byte("the-right-secret-123"),
		Timeout: 5 * time.Second, ConnectTimeout: 3 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(), Nodes: []Node{{Addr: w.addr}}})
	if err != nil {
		t.Fatalf("with the right secret: %v", err)
	}
	defer c.Close()
	if _, err := decode(c, c.Vocab(), 2); err != nil {
		t.Fatal(err)
	}
}

// TestBuildMismatch: a coordinator of another build is refused with both
// digests in the message.
func TestBuildMismatch(t *testing.T) {
	path := sharedModel(t, faultModel)
	w := startWorker(t, "127.0.0.1:0", workerEnv(t))
	_, err := Open(context.Background(), Config{Model: path, Split: "tensor", Threads: 1, MaxBatch: 16, Ctx: 64, Build: "braid-other-build",
		Timeout: 5 * time.Second, ConnectTimeout: 3 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir(), Nodes: []Node{{Addr: w.addr}}})
	if err == nil {
		t.Fatal("a coordinator of another build was accepted")
	}
	if !strings.Contains(err.Error(), "braid-other-build") || !strings.Contains(err.Error(), dist.BuildDigest()) {
		t.Errorf("the refusal does not give both digests: %v", err)
	}
	t.Logf("%v", err)
	if !w.alive() {
		t.Fatal("the worker died")
	}
}

// TestSecondCoordinatorRefused: while one coordinator is served, another is
// told the worker is busy.
func TestSecondCoordinatorRefused(t *testing.T) {
	path := sharedModel(t, faultModel)
	w := startWorker(t, "127.0.0.1:0", workerEnv(t))
	c := openCluster(t, path, "tensor", nil, w)
	_, err := tryCluster(t, path, "tensor", nil, w)
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("a second coordinator: %v, want a refusal saying the worker is busy", err)
	}
	if _, err := decode(c, c.Vocab(), 2); err != nil {
		t.Errorf("the first coordinator after the refusal: %v", err)
	}
}
