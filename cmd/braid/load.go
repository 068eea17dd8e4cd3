package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"

	"braid/internal/cluster"
	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/hub"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/sysinfo"
)

// modelFlags are the flags of every command that loads a model.
type modelFlags struct {
	path    string
	threads int
	ctx     int
	kvF32   bool
	batch   int
	// serving keeps the Go runtime on every CPU even when the rank
	// computes on fewer (the HTTP side needs its own); see limitProcs.
	serving bool
	// pull lets -m ORG/NAME:QUANT download a model the hub cache lacks;
	// hub is the model -m named, once resolved (pull.go).
	pull bool
	hub  *hub.Model
	// mtp loads the model's MTP head too (--spec mtp).
	mtp bool
	// loadMode is --load-mode: auto, mmap, read or mlock.
	loadMode string
	// cpus is --cpus; threadsSet says -t was given (else --cpus sets it).
	cpus       string
	threadsSet bool
}

// limitProcs sets GOMAXPROCS to a rank's compute threads when they are
// fewer than the CPUs (and GOMAXPROCS is not set in the environment), and
// returns the undo. Ranks sharing a machine (a test cluster, or a node
// given fewer threads than cores) otherwise keep extra runtime threads
// awake for network reads, which take cores from the other ranks' compute
// at every all-reduce: a 2-rank tensor split with one thread per rank on 2
// cores decoded 17.3-17.8 tok/s with the default and 20.5-21.1 with
// GOMAXPROCS=1 on both ranks (3 interleaved rounds).
func limitProcs(threads int) (undo func()) {
	if os.Getenv("GOMAXPROCS") != "" || threads < 1 || threads >= runtime.NumCPU() {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(threads)
	return func() { runtime.GOMAXPROCS(prev) }
}

func (f *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "m", "", "model file (GGUF; any part of a split model), or ORG/NAME[:QUANT] from the Hugging Face hub cache")
	fs.BoolVar(&f.pull, "pull", false, "with -m ORG/NAME:QUANT: download the model when the hub cache lacks it (never done silently)")
	f.threads = defaultThreads()
	fs.Var(threadsFlag{&f.threads, &f.threadsSet}, "t", "`N` compute threads")
	fs.StringVar(&f.cpus, "cpus", "", cpusUsage)
	fs.IntVar(&f.ctx, "c", 0, "context length in tokens (default: the model's, at most 4096)")
	fs.BoolVar(&f.kvF32, "kv-f32", false, "keep the KV cache in float32 instead of float16")
	fs.IntVar(&f.batch, "b", 512, "most tokens evaluated in one step (prefill chunk)")
	fs.StringVar(&f.loadMode, "load-mode", "auto", plan.LoadModes)
}

// loaded is a model ready to run, with what it owns: on this node (model,
// pool and cache set) or on a cluster (cl set; model nil). backend runs it
// either way.
type loaded struct {
	file    *gguf.Model
	model   *model.Model
	pool    *kernels.Pool
	cache   *kvcache.Cache
	ctx     int
	backend engine.Backend
	cl      *cluster.Cluster
	undo    func() // limitProcs's, for a coordinator
	// load is how this node holds its weights, and why.
	load plan.LoadChoice
}

func (l *loaded) Close() {
	if l.cl != nil {
		l.cl.Close()
		if l.undo != nil {
			l.undo()
		}
		return
	}
	l.pool.Close()
	l.file.Close()
}

// loadModel opens and binds a model, refusing before anything large is
// allocated when it does not fit this node's memory.
func loadModel(f *modelFlags, seqs int, stderr io.Writer) (*loaded, error) {
	if f.path == "" {
		return nil, usagef("-m MODEL is required")
	}
	if err := f.place(stderr); err != nil {
		return nil, err
	}
	if f.threads <= 0 {
		return nil, usagef("-t %d: need at least one thread", f.threads)
	}
	if err := f.checkSizes(); err != nil {
		return nil, err
	}
	mode, auto, err := f.parseLoadMode()
	if err != nil {
		return nil, err
	}
	if err := f.resolve(stderr); err != nil {
		return nil, err
	}
	file, err := gguf.Open(f.path)
	if err != nil {
		return nil, err
	}
	if err := refuseShard(file); err != nil {
		file.Close()
		return nil, err
	}
	if model.IsEncoder(file.Arch()) {
		file.Close()
		return nil, fmt.Errorf("%s: %w (%s): run it with braid serve, whose /v1/embeddings computes them", f.path, model.ErrEncoder, file.Arch())
	}
	est := estimateMemory(file, f.ctx)
	choice, err := chooseLoad(file, est, mode, auto, seqs)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("%s %w", f.path, err)
	}
	warnContext(file, est.ctx, f.batch, stderr)
	if err := file.SetMode(gguf.LoadOptions{Mode: choice.Mode, Progress: loadProgress(file.Files[0].Path, stderr)}); err != nil {
		file.Close()
		return nil, err
	}
	fmt.Fprintf(stderr, "braid: weights: %s\n", choice)
	if choice.Mode == gguf.LoadMmap {
		prefault(file, stderr) // read and mlock have every page in memory already
	}
	pool := kernels.NewPool(f.threads)
	m, err := model.New(file, pool, model.Options{MaxBatch: f.batch, MTP: f.mtp})
	if err != nil {
		pool.Close()
		file.Close()
		return nil, err
	}
	fmt.Fprintf(stderr, "braid: layout: %s\n", m.Repacked())
	ctx := est.ctx
	cache, err := m.NewCache(model.CacheSize{Positions: ctx * max(seqs, 1), Ctx: ctx, F32: f.kvF32})
	if err != nil {
		pool.Close()
		file.Close()
		return nil, err
	}
	return &loaded{file: file, model: m, pool: pool, cache: cache, ctx: ctx, backend: engine.NewLocal(m, cache), load: choice}, nil
}

// parseLoadMode reads --load-mode; unset (flags built in code, like
// demo's) is auto.
func (f *modelFlags) parseLoadMode() (gguf.LoadMode, bool, error) {
	if f.loadMode == "" {
		return gguf.LoadMmap, true, nil
	}
	mode, auto, err := plan.ParseLoadMode(f.loadMode)
	if err != nil {
		return 0, false, usageError{err}
	}
	return mode, auto, nil
}

// chooseLoad resolves --load-mode for a model loaded whole on this node
// with seqs sequences of the estimate's context, and refuses it when the
// mode's memory need does not fit what is usable.
func chooseLoad(file *gguf.Model, est memEstimate, mode gguf.LoadMode, auto bool, seqs int) (plan.LoadChoice, error) {
	kv := est.kv * int64(max(seqs, 1))
	facts := plan.LoadFacts{File: file.Bytes(), Weights: est.weights, Other: kv + est.scratch, InMemoryFS: est.resident > 0, Repack: est.repack}
	if mem, err := sysinfo.ReadMemory(); err == nil && mem.Usable() <= math.MaxInt64 {
		facts.Usable = int64(mem.Usable())
	}
	choice := plan.ChooseLoad(mode, auto, facts)
	need := facts.Need(choice.Mode)
	if facts.Usable <= 0 || need <= facts.Usable {
		return choice, nil
	}
	weights := est.weightsText()
	if choice.Mode == gguf.LoadRead {
		weights = sysinfo.FormatBytes(uint64(facts.File)) + ", a copy of the file (--load-mode read)"
		if facts.InMemoryFS {
			weights += "; the file is on tmpfs, where --load-mode mmap takes no more memory"
		}
	}
	return choice, fmt.Errorf("does not fit this node: needs %s (weights %s, KV cache %s at context %d, scratch %s) but %s is usable",
		sysinfo.FormatBytes(uint64(need)), weights, sysinfo.FormatBytes(uint64(kv)),
		est.ctx, sysinfo.FormatBytes(uint64(est.scratch)), sysinfo.FormatBytes(uint64(facts.Usable)))
}

// place pins the process as --cpus or the core classes say (placeThreads)
// and prints the line that says so.
func (f *modelFlags) place(stderr io.Writer) error {
	line, _, err := placeThreads(f.cpus, &f.threads, f.threadsSet)
	if line != "" {
		fmt.Fprintln(stderr, line)
	}
	return err
}
