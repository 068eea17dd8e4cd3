package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/sample"
	"braid/internal/server"
	"braid/internal/sysinfo"
	"braid/internal/tokenizer"
)

func init() {
	register("serve", "OpenAI-compatible HTTP server with continuous batching", runServe)
}

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "-m MODEL [--listen 127.0.0.1:8080 | --host H[,H2] --port P] [--parallel 8] [-c CTX] [--api-key-file F | --api-key K] [--ssl-key-file F --ssl-cert-file F] [--alias NAME[,NAME2]] [--tags T] [--temp T --seed S -n N ...] [--context-shift [--keep N]] [--no-metrics] [--no-slots] [--no-ui] [--responses-store N] [--responses-ttl D] [--chat-template T | --chat-template-file F] [--workers ... | --cluster FILE] [--spec ngram|draft|mtp [--model-draft F] [--spec-n-max N] [--spec-n-min N]]", stderr)
	mf := modelFlags{serving: true}
	mf.register(fs)
	var cf clusterFlags
	cf.register(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "address to listen on (port 0 picks a free one; the address is logged)")
	hp := hostPortFlags(fs)
	parallel := fs.Int("parallel", 8, "sequences decoded together; each gets the full context")
	queue := fs.Int("queue", 0, "requests waiting beyond --parallel before 429 (default 16 x parallel)")
	keyFile := fs.String("api-key-file", "", "file with the accepted API keys, one per line; without it no key is needed")
	alias := fs.String("alias", "", "model `names` served, comma-separated: the first is the one /models lists, the others are accepted too (default: the file name without .gguf)")
	fs.Var(alsoFlag{fs, "alias"}, "a", "the same as --alias")
	grace := fs.Duration("grace", 30*time.Second, "on SIGTERM, how long running requests may finish before they are cancelled")
	maxBody := fs.Int64("max-body", 8<<20, "largest request body in bytes")
	stepTokens := fs.Int("step-tokens", 512, "tokens evaluated per step: one per decoding sequence, prompt chunks share the rest")
	noPrefix := fs.Bool("no-prefix-cache", false, "do not keep finished sequences for prefix reuse")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the whole run to this file at exit (go tool pprof)")
	logFormat := fs.String("log-format", "text", "text, or json: one JSON object per line (the access log's and the rest)")
	sslKey := fs.String("ssl-key-file", "", "serve HTTPS: the PEM private key `file` (with --ssl-cert-file)")
	sslCert := fs.String("ssl-cert-file", "", "serve HTTPS: the PEM certificate `file`, chain included (with --ssl-key-file)")
	respStore := fs.Int("responses-store", server.DefaultResponsesStore, "how many responses made with store true /v1/responses keeps in memory for previous_response_id and GET (the oldest forgotten first); 0 keeps none")
	respTTL := fs.Duration("responses-ttl", server.DefaultResponsesTTL, "how long /v1/responses keeps each stored response")
	noEmbed := fs.Bool("no-embeddings", false, "refuse /v1/embeddings (otherwise a second instance of the model, sharing its weights, computes them on demand)")
	var sf specFlags
	sf.register(fs, false)
	var lf llamaFlags
	lf.register(fs)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if err := lf.applyEnv(fs, os.Environ()); err != nil {
		return err
	}
	for k, v := range lf.mapped {
		if err := fs.Set(k, v); err != nil {
			return usagef("--%s %s: %v", k, v, err)
		}
	}
	if err := sf.check(false); err != nil {
		return err
	}
	if lf.ctxShift && sf.active() {
		return usagef("--context-shift with --spec %s is not supported: a shift would have to move the drafter's states too; give one of them", sf.kind)
	}
	defaults, err := lf.defaults()
	if err != nil {
		return err
	}
	chatTmpl, err := lf.template()
	if err != nil {
		return err
	}
	slog, err := newServeLog(stderr, *logFormat)
	if err != nil {
		return err
	}
	for _, n := range lf.notes {
		slog.logf("note: %s", n)
	}
	if !lf.jinja {
		slog.logf("note: --no-jinja: braid renders chat with the model's Jinja template all the same (llama-server's non-Jinja path writes the same built-in formats, without tools)")
	}
	addrs, err := listenAddrs(fs, hp, *listen)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *parallel < 1 {
		return usagef("--parallel %d: need at least 1", *parallel)
	}
	if *respStore < 0 {
		return usagef("--responses-store %d: give a number of responses, or 0 to keep none", *respStore)
	}
	if *respTTL <= 0 {
		return usagef("--responses-ttl %v: give a positive duration (e.g. 30m)", *respTTL)
	}
	storeN := *respStore
	if storeN == 0 {
		storeN = -1 // Config's "none"
	}
	if mf.path == "" {
		return usagef("-m MODEL is required")
	}
	var keys []string
	if *keyFile != "" {
		data, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("reading --api-key-file: %w", err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				keys = append(keys, l)
			}
		}
		if len(keys) == 0 {
			return fmt.Errorf("--api-key-file %s holds no key", *keyFile)
		}
	}
	keys = append(keys, splitList(lf.apiKey)...)
	spec := mf.path
	if err := mf.resolve(stderr); err != nil {
		return err
	}
	names := splitList(*alias)
	fileName := strings.TrimSuffix(filepath.Base(mf.path), ".gguf")
	if len(names) == 0 && mf.hub != nil {
		names = []string{spec} // as asked for: ORG/NAME:QUANT
	}
	if len(names) == 0 {
		names = []string{fileName}
	}
	name := names[0]
	aliases := names[1:]
	if !slices.Contains(names, fileName) {
		aliases = append(aliases, fileName)
	}
	logf := slog.logf
	// A model that cannot load fails here, before "listening".
	encoder, err := precheck(mf.path)
	if err != nil {
		return err
	}
	if encoder && (cf.active() || sf.active()) {
		return usagef("%s is an encoder (embeddings only): it runs on one node, without --spec or cluster flags", mf.path)
	}
	if encoder && *noEmbed {
		return usagef("%s is an encoder: it serves only embeddings, which --no-embeddings turns off", mf.path)
	}
	if err := sf.prepareServe(&mf, &cf, stderr); err != nil {
		return err
	}
	srv := server.New(server.Config{Model: name, Aliases: aliases, APIKeys: keys, MaxBodyBytes: *maxBody, Logf: logf,
		ModelPath: mf.path, AccessLog: slog.access, Tags: splitList(lf.tags), Defaults: defaults,
		NoMetrics: !lf.metrics, NoSlots: !lf.slots, NoWeb: !lf.ui, ResponsesStore: storeN, ResponsesTTL: *respTTL})

	tlsCfg, err := serveTLS(*sslKey, *sslCert)
	if err != nil {
		return err
	}
	ln, err := listenAll(addrs)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	where := listenerAddrs(ln, scheme)
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	ctx, stop := interruptContext(logf)
	defer stop()
	// Listen first, so /health can say "loading" while the weights map in.
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, *grace) }()
	logf("listening on %s (model %q, loading)", strings.Join(where, " and "), name)

	if encoder {
		return serveEncoder(srv, served, &mf, logf, stop)
	}
	l, tok, tmpl, err := loadForServe(&mf, &cf, *parallel, logf, stderr)
	if err != nil {
		logf("the model failed to load: %v", err)
		srv.SetUnavailable("model failed to load: " + err.Error())
		stop()
		<-served
		return err
	}
	defer l.Close()
	if chatTmpl != nil {
		tmpl = chatTmpl
		logf("chat template: the one given (%s), not the model's", map[bool]string{true: "--chat-template-file", false: "--chat-template"}[lf.chatTemplateFile != ""])
	}
	prefix := 0
	if *noPrefix {
		prefix = -1
	}
	specCfg, releaseSpec, err := sf.schedSpec(l, &mf, *parallel, stderr)
	if err != nil {
		stop()
		<-served
		return err
	}
	defer releaseSpec()
	// One step before the server says it is ready (/ready): every rank has
	// loaded and run, so the first request does not find a rank that
	// cannot.
	if err := warmUp(l, tok); err != nil {
		logf("the warm-up step failed: %v", err)
		srv.SetUnavailable("warm-up step failed: " + err.Error())
		stop()
		<-served
		return err
	}
	sched, err := engine.NewScheduler(l.backend, engine.SchedulerConfig{
		Parallel: *parallel, Context: l.ctx, StepTokens: *stepTokens, MaxQueue: *queue, PrefixCache: prefix, IsEOG: tok.IsEOG,
		Spec: specCfg, ContextShift: lf.ctxShift,
	})
	if err != nil {
		stop()
		<-served
		return err
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	sb := &server.Backend{Sched: sched, Tok: tok, Template: tmpl, Vocab: l.backend.Vocab(), LoadMode: l.load.Mode.String(), LoadReason: l.load.Reason,
		Meta: modelMeta(l)}
	if l.cl != nil {
		sb.Ranks = l.cl
	}
	switch {
	case *noEmbed:
	case l.cl != nil:
		// The split's own backend, between the scheduler's steps: the
		// hidden states come from the last stage with its result.
		emb, err := server.NewSchedEmbedder(sched, l.backend, l.cl.Config().Embd, l.ctx-1, mf.batch)
		if err != nil {
			logf("note: /v1/embeddings off: %v", err)
		} else {
			sb.Embed = emb
		}
	default:
		emb := server.NewLocalEmbedder(l.file, mf.threads, l.ctx, mf.batch, mf.kvF32)
		defer emb.Close()
		sb.Embed = emb
	}
	sb.Cluster = clusterInfo(l, *parallel)
	srv.SetReady(sb)
	kv := l.backend.KVConfig()
	shift := "off"
	if lf.ctxShift {
		shift = fmt.Sprintf("on (keeps %d prompt tokens)", lf.keep)
	}
	logf("ready: %d slots x %d tokens of context, %d threads, KV cache %d blocks of %d positions, context shift %s", *parallel, l.ctx, mf.threads, kv.Blocks, kv.BlockSize, shift)

	err = <-served
	// The HTTP side has drained (or been cancelled); the scheduler goes last
	// so that cancelled sequences are dropped by it, not abandoned.
	stopSched()
	<-schedDone
	if err != nil {
		return err
	}
	logf("stopped")
	return nil
}

// warmUp runs one greedy token from the beginning-of-sequence token on the
// loaded model, and drops it.
func warmUp(l *loaded, tok *tokenizer.Tokenizer) error {
	p := sample.DefaultParams()
	p.Temperature = 0
	smp, err := sample.New(p, l.backend.Vocab())
	if err != nil {
		return err
	}
	first := max(tok.BOS(), 0)
	_, err = engine.NewGenerator(l.backend).Generate(context.Background(), engine.Request{Prompt: []int32{first}, MaxTokens: 1, Sampler: smp})
	return err
}

// loadForServe checks that parallel full contexts fit in memory, loads the
// model with a cache for all of them, and finds the tokenizer and template.
func loadForServe(mf *modelFlags, cf *clusterFlags, parallel int, logf func(string, ...any), stderr io.Writer) (*loaded, *tokenizer.Tokenizer, *chat.Template, error) {
	// On a cluster the plan checks every rank's memory; here only this
	// node's.
	if f, err := gguf.Open(mf.path); err == nil && !cf.active() {
		one := estimateMemory(f, mf.ctx)
		all := one
		all.kv *= int64(parallel)
		f.Close()
		if mem, err := sysinfo.ReadMemory(); err == nil && mem.Usable() > 0 && uint64(all.total()) > mem.Usable() {
			return nil, nil, nil, fmt.Errorf("%s with --parallel %d does not fit this node: needs %s (weights %s, KV cache %s for %d x %d positions) but %s is usable; lower --parallel or -c",
				mf.path, parallel, sysinfo.FormatBytes(uint64(all.total())), all.weightsText(),
				sysinfo.FormatBytes(uint64(all.kv)), parallel, one.ctx, sysinfo.FormatBytes(mem.Usable()))
		}
	}
	l, err := loadBackend(mf, cf, parallel, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	tok, err := tokenizer.FromGGUF(l.file)
	if err != nil {
		l.Close()
		return nil, nil, nil, err
	}
	var tmpl *chat.Template
	if src, ok := l.file.String("tokenizer.chat_template"); ok && src != "" {
		if tmpl, err = chat.Parse("tokenizer.chat_template", src); err != nil {
			l.Close()
			return nil, nil, nil, fmt.Errorf("the model's chat template: %w", err)
		}
	} else {
		logf("the model has no chat template; chat requests use ChatML")
		tmpl = chat.ChatML()
	}
	return l, tok, tmpl, nil
}

// serveTLS is --ssl-key-file and --ssl-cert-file: both or neither, the
// pair checked before listening (a key of another certificate, a file that
// is not PEM) so that a bad pair fails at start, naming the files.
func serveTLS(keyFile, certFile string) (*tls.Config, error) {
	if keyFile == "" && certFile == "" {
		return nil, nil
	}
	if keyFile == "" || certFile == "" {
		return nil, usagef("--ssl-key-file and --ssl-cert-file go together (got only %s)", map[bool]string{true: "--ssl-key-file", false: "--ssl-cert-file"}[keyFile != ""])
	}
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--ssl-cert-file %s with --ssl-key-file %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{kp}, NextProtos: []string{"http/1.1"}}, nil
}
