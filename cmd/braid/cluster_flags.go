package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"braid/internal/cluster"
	"braid/internal/discover"
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
	tlsDir      string
	timeout     time.Duration
	spin        time.Duration
	discover    string
	workerPort  int
	waitWorkers time.Duration
	ranks       int
	// log receives what discovery finds (default: standard error).
	log *slog.Logger
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.workers, "workers", "", "run across braid workers: HOST:PORT,... in rank order after this node (rank 0)")
	fs.StringVar(&f.split, "split", "", "with --workers: tensor | layer | tensor=T,layer=L (default layer)")
	fs.StringVar(&f.tensorSplit, "tensor-split", "", "with --workers: weights per rank in rank order, this node first, e.g. 2,1,1")
	fs.StringVar(&f.file, "cluster", "", "cluster file (TOML): ranks, addresses per pair, split, secret (instead of --workers)")
	fs.StringVar(&f.secretFile, "secret-file", "", "file holding the cluster's shared secret (default: $BRAID_SECRET; none = loopback only)")
	fs.StringVar(&f.tlsDir, "tls-dir", "", "mutual TLS between nodes: a directory with ca.crt, node.crt and node.key (braid certs writes them; default: $BRAID_TLS_DIR; none = plain TCP)")
	fs.DurationVar(&f.timeout, "net-timeout", dist.DefaultTimeout, "with --workers: bound on every network wait")
	fs.DurationVar(&f.spin, "net-spin", dist.DefaultSpin, "with --workers: how long every rank polls for a peer's message before it sleeps (0 = never; polling keeps a waiting CPU awake, which all-reduces need)")
	fs.StringVar(&f.discover, "discover", "", "find the workers: lws (LeaderWorkerSet's environment; the default when LWS_GROUP_SIZE > 1 and neither --workers nor --cluster is given), dns:NAME (SRV records _braid._tcp.NAME, else NAME's A/AAAA records; rank = StatefulSet ordinal + 1) or none")
	fs.IntVar(&f.workerPort, "worker-port", 7000, "with --discover: the workers' control port where discovery gives none")
	fs.DurationVar(&f.waitWorkers, "wait-workers", 0, "how long to wait, retrying with backoff, for workers that are not up yet (default 10s, at most --net-timeout; 15m with --discover)")
	fs.IntVar(&f.ranks, "ranks", 0, "with --discover dns:NAME: ranks in all, this node included (waits until the N-1 workers are listed)")
}

// active says whether the model runs on a cluster.
func (f *clusterFlags) active() bool {
	if f.workers != "" || f.file != "" {
		return true
	}
	m, err := f.mode()
	return err != nil || m.Kind != "none" // a bad --discover is config's to report
}

// mode is the discovery in force: --discover, else lws when
// LeaderWorkerSet's environment names a group of more than one pod and
// neither --workers nor --cluster is given, else none.
func (f *clusterFlags) mode() (discover.Mode, error) {
	if f.discover != "" {
		return discover.ParseMode(f.discover)
	}
	if f.workers == "" && f.file == "" {
		if v, ok := os.LookupEnv(discover.EnvSize); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 1 {
				return discover.Mode{}, fmt.Errorf("%s=%q: want the number of pods in the group (or --discover none)", discover.EnvSize, v)
			}
			if n > 1 {
				return discover.Mode{Kind: "lws"}, nil
			}
		}
	}
	return discover.Mode{Kind: "none"}, nil
}

func (f *clusterFlags) logger() *slog.Logger {
	if f.log != nil {
		return f.log
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

// discoverNodes finds the workers in rank order as mode says, waiting
// until deadline for a DNS listing to be complete.
func (f *clusterFlags) discoverNodes(mode discover.Mode, res *net.Resolver, deadline time.Time) ([]cluster.Node, error) {
	log := f.logger()
	port := f.workerPort
	if port == 0 {
		port = 7000
	}
	var addrs []string
	switch mode.Kind {
	case "lws":
		l, ok, err := discover.ReadLWS(os.LookupEnv)
		if err != nil {
			return nil, usagef("--discover lws: %v", err)
		}
		if !ok {
			return nil, usagef("--discover lws: %s is not set: not in a LeaderWorkerSet pod", discover.EnvSize)
		}
		if f.ranks != 0 && f.ranks != l.Size {
			return nil, usagef("--ranks %d but %s=%d", f.ranks, discover.EnvSize, l.Size)
		}
		if addrs, err = l.Workers(port); err != nil {
			return nil, usagef("--discover lws: %v", err)
		}
		if len(addrs) == 0 {
			return nil, usagef("--discover lws: %s=%d: a group of one has no workers", discover.EnvSize, l.Size)
		}
		log.Info("discover: LeaderWorkerSet", "leader", l.Leader, "group_size", l.Size, "worker_index", l.Index)
		for i, a := range addrs {
			log.Info("discover: worker", "rank", i+1, "addr", a, "from", "lws")
		}
	case "dns":
		if f.ranks < 2 {
			return nil, usagef("--discover %s needs --ranks N: the ranks in all, this node included (N >= 2)", mode)
		}
		r := discover.Resolver(net.DefaultResolver)
		if res != nil {
			r = res
		}
		ws, err := discover.Wait(context.Background(), r, mode.Name, f.ranks-1, port, time.Until(deadline), log)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			addrs = append(addrs, w.Addr)
		}
	default:
		return nil, fmt.Errorf("--discover %s: nothing to discover", mode)
	}
	nodes := make([]cluster.Node, len(addrs))
	for i, a := range addrs {
		nodes[i] = cluster.Node{Addr: a}
	}
	return nodes, nil
}

// config turns the flags into a cluster configuration for the model at
// path (which a cluster file may give instead).
func (f *clusterFlags) config(path string) (cluster.Config, error) {
	var cfg cluster.Config
	if f.workers != "" && f.file != "" {
		return cfg, usagef("give --workers or --cluster, not both")
	}
	mode, err := f.mode()
	if err != nil {
		return cfg, usageError{err}
	}
	if mode.Kind != "none" && (f.workers != "" || f.file != "") {
		return cfg, usagef("--discover %s finds the workers: give it, --workers or --cluster, not two", mode)
	}
	if mode.Kind == "none" && f.ranks != 0 {
		return cfg, usagef("--ranks needs --discover")
	}
	if f.waitWorkers < 0 {
		return cfg, usagef("--wait-workers %v: must not be negative", f.waitWorkers)
	}
	if !f.active() {
		if f.split != "" || f.tensorSplit != "" {
			return cfg, usagef("--split and --tensor-split need --workers or --cluster")
		}
		return cfg, nil
	}
	res, dnsServer, err := discover.ResolverFromEnv(os.LookupEnv)
	if err != nil {
		return cfg, err
	}
	if res != nil {
		f.logger().Info("discover: names resolve through "+discover.EnvDNSServer, "server", dnsServer)
	}
	cfg.Resolver = res
	wait := f.waitWorkers
	if wait == 0 {
		wait = min(f.timeout, 10*time.Second)
		if f.timeout <= 0 {
			wait = 10 * time.Second
		}
		if mode.Kind != "none" {
			wait = 15 * time.Minute
		}
	}
	deadline := time.Now().Add(wait)
	split, tsplit, secretFile, tlsDir := f.split, f.tensorSplit, f.secretFile, f.tlsDir
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
		if tlsDir == "" {
			tlsDir = cf.TLSDir
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
	} else if mode.Kind != "none" {
		if cfg.Nodes, err = f.discoverNodes(mode, res, deadline); err != nil {
			return cfg, err
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
	if cfg.TLS, err = dist.LoadTLSDir(tlsDir); err != nil {
		return cfg, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = f.timeout
	}
	cfg.Spin = spinSetting(f.spin)
	// Workers that are not up yet are retried until the deadline (what
	// a DNS wait left of --wait-workers), but a re-form after a failure
	// for 10 s at most: a request must not wait minutes for a rank.
	cfg.ConnectTimeout = max(time.Until(deadline), min(wait, time.Second))
	cfg.ReformTimeout = min(cfg.Timeout, 10*time.Second)
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
	cfg.MTP = mf.mtp // --spec mtp: the head on this node
	cfg.Progress = stderr
	cfg.Hub = mf.hubModel()
	// A server, or a cluster found by discovery (in a pod's log), says
	// who joined, the plan and every re-form; a command run by hand only
	// warns.
	level := slog.LevelWarn
	if m, _ := cf.mode(); mf.serving || m.Kind != "none" {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger.Info("cluster: between nodes: " + cfg.TLS.Describe())
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
	fmt.Fprintln(tw, "rank\taddress\tcompute µs\tall-reduce µs\tpipeline µs\tidle µs\tall-reduces\tbytes sent\tsleeps\t")
	for _, r := range p.Ranks {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.2f\t\n", r.Rank, r.Addr, us(r.Compute), us(r.AllReduce), us(r.Stage), us(r.Idle),
			float64(r.AllReduces)/n, float64(r.BytesSent)/n, float64(r.Sleeps)/n)
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
