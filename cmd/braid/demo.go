package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"braid/internal/cluster"
	"braid/internal/engine"
	"braid/internal/modelgen"
	"braid/internal/quant"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

func init() {
	register("demo", "see braid work: this node, then one model on one node and split over two local workers", runDemo)
}

// demoModel is the demo's random-weight model: a real llama shape (grouped
// KV heads, K-quant-aligned widths, so every split of it is a real one),
// small enough to write and run in seconds.
var demoModel = modelgen.Config{Arch: "llama", Name: "braid demo (random weights)", Layers: 4, Embd: 256, FF: 768,
	Heads: 8, KVHeads: 4, Vocab: 1024, Context: 2048, Type: quant.Q8_0, EmbedType: quant.Q8_0, Seed: 1}

// demoModelName changes whenever demoModel does, so a cached file is never
// stale.
const demoModelName = "demo-llama-4x256-Q8_0-v1.gguf"

// runDemo is the README's first command. Without a model it needs no
// download: it writes the random-weight model once into the user's cache,
// starts two `braid worker` processes on loopback, and runs the same greedy
// generation on one node, with --split tensor and with --split layer, to
// show that the tokens are the same and what each costs.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "[--model FILE] [-p TEXT] [-n N]", stderr)
	path := fs.String("model", "", "a GGUF to run instead of the generated random-weight model")
	prompt := fs.String("p", "Once upon a time", "prompt")
	n := fs.Int("n", 32, "tokens to generate")
	threads := fs.Int("t", 1, "threads of each rank (this node and each worker)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *n < 1 {
		return usagef("-n %d: need at least one token", *n)
	}
	if *threads < 1 {
		return usagef("-t %d: need at least one thread", *threads)
	}
	fmt.Fprintln(stdout, "== braid doctor")
	writeDoctor(stdout)

	random := *path == ""
	if random {
		p, made, err := demoModelFile()
		if err != nil {
			return err
		}
		*path = p
		if made {
			fmt.Fprintf(stdout, "\n== wrote a random-weight llama model (4 layers, 8 heads / 4 KV heads, Q8_0): %s\n", p)
		} else {
			fmt.Fprintf(stdout, "\n== random-weight llama model (4 layers, 8 heads / 4 KV heads, Q8_0), from the cache: %s\n", p)
		}
	} else if _, err := os.Stat(*path); err != nil {
		return err
	}

	// Ctrl-C (or SIGTERM) ends the runs and the workers.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ws, err := startDemoWorkers(ctx, 2, *threads)
	defer ws.stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n== started 2 workers:")
	for _, w := range ws.procs {
		fmt.Fprintf(stdout, " %s (pid %d)", w.addr, w.cmd.Process.Pid)
	}
	fmt.Fprintln(stdout)
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}

	type run struct {
		name    string
		threads int
		split   string
		toks    []int32
		st      engine.Stats
		prof    *cluster.Profile
	}
	single := min(3**threads, runtime.NumCPU())
	runs := []*run{{name: "one node", threads: single}, {name: "--split tensor", split: "tensor", threads: 3 * *threads},
		{name: "--split layer", split: "layer", threads: 3 * *threads}}
	fmt.Fprintf(stdout, "\n== greedy generation of %d tokens from %q\n", *n, *prompt)
	var text string
	for _, r := range runs {
		if err := ctx.Err(); err != nil {
			return err
		}
		mf := modelFlags{path: *path, threads: *threads, ctx: 512, batch: 512}
		cf := clusterFlags{timeout: 30 * time.Second}
		if r.split == "" {
			mf.threads = single
		} else {
			cf.workers, cf.split = ws.addrs(), r.split
		}
		l, err := loadBackend(&mf, &cf, 1, io.Discard)
		if err != nil {
			return fmt.Errorf("%s: %w%s", r.name, err, ws.logs())
		}
		tok, err := tokenizer.FromGGUF(l.file)
		if err != nil {
			l.Close()
			return err
		}
		params := sample.DefaultParams()
		params.Temperature = 0
		smp, err := sample.New(params, l.backend.Vocab())
		if err != nil {
			l.Close()
			return err
		}
		req := engine.Request{Prompt: tok.Encode(*prompt, true, false), MaxTokens: *n, Context: l.ctx, Sampler: smp,
			Emit: func(id int32) error { r.toks = append(r.toks, id); return nil }}
		if !random { // random weights have no notion of an end of text
			req.Stop = tok.IsEOG
		}
		if l.cl != nil {
			err = l.cl.StartProfile()
		}
		if err == nil {
			r.st, err = l.generate(ctx, req)
		}
		if err == nil && l.cl != nil {
			r.prof, err = l.cl.StopProfile()
		}
		if r.split == "" && err == nil {
			dec := tok.NewDecoder()
			for _, id := range r.toks {
				text += dec.Add(id)
			}
			text += dec.Flush()
		}
		l.Close()
		if err != nil {
			return fmt.Errorf("%s: %w%s", r.name, err, ws.logs())
		}
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tranks\tthreads\tprefill tok/s\tdecode tok/s\tcommunication share\ttokens")
	for _, r := range runs {
		ranks, share := "1", "-"
		if r.prof != nil {
			ranks = fmt.Sprint(len(r.prof.Ranks))
			share = fmt.Sprintf("%.0f%%", 100*r.prof.CommShare)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%s\t%s\n", r.name, ranks, r.threads, r.st.PrefillTPS(), r.st.DecodeTPS(), share, showTokens(r.toks))
	}
	tw.Flush()
	if !random {
		fmt.Fprintf(stdout, "text: %q\n", text)
	}
	for _, r := range runs[1:] {
		if i := firstDiff(r.toks, runs[0].toks); i >= 0 {
			fmt.Fprintf(stdout, "tokens differ: %s departs from one node at token %d\n", r.name, i)
			return fmt.Errorf("%s generated other tokens than one node (from token %d)", r.name, i)
		}
	}
	fmt.Fprintf(stdout, "tokens identical: yes, all %d tokens in all 3 runs\n", len(runs[0].toks))
	fmt.Fprintln(stdout, "(the communication share is the part of each step that is not compute on the critical path;")
	fmt.Fprintln(stdout, " every rank shares this machine's cores, so a split here shows its price, not a speed-up)")
	return nil
}

func firstDiff(a, b []int32) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// showTokens prints the first and last few token ids.
func showTokens(t []int32) string {
	s := func(x []int32) string { return strings.Trim(fmt.Sprint(x), "[]") }
	if len(t) <= 10 {
		return s(t)
	}
	return s(t[:6]) + " ... " + s(t[len(t)-3:])
}

// demoModelFile returns the cached demo model, writing it first when it is
// not there (made says so). It is written to a temporary name and renamed,
// so concurrent demos never see half a file.
func demoModelFile() (path string, made bool, err error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", false, fmt.Errorf("no user cache directory for the demo model: %w", err)
	}
	dir = filepath.Join(dir, "braid", "demo")
	path = filepath.Join(dir, demoModelName)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return path, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	tmp, err := os.CreateTemp(dir, "demo-*.tmp")
	if err != nil {
		return "", false, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := modelgen.WriteFile(tmp.Name(), demoModel); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", false, err
	}
	return path, true, nil
}

// demoWorker is one `braid worker` child process.
type demoWorker struct {
	cmd  *exec.Cmd
	addr string
	log  *lockedBuffer
	done chan struct{}
	// stdin is the write end of the worker's --exit-on-eof pipe: the worker
	// ends when it closes, which the kernel does when this process ends in
	// any way (even kill -9).
	stdin io.WriteCloser
}

type demoWorkers struct{ procs []*demoWorker }

func (ws *demoWorkers) addrs() string {
	var a []string
	for _, w := range ws.procs {
		a = append(a, w.addr)
	}
	return strings.Join(a, ",")
}

// logs is the workers' stderr, for an error message.
func (ws *demoWorkers) logs() string {
	var b strings.Builder
	for _, w := range ws.procs {
		if s := strings.TrimSpace(w.log.String()); s != "" {
			fmt.Fprintf(&b, "\nworker %s:\n%s", w.addr, indent(s, "  "))
		}
	}
	return b.String()
}

// stop ends the workers (closing their pipes, then SIGTERM, then SIGKILL
// after a grace period) and waits for them.
func (ws *demoWorkers) stop() {
	if ws == nil {
		return
	}
	for _, w := range ws.procs {
		w.stdin.Close()
		w.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range ws.procs {
		select {
		case <-w.done:
		case <-time.After(5 * time.Second):
			w.cmd.Process.Kill()
			<-w.done
		}
	}
}

// startDemoWorkers starts n workers of this same binary on loopback ports
// the system picks, and waits (up to 20 s each) for the addresses they
// print. They end with ctx, with stop, or when this process ends.
func startDemoWorkers(ctx context.Context, n, threads int) (*demoWorkers, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start workers: %w", err)
	}
	ws := &demoWorkers{}
	for i := 0; i < n; i++ {
		cmd := exec.Command(exe, "worker", "--listen", "127.0.0.1:0", "-t", fmt.Sprint(threads), "--exit-on-eof")
		// The workers use no secret: they accept loopback peers only.
		var env []string
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "BRAID_SECRET=") {
				env = append(env, e)
			}
		}
		cmd.Env = env
		w := &demoWorker{cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
		cmd.Stderr = w.log
		if w.stdin, err = cmd.StdinPipe(); err != nil {
			return ws, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return ws, err
		}
		if err := cmd.Start(); err != nil {
			return ws, fmt.Errorf("starting a worker: %w", err)
		}
		ws.procs = append(ws.procs, w)
		lines := make(chan string, 1)
		go func() { // owns the worker's stdout until it closes
			sc := bufio.NewScanner(out)
			if sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
			io.Copy(io.Discard, out)
		}()
		go func() { cmd.Wait(); close(w.done) }()
		select {
		case line, ok := <-lines:
			f := strings.Fields(line)
			if !ok || len(f) < 5 || f[2] != "listening" {
				return ws, fmt.Errorf("worker %d did not start (first line %q)%s", i+1, line, ws.logs())
			}
			w.addr = f[4]
		case <-ctx.Done():
			return ws, ctx.Err()
		case <-time.After(20 * time.Second):
			return ws, fmt.Errorf("worker %d printed no address in 20 s%s", i+1, ws.logs())
		}
	}
	go func() { // ends the workers as soon as ctx does (Ctrl-C)
		<-ctx.Done()
		for _, w := range ws.procs {
			w.cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
	return ws, nil
}

// lockedBuffer is a bytes buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the start; a worker that logs forever must not eat memory
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
