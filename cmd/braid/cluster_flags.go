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
	"time"

	"braid/internal/cluster"
	"braid/internal/dist"
	"braid/internal/engine"
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
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.workers, "workers", "", "run across `braid worker`s: HOST:PORT,... in rank order after this node (rank 0)")
	fs.StringVar(&f.split, "split", "", "with --workers: tensor | layer | tensor=T,layer=L (default layer)")
	fs.StringVar(&f.tensorSplit, "tensor-split", "", "with --workers: weights per rank in rank order, this node first, e.g. 2,1,1")
	fs.StringVar(&f.file, "cluster", "", "cluster file (TOML): ranks, addresses per pair, split, secret (instead of --workers)")
	fs.StringVar(&f.secretFile, "secret-file", "", "file holding the cluster's shared secret (default: $BRAID_SECRET; none = loopback only)")
	fs.DurationVar(&f.timeout, "net-timeout", dist.DefaultTimeout, "with --workers: bound on every network wait")
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
			cfg.Nodes = append(cfg.Nodes, cluster.Node{Addr: w})
		}
	}
	if path == "" {
		return cfg, usagef("-m MODEL is required")
	}
	cfg.Model, cfg.Split = path, split
	if tsplit != "" {
		cfg.TensorSplit = nil
		for i, s := range strings.Split(tsplit, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				return cfg, usagef("--tensor-split: item %d %q is not a positive number", i, s)
			}
			cfg.TensorSplit = append(cfg.TensorSplit, v)
		}
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
	// Workers that are not up yet are retried this long.
	cfg.ConnectTimeout = min(cfg.Timeout, 10*time.Second)
	return cfg, nil
}

// loadBackend loads the model on this node (loadModel) or, with --workers
// or --cluster, across the cluster; either way l.backend runs it.
func loadBackend(mf *modelFlags, cf *clusterFlags, seqs int, stderr io.Writer) (*loaded, error) {
	cfg, err := cf.config(mf.path)
	if err != nil {
		return nil, err
	}
	if !cf.active() {
		return loadModel(mf, seqs, stderr)
	}
	if mf.threads <= 0 {
		return nil, usagef("-t %d: need at least one thread", mf.threads)
	}
	cfg.Threads, cfg.MaxBatch, cfg.Ctx, cfg.Parallel, cfg.KVF32 = mf.threads, mf.batch, mf.ctx, max(seqs, 1), mf.kvF32
	cfg.Progress = stderr
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := cluster.Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	p := c.Plan()
	fmt.Fprintf(stderr, "braid: %d ranks, split %s (%s)\n", len(p.Ranks), p.Mode, p.SplitBy)
	return &loaded{file: c.File(), ctx: p.Ctx, backend: c, cl: c}, nil
}

// generate runs one generation on the loaded model, on this node or the
// cluster (the Generator asks the backend for candidates or full rows).
func (l *loaded) generate(ctx context.Context, r engine.Request) (engine.Stats, error) {
	return engine.NewGenerator(l.backend).Generate(ctx, r)
}
