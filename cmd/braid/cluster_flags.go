package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"braid/internal/cluster"
	"braid/internal/dist"
	"braid/internal/engine"
	"braid/internal/gguf"
)

// clusterFlags are the flags of every command that can run a model across
// machines. Without --workers or --cluster the model runs on this node.
type clusterFlags struct {
	workers     string
	split       string
	tensorSplit string
	file        string
	secretFile  string
	timeout     time.Duration
	spin        time.Duration
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.workers, "workers", "", "run across braid workers: HOST:PORT,... in rank order after this node (rank 0)")
	fs.StringVar(&f.split, "split", "", "with --workers: tensor | layer | tensor=T,layer=L (default layer)")
	fs.StringVar(&f.tensorSplit, "tensor-split", "", "with --workers: weights per rank in rank order, this node first, e.g. 2,1,1")
	fs.StringVar(&f.file, "cluster", "", "cluster file (TOML): ranks, addresses per pair, split, secret (instead of --workers)")
	fs.StringVar(&f.secretFile, "secret-file", "", "file holding the cluster's shared secret (default: $BRAID_SECRET; none = loopback only)")
	fs.DurationVar(&f.timeout, "net-timeout", dist.DefaultTimeout, "with --workers: bound on every network wait")
	fs.DurationVar(&f.spin, "net-spin", dist.DefaultSpin, "with --workers: how long every rank polls for a peer's message before it sleeps (0 = never; polling keeps a waiting CPU awake, which all-reduces need)")
}

// active says whether the model runs on a cluster.
func (f *clusterFlags) active() bool { return f.workers != "" || f.file != "" }

// config turns the flags into a cluster configuration for the model at
// path (which a cluster file may give instead).
func (f *clusterFlags) config(path string) (cluster.Config, error) {
	var cfg cluster.Config
	if f.workers != "" && f.file != "" {
		return cfg, usagef("give --workers or --cluster, not both")
	}
	if !f.active() {
		if f.split != "" || f.tensorSplit != "" {
			return cfg, usagef("--split and --tensor-split need --workers or --cluster")
		}
		return cfg, nil
	}
	split, tsplit, secretFile := f.split, f.tensorSplit, f.secretFile
	if f.file != "" {
		src, err := os.ReadFile(f.file)
		if err != nil {
			return cfg, err
		}
		cf, err := cluster.ParseFile(string(src))
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", f.file, err)
		}
		cfg.Nodes, cfg.Links = cf.Nodes(), cf.Links
		if split == "" {
			split = cf.Split
		}
		if tsplit == "" {
			cfg.TensorSplit = cf.TensorSplit
		}
		if secretFile == "" {
			secretFile = cf.SecretFile
		}
		if path == "" {
			path = cf.LocalModel()
		}
		if cf.Timeout != "" {
			d, err := time.ParseDuration(cf.Timeout)
			if err != nil || d <= 0 {
				return cfg, fmt.Errorf("%s: timeout %q is not a positive duration", f.file, cf.Timeout)
			}
			cfg.Timeout = d
		}
	} else {
		for i, w := range strings.Split(f.workers, ",") {
			w = strings.TrimSpace(w)
			if w == "" {
				return cfg, usagef("--workers: item %d is empty", i)
			}
			if err := checkHostPort(w); err != nil {
				return cfg, usagef("--workers: item %d %q: %v", i, w, err)
			}
			cfg.Nodes = append(cfg.Nodes, cluster.Node{Addr: w})
		}
	}
	if path == "" {
		return cfg, usagef("-m MODEL is required")
	}
	cfg.Model, cfg.Split = path, split
	if tsplit != "" {
		w, err := parseTensorSplit(tsplit)
		if err != nil {
			return cfg, err
		}
		cfg.TensorSplit = w
	}
	if cfg.TensorSplit != nil && len(cfg.TensorSplit) != len(cfg.Nodes)+1 {
		return cfg, usagef("--tensor-split has %d weights for %d ranks (this node and %d workers)", len(cfg.TensorSplit), len(cfg.Nodes)+1, len(cfg.Nodes))
	}
	secret, err := dist.LoadSecret(secretFile)
	if err != nil {
		return cfg, err
	}
	cfg.Secret = secret
	if cfg.Timeout == 0 {
		cfg.Timeout = f.timeout
	}
	cfg.Spin = spinSetting(f.spin)
	// Workers that are not up yet are retried this long.
	cfg.ConnectTimeout = min(cfg.Timeout, 10*time.Second)
	return cfg, nil
}

// loadBackend loads the model on this node (loadModel) or, with --workers
// or --cluster, across the cluster; either way l.backend runs it.
func loadBackend(mf *modelFlags, cf *clusterFlags, seqs int, stderr io.Writer) (*loaded, error) {
	if err := mf.resolve(stderr); err != nil {
		return nil, err
	}
	cfg, err := cf.config(mf.path)
	if err != nil {
		return nil, err
	}
	if !cf.active() {
		return loadModel(mf, seqs, stderr)
	}
	if cfg.LoadMode, cfg.LoadAuto, err = mf.parseLoadMode(); err != nil {
		return nil, err
	}
	if err := mf.place(stderr); err != nil {
		return nil, err
	}
	if mf.threads <= 0 {
		return nil, usagef("-t %d: need at least one thread", mf.threads)
	}
	if err := mf.checkSizes(); err != nil {
		return nil, err
	}
	if f, err := gguf.Open(cfg.Model); err == nil {
		err = refuseShard(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	cfg.Threads, cfg.MaxBatch, cfg.Ctx, cfg.Parallel, cfg.KVF32 = mf.threads, mf.batch, mf.ctx, max(seqs, 1), mf.kvF32
	cfg.Progress = stderr
	cfg.Hub = mf.hubModel()
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	undo := func() {}
	if !mf.serving {
		undo = limitProcs(mf.threads)
	}
	c, err := cluster.Open(context.Background(), cfg)
	if err != nil {
		undo()
		return nil, err
	}
	p := c.Plan()
	warnContext(c.File(), p.Ctx, mf.batch, stderr)
	fmt.Fprintf(stderr, "braid: %d ranks, split %s (%s)\n", len(p.Ranks), p.Mode, p.SplitBy)
	return &loaded{file: c.File(), ctx: p.Ctx, backend: c, cl: c, undo: undo, load: c.Load()}, nil
}

// generate runs one generation on the loaded model, on this node or the
// cluster (the Generator asks the backend for candidates or full rows).
func (l *loaded) generate(ctx context.Context, r engine.Request) (engine.Stats, error) {
	return engine.NewGenerator(l.backend).Generate(ctx, r)
}

// writeProfile prints a cluster profile: per rank the time per step in
// compute, all-reduce waits, pipeline waits and idle, and bytes sent; per
// layer where the ranks' all-reduces mark the layers; then the share of the
// step that is communication and the frames per step.
func writeProfile(w io.Writer, p *cluster.Profile) {
	if p.Steps == 0 {
		fmt.Fprintln(w, "no steps profiled")
		return
	}
	n := float64(p.Steps)
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d.Microseconds())/n) }
	step := p.StepTime
	fmt.Fprintf(w, "split %s: step %s µs (coordinator's wall time per step)\n", p.Mode, us(step))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\taddress\tcompute µs\tall-reduce µs\tpipeline µs\tidle µs\tall-reduces\tbytes sent\t")
	for _, r := range p.Ranks {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t\n", r.Rank, r.Addr, us(r.Compute), us(r.AllReduce), us(r.Stage), us(r.Idle),
			float64(r.AllReduces)/n, float64(r.BytesSent)/n)
	}
	tw.Flush()
	layered := false
	for _, r := range p.Ranks {
		layered = layered || len(r.LayerCompute) > 0
	}
	if layered {
		fmt.Fprintln(w, "per layer, µs per step (compute / all-reduce wait):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "layer\t")
		for _, r := range p.Ranks {
			fmt.Fprintf(tw, "rank %d\t", r.Rank)
		}
		fmt.Fprintln(tw)
		lo, hi := -1, 0
		for _, r := range p.Ranks {
			if len(r.LayerCompute) > 0 {
				if lo < 0 || r.First < lo {
					lo = r.First
				}
				hi = max(hi, r.First+len(r.LayerCompute))
			}
		}
		for l := lo; l < hi; l++ {
			fmt.Fprintf(tw, "%d\t", l)
			for _, r := range p.Ranks {
				i := l - r.First
				if i < 0 || i >= len(r.LayerCompute) {
					fmt.Fprint(tw, "-\t")
					continue
				}
				fmt.Fprintf(tw, "%s / %s\t", us(r.LayerCompute[i]), us(r.LayerAllReduce[i]))
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprint(tw, "head\t")
		for _, r := range p.Ranks {
			fmt.Fprintf(tw, "%s\t", us(r.HeadCompute))
		}
		fmt.Fprintln(tw)
		tw.Flush()
	}
	fmt.Fprintf(w, "communication share of the step: %.1f%% (1 - critical-path compute %s µs / step %s µs)\n",
		100*p.CommShare, us(p.CriticalCompute), us(step))
	for _, f := range p.Frames {
		fmt.Fprintf(w, "frames per step with rank %d (%s): %.2f sent, %.2f received\n", f.Rank, f.Addr, f.Sent, f.Received)
	}
}

// parseTensorSplit reads --tensor-split: comma-separated positive weights,
// one per rank in rank order.
func parseTensorSplit(list string) ([]float64, error) {
	var weights []float64
	for i, s := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, usagef("--tensor-split: item %d %q is not a positive number", i, s)
		}
		weights = append(weights, v)
	}
	return weights, nil
}

// spinSetting turns a --net-spin / --spin value into a MeshConfig.Spin:
// there 0 means the default and never is negative.
func spinSetting(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
