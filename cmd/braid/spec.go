package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/spec"
)

// specFlags are speculative decoding's flags (run and bench).
type specFlags struct {
	kind  string
	draft string
	nmax  string // one number (run) or a comma list (bench)
	nmin  int
	synth string
	exact bool

	// parsed by check
	nmaxs []int
	rates []float64
}

// Default draft lengths per drafter: n-gram drafts and a draft model's are
// cheap to make; an MTP head's acceptance falls off after a few (llama.cpp
// defaults to 3 for it).
var specDefaultNMax = map[string]int{"ngram": 8, "draft": 8, "mtp": 3}

func (f *specFlags) register(fs *flag.FlagSet, list bool) {
	fs.StringVar(&f.kind, "spec", "none", "speculative decoding: ngram (lookup in the prompt and output), draft (a smaller model with the same vocabulary, --model-draft), mtp (the model's own MTP head), none")
	fs.StringVar(&f.draft, "model-draft", "", "with --spec draft: the draft model `file` (GGUF)")
	fs.StringVar(&f.draft, "md", "", "with --spec draft: the draft model `file` (GGUF)")
	usage := "most drafts per step (default: ngram 8, draft 8, mtp 3)"
	if list {
		usage = "most drafts per step, comma-separated, one row each; 0 is a row without speculation (default: ngram 8, draft 8, mtp 3)"
	}
	fs.StringVar(&f.nmax, "spec-n-max", "", usage)
	nminUsage := "fewest drafts per step; below --spec-n-max the length adapts to the acceptance and the cost of a step, equal to it every step drafts that many"
	if list {
		nminUsage += " (above a row's --spec-n-max: that row drafts its n-max every step, e.g. --spec-n-min 32 for fixed lengths)"
	}
	fs.IntVar(&f.nmin, "spec-n-min", 0, nminUsage)
	fs.BoolVar(&f.exact, "spec-exact", true, "verify with the one-token kernels (on every rank), so that greedy output is token for token the output without --spec; false: the multi-token tiles, cheaper per draft, and a near tie may go the other way (as in llama.cpp)")
	fs.StringVar(&f.synth, "spec-synth-rates", "", "BENCHMARK ONLY: accept draft i with probability P_i (`P1,P2,...`: the share of steps whose draft i is kept) whatever the model says; the drafter runs for real, the output text is NOT the model's")
}

// active says whether speculation was asked for.
func (f *specFlags) active() bool { return f.kind != "none" }

// check validates the flags before anything is loaded.
func (f *specFlags) check(list bool) error {
	switch f.kind {
	case "none":
		if f.draft != "" || f.nmax != "" || f.synth != "" {
			return usagef("--model-draft, --spec-n-max and --spec-synth-rates need --spec ngram|draft|mtp")
		}
		return nil
	case "ngram", "mtp":
		if f.draft != "" {
			return usagef("--model-draft is for --spec draft")
		}
	case "draft":
		if f.draft == "" {
			return usagef("--spec draft needs --model-draft FILE (a smaller model with the target's vocabulary)")
		}
	default:
		return usagef("--spec %q: want ngram, draft, mtp or none", f.kind)
	}
	f.nmaxs = []int{specDefaultNMax[f.kind]}
	if f.nmax != "" {
		v, err := parseInts("-spec-n-max", f.nmax, 0)
		if err != nil {
			return err
		}
		if len(v) > 1 && !list {
			return usagef("--spec-n-max: one number here")
		}
		f.nmaxs = v
	}
	for _, n := range f.nmaxs {
		if n > engine.MaxDrafts || (n < 1 && !list) {
			return usagef("--spec-n-max %d: must be in [1, %d]", n, engine.MaxDrafts)
		}
		if n > 0 && f.nmin > n && !list {
			return usagef("--spec-n-min %d: must not exceed --spec-n-max %d", f.nmin, n)
		}
	}
	if f.nmin < 0 {
		return usagef("--spec-n-min %d: must not be negative", f.nmin)
	}
	if f.synth != "" {
		for i, s := range strings.Split(f.synth, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || !(v >= 0 && v <= 1) {
				return usagef("--spec-synth-rates: item %d %q is not a probability in [0, 1]", i+1, s)
			}
			f.rates = append(f.rates, v)
		}
	}
	return nil
}

// needsMTP says whether the target must be loaded with its MTP head.
func (f *specFlags) needsMTP() bool { return f.kind == "mtp" }

// checkTarget refuses, before the weights are loaded, a target the
// drafter cannot run on.
func (f *specFlags) checkTarget(path string) error {
	if !f.active() {
		return nil
	}
	file, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	c, err := model.ReadConfig(file)
	if err != nil {
		return err
	}
	if f.kind == "mtp" && c.NextN <= 0 {
		return fmt.Errorf("--spec mtp: %s (%s) has no MTP head (no nextn_predict_layers); use --spec ngram or --spec draft", path, c.Arch)
	}
	return nil
}

// warnSynth says loudly that the output is not the model's.
func (f *specFlags) warnSynth(w io.Writer) {
	if f.rates != nil {
		fmt.Fprintf(w, "braid: *** BENCHMARK ONLY: --spec-synth-rates %s accepts drafts at these rates whatever the model says; the output text is NOT the model's ***\n", f.synth)
	}
}

// drafter builds the drafter for a loaded target (its backend, and on
// this node its model): a draft model is loaded here, on this node, with
// a cache for seqs sequences of the target's context. close releases it.
func (f *specFlags) drafter(l *loaded, mf *modelFlags, seqs int, stderr io.Writer) (engine.Drafter, func(), error) {
	nop := func() {}
	switch f.kind {
	case "ngram":
		return &spec.NGram{}, nop, nil
	case "mtp":
		// On a cluster the head runs whole on this node (rank 0), fed by
		// the hidden states the trunk's last stage returns.
		head := l.model
		if l.cl != nil {
			head = l.cl.MTPHead()
		}
		if head == nil {
			return nil, nil, fmt.Errorf("--spec mtp: the MTP head was not loaded")
		}
		mc, err := head.NewMTPCache(model.CacheSize{Positions: l.ctx * max(seqs, 1), Ctx: l.ctx, F32: mf.kvF32})
		if err != nil {
			return nil, nil, err
		}
		d, err := spec.NewMTP(head, mc, mf.batch)
		return d, nop, err
	case "draft":
		df, err := gguf.Open(f.draft)
		if err != nil {
			return nil, nil, err
		}
		if err := spec.CheckVocab(l.file, df); err != nil {
			df.Close()
			return nil, nil, err
		}
		// The draft model is held as the target is: a draft paged out
		// under reclaim stalls every step it drafts for.
		if err := df.SetMode(gguf.LoadOptions{Mode: l.load.Mode}); err != nil {
			df.Close()
			return nil, nil, fmt.Errorf("draft model %s: %w", f.draft, err)
		}
		pool, own := l.pool, false
		if pool == nil {
			pool, own = kernels.NewPool(mf.threads), true
		}
		release := func() {
			if own {
				pool.Close()
			}
			df.Close()
		}
		dm, err := model.New(df, pool, model.Options{MaxBatch: mf.batch})
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("draft model %s: %w", f.draft, err)
		}
		cache, err := dm.NewCache(model.CacheSize{Positions: l.ctx * max(seqs, 1), Ctx: l.ctx, F32: mf.kvF32})
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("draft model %s: %w", f.draft, err)
		}
		d, err := spec.NewDraftModel(dm, cache, l.backend.Vocab())
		if err != nil {
			release()
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "braid: draft model %s (%s, %d layers), weights %s as the target's\n", f.draft, dm.Cfg.Arch, dm.Cfg.Layers, l.load.Mode)
		return d, release, nil
	}
	return nil, nop, nil
}

// spec is the configuration for one draft length on l: the verification
// steps compute every token as a one-token step does (see
// engine.Spec.Exact), on this node or on every rank of a cluster (the
// Step frames carry the setting to the workers), so greedy output is
// token for token the plain one, unless --spec-exact=false. Exact
// verification runs the kernels' multi-token forms that round as the
// one-token ones (kernels.Pool.SetExactColumns): for the K-quants and
// Q8_0-style formats on AVX-512 about the tiles' cost (1.26x at 5 tokens
// on the 1B Q4_K_M, BenchmarkVerifyStep), for the others the row dot per
// token; the adaptive length measures it and drafts less when it is dear.
func (f *specFlags) spec(l *loaded, d engine.Drafter, nmax int, st *engine.SpecStats) engine.Spec {
	s := engine.Spec{Drafter: d, NMax: nmax, NMin: min(f.nmin, nmax), SynthRates: f.rates, SynthSeed: 1, Stats: st}
	switch {
	case !f.exact:
	case l.cl != nil:
		s.Exact = l.cl.SetExactColumns
	case l.pool != nil:
		s.Exact = l.pool.SetExactColumns
	}
	return s
}

// summary is the stats line a run prints.
func (f *specFlags) summary(st *engine.SpecStats) string {
	s := fmt.Sprintf("speculative decoding (%s): %s", f.kind, st)
	if f.rates != nil {
		s += " [SYNTHETIC ACCEPTANCE: benchmark only, the text is not the model's]"
	}
	return s
}

// prepare checks the target before it is loaded (-m resolved) and asks
// for its MTP head when the drafter is the head.
func (f *specFlags) prepare(mf *modelFlags, cf *clusterFlags, stderr io.Writer) error {
	if !f.active() {
		return nil
	}
	if err := mf.resolve(stderr); err != nil {
		return err
	}
	mf.mtp = f.needsMTP()
	if mf.path == "" {
		return nil // from a cluster file: checked once loaded
	}
	return f.checkTarget(mf.path)
}

// prepareServe is prepare for the server.
func (f *specFlags) prepareServe(mf *modelFlags, cf *clusterFlags, stderr io.Writer) error {
	return f.prepare(mf, cf, stderr)
}

// generator is the loaded model's generator: plain, or speculative with
// the drafter the flags ask for (and its stats); close releases the
// drafter.
func (f *specFlags) generator(l *loaded, mf *modelFlags, stderr io.Writer) (*engine.Generator, *engine.SpecStats, func(), error) {
	if !f.active() {
		return engine.NewGenerator(l.backend), nil, func() {}, nil
	}
	d, release, err := f.drafter(l, mf, 1, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	st := &engine.SpecStats{}
	sp := f.spec(l, d, f.nmaxs[0], st)
	g, err := engine.NewSpecGenerator(l.backend, sp)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	f.warnSynth(stderr)
	return g, st, release, nil
}

// schedSpec is the server's speculative decoding configuration (nil
// without --spec): the drafter sized for parallel sequences; release frees
// it after the scheduler stops.
func (f *specFlags) schedSpec(l *loaded, mf *modelFlags, parallel int, stderr io.Writer) (*engine.Spec, func(), error) {
	if !f.active() {
		return nil, func() {}, nil
	}
	d, release, err := f.drafter(l, mf, parallel, stderr)
	if err != nil {
		return nil, nil, err
	}
	s := f.spec(l, d, f.nmaxs[0], nil)
	f.warnSynth(stderr)
	return &s, release, nil
}
