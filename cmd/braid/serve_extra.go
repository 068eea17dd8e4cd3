package main

// What `braid serve` adds to the server beyond the model: the access log
// and its format, embeddings on this node, the cluster view's data, the
// checks made before listening, and the second Ctrl-C.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/server"
	"braid/internal/tokenizer"
)

// serveLog writes serve's lines as text or as JSON objects (--log-format).
type serveLog struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

func newServeLog(w io.Writer, format string) (*serveLog, error) {
	switch format {
	case "text", "":
		return &serveLog{w: w}, nil
	case "json":
		return &serveLog{w: w, json: true}, nil
	}
	return nil, usagef("--log-format %q: must be text or json", format)
}

func (l *serveLog) logf(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.json {
		b, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339Nano), "msg": msg})
		fmt.Fprintf(l.w, "%s\n", b)
		return
	}
	fmt.Fprintf(l.w, "%s braid serve: %s\n", time.Now().Format("15:04:05.000"), msg)
}

func (l *serveLog) access(e server.AccessEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.json {
		fmt.Fprintln(l.w, e.JSON())
		return
	}
	fmt.Fprintf(l.w, "%s braid serve: %s\n", e.Time.Format("15:04:05.000"), e.Text())
}

// precheck opens the model before serve listens, so a file that is
// missing, not a GGUF, a shard of a split, or of an architecture braid
// does not run fails at once with its own error, not after "listening".
// It reports whether the model is an encoder (embeddings only), whose
// configuration it checks instead.
func precheck(path string) (encoder bool, err error) {
	f, err := gguf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := refuseShard(f); err != nil {
		return false, err
	}
	if model.IsEncoder(f.Arch()) {
		_, err = model.ReadEncoderConfig(f)
		return true, err
	}
	_, err = model.ReadConfig(f)
	return false, err
}

// serveEncoder serves an encoder model on one node: /v1/embeddings with
// the model's pooling, the generation endpoints refused (400
// model_not_generative), until ctx ends or the server stops.
func serveEncoder(srv *server.Server, served <-chan error, mf *modelFlags, logf func(string, ...any), stop func()) error {
	fail := func(err error) error {
		logf("the model failed to load: %v", err)
		srv.SetUnavailable("model failed to load: " + err.Error())
		stop()
		<-served
		return err
	}
	f, err := gguf.Open(mf.path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return fail(err)
	}
	emb, err := server.NewEncoderEmbedder(f, mf.threads)
	if err != nil {
		return fail(err)
	}
	defer emb.Close()
	c := emb.Config()
	srv.SetReady(&server.Backend{Tok: tok, Vocab: c.Vocab, Embed: emb, Encoder: true, LoadMode: "mmap",
		LoadReason: "an encoder is read from the mapped file",
		Meta:       map[string]any{"n_embd": c.Embd, "n_ctx_train": c.Context, "pooling": c.Pooling.String()}})
	logf("ready: %s encoder, embeddings only (%d wide, %s pooling, inputs of up to %d tokens, %d threads); generation endpoints answer 400 model_not_generative",
		c.Arch, c.Embd, c.Pooling, c.Context, mf.threads)
	if err := <-served; err != nil {
		return err
	}
	logf("stopped")
	return nil
}

// clusterInfo is the cluster view's static part: the plan's ranks, or this
// node alone.
func clusterInfo(l *loaded, parallel int) *server.ClusterInfo {
	if l.cl == nil {
		c, err := model.ReadConfig(l.file)
		if err != nil {
			return nil
		}
		est := estimateMemory(l.file, l.ctx)
		return &server.ClusterInfo{Split: "none", SplitBy: "one node", Ranks: []server.RankInfo{{
			Rank: 0, Addr: "local", Layers: [2]int{0, c.Layers}, Heads: [2]int{0, c.Heads}, KVHeads: [2]int{0, c.KVHeads},
			TPSize: 1, Weights: est.weights, KV: est.kv * int64(parallel), Scratch: est.scratch,
		}}}
	}
	p := l.cl.Plan()
	info := &server.ClusterInfo{Split: fmt.Sprintf("tensor=%d,layer=%d", p.Mode.TP, p.Mode.PP), SplitBy: p.SplitBy}
	for _, r := range p.Ranks {
		sh := r.Shard
		addr := r.Name
		if r.Rank == 0 {
			addr = "local"
		}
		info.Ranks = append(info.Ranks, server.RankInfo{
			Rank: r.Rank, Addr: addr, Stage: r.Stage, Layers: [2]int{sh.First, sh.Last}, Heads: [2]int{sh.HeadLo, sh.HeadHi},
			KVHeads: [2]int{sh.KVLo, sh.KVHi}, TPRank: sh.TPRank, TPSize: sh.TPSize,
			Weights: r.Weights, KV: r.KV, Scratch: r.Scratch, MemAvailable: r.Mem,
		})
	}
	return info
}

// interruptContext ends with the first SIGINT or SIGTERM, which starts a
// graceful shutdown; a second one ends the process at once. Each of
// onSignal is called with the first signal before the context ends.
func interruptContext(logf func(string, ...any), onSignal ...func(os.Signal)) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			logf("%v: shutting down (send it again to quit at once)", s)
			for _, f := range onSignal {
				f(s)
			}
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sig:
			logf("%v again: quitting now", s)
			os.Exit(130)
		case <-done:
		}
	}()
	var once sync.Once // stop may be called on an error path and deferred too
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
			cancel()
		})
	}
}

// modelMeta are the model's facts that llama-server lists in /models'
// meta: its training context, embedding width, parameters and bytes.
func modelMeta(l *loaded) map[string]any {
	f := l.file
	var params int64
	for _, t := range f.Tensors {
		n := int64(1)
		for _, d := range t.Shape {
			n *= d
		}
		params += n
	}
	m := map[string]any{"n_params": params, "size": f.Size()}
	if v, ok := f.Int(f.Arch() + ".context_length"); ok {
		m["n_ctx_train"] = v
	}
	if v, ok := f.Int(f.Arch() + ".embedding_length"); ok {
		m["n_embd"] = v
	}
	return m
}
