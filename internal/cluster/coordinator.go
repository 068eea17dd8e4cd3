package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/sysinfo"
)

// ErrUnavailable is wrapped by every step error that comes from the cluster
// (a worker that died, hung or lost a link, or is not back yet), as opposed
// to a bad request: a server answers those with 503. The message goes on
// to name the rank and its address.
var ErrUnavailable = engine.ErrUnavailable

// Node is one worker as the coordinator knows it.
type Node struct {
	// Addr is the worker's control address (braid worker --listen), as the
	// coordinator reaches it.
	Addr string
	// Model is the model's path on that node; empty means the
	// coordinator's (absolute) path, then --models-dir there.
	Model string
}

// Config says how to form a cluster. Ranks are in the order given: rank 0
// is this process, rank i the worker Nodes[i-1]; TensorSplit is indexed by
// the same ranks, and nothing is reordered.
type Config struct {
	Model string // the GGUF on this node
	Nodes []Node
	// Links[[2]int{i, j}] (i < j) is the host, or host:port, at which rank
	// i reaches rank j's data plane; unset pairs use the host of rank j's
	// control address and the data port it reports.
	Links map[[2]int]string
	// Split is --split: tensor, layer or tensor=T,layer=L.
	Split       string
	TensorSplit []float64
	Secret      []byte
	// TLS makes every connection mutual TLS (dist.LoadTLS); nil is plain TCP.
	TLS *dist.TLS
	// Threads (rank 0's kernels), MaxBatch (tokens per internal step, on
	// every rank), Ctx and Parallel (the KV cache holds Parallel sequences
	// of Ctx positions), KVF32: as for a single node.
	Threads, MaxBatch, Ctx, Parallel int
	KVF32                            bool
	// Timeout bounds every network wait (dist.DefaultTimeout when 0);
	// ConnectTimeout bounds reaching the workers at Open, retrying with
	// backoff while they are not up yet (10 s when 0); ReformTimeout
	// bounds reaching them again after a failure (ConnectTimeout, at most
	// 10 s, when 0), so that a request does not wait minutes for a worker
	// that is gone.
	Timeout, ConnectTimeout, ReformTimeout time.Duration
	Stripes                                int
	// Spin is how long every rank's receives poll their sockets before
	// parking (dist.DefaultSpin when 0, never when negative), the
	// workers' included: it keeps a waiting CPU awake for a peer's reply.
	Spin time.Duration
	// Build overrides the build digest (tests of the mismatch refusal).
	Build    string
	Logger   *slog.Logger
	Progress io.Writer // load progress lines; nil = none
	// HashCacheDir holds the model hash cache (default: the user's cache
	// directory).
	HashCacheDir string
	// Hub, when Model came from a hub, names it there so that workers
	// fetch their own copies (hubfetch.go).
	Hub *HubModel
	// Resolver resolves the workers' names (nil: the system's resolver).
	Resolver *net.Resolver
	// LoadMode and LoadAuto are --load-mode for rank 0's weights (each
	// worker has its own).
	LoadMode gguf.LoadMode
	LoadAuto bool
	// MTP has rank 0 also hold the model's MTP head whole (MTPHead), for
	// --spec mtp: the plan counts it on rank 0.
	MTP bool
}

// worker is the coordinator's side of one worker.
type worker struct {
	rank int
	node Node
	sess *dist.TCP
	info infoMsg
	req  uint64 // request number on the session

	stepReqs, stepResps atomic.Uint64
	res                 result
	totals              rankTotals

	// The session's frame totals as the step goroutine last published
	// them (Counters reads these, never sess, which a re-form replaces),
	// and those of the sessions closed before it.
	framesSent, framesRecv atomic.Uint64
	closedSent, closedRecv uint64
}

// publish stores w's frame totals for Counters; called by the goroutine
// that owns the cluster.
func (w *worker) publish() {
	sent, recv := w.closedSent, w.closedRecv
	if w.sess != nil {
		p := w.sess.Stats().Peers[1]
		sent, recv = sent+p.FramesSent, recv+p.FramesRecv
	}
	w.framesSent.Store(sent)
	w.framesRecv.Store(recv)
}

// rankTotals are one rank's running step times, written by the step
// goroutine and read by metrics scrapes.
type rankTotals struct {
	steps                     atomic.Uint64
	step, allReduce, pipeline atomic.Int64 // nanoseconds
}

func (t *rankTotals) add(step, allReduce, pipeline time.Duration) {
	t.steps.Add(1)
	t.step.Add(int64(step))
	t.allReduce.Add(int64(allReduce))
	t.pipeline.Add(int64(pipeline))
}

func (t *rankTotals) stats(rank int, addr string) engine.RankStats {
	return engine.RankStats{Rank: rank, Addr: addr, Steps: t.steps.Load(), Step: time.Duration(t.step.Load()),
		AllReduce: time.Duration(t.allReduce.Load()), Pipeline: time.Duration(t.pipeline.Load())}
}

// Cluster is the coordinator: rank 0 of a plan, holding its own shard, and
// an engine.Backend over all ranks. It forms the cluster at Open and again,
// by itself, at the first step after a failure (a worker that died, hung or
// lost its link): the workers reconnect and reload from their local copies,
// and every rank starts with an empty KV cache.
type Cluster struct {
	localTotals rankTotals
	linksMu     sync.Mutex
	links       []engine.Link

	cfg    Config
	log    *slog.Logger
	file   *gguf.Model
	load   plan.LoadChoice // how rank 0 holds its weights
	pool   *kernels.Pool
	sha    string
	size   int64
	path   string
	plan   *plan.Plan
	mode   plan.Mode
	local  *rank
	posns  int
	vocab  int
	maxVoc int // widest vocabulary slice of a last-stage rank
	// head is the MTP head on this rank (Config.MTP), nil without.
	head *model.Model
	// exact is SetExactColumns's bound for the next steps (0: off).
	exact int

	workers []*worker // index rank-1
	mesh    *dist.TCP
	formed  bool
	broken  error // why the last step failed; cleared by a re-form

	stepNo   uint64
	flight   []flightStep // launched, not yet collected (pipeline.go)
	ops      []kvOp
	buf      []byte
	merged   []model.Candidate
	lists    [][]model.Candidate
	closed   bool
	reforms  atomic.Uint64
	streamed atomic.Uint64

	// Heal's schedule for re-forming a broken cluster between requests.
	healAt   time.Time
	healWait time.Duration

	// Profiling (StartProfile .. StopProfile): the steps and their wall
	// time, and the frame counters at the start.
	profiling    bool
	profSteps    uint64
	profTime     time.Duration
	profCounters []WorkerCounters
}

var (
	_ engine.Backend       = (*Cluster)(nil)
	_ engine.Healer        = (*Cluster)(nil)
	_ engine.HiddenBackend = (*Cluster)(nil)
)

// Open plans the model over the ranks with the workers' reported facts,
// refuses a plan that does not fit (numbers per rank) before anything is
// loaded, then loads every shard and forms the data-plane mesh.
func Open(ctx context.Context, cfg Config) (*Cluster, error) {
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("cluster: no workers")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = dist.DefaultTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.ReformTimeout <= 0 {
		cfg.ReformTimeout = min(cfg.ConnectTimeout, 10*time.Second)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.Threads <= 0 {
		cfg.Threads = 1
	}
	cfg.Parallel = max(cfg.Parallel, 1)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Build == "" {
		cfg.Build = dist.BuildDigest()
	}
	if cfg.Split == "" {
		cfg.Split = "layer"
	}
	world := len(cfg.Nodes) + 1
	mode, err := plan.ParseMode(cfg.Split, world)
	if err != nil {
		return nil, err
	}
	if cfg.TensorSplit != nil && len(cfg.TensorSplit) != world {
		return nil, fmt.Errorf("cluster: --tensor-split has %d weights for %d ranks (this node and %d workers)", len(cfg.TensorSplit), world, len(cfg.Nodes))
	}
	abs, err := filepath.Abs(cfg.Model)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, mode: mode, path: abs}
	for i, n := range cfg.Nodes {
		if n.Addr == "" {
			return nil, fmt.Errorf("cluster: worker %d (rank %d) has no address", i, i+1)
		}
		c.workers = append(c.workers, &worker{rank: i + 1, node: n})
	}
	c.progress("hashing %s", abs)
	if c.sha, c.size, err = newHashCache(cfg.HashCacheDir).SHA256(abs); err != nil {
		return nil, fmt.Errorf("cluster: model identity: %w", err)
	}
	if c.file, err = gguf.Open(abs); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	mc, err := model.ReadConfig(c.file)
	if err != nil {
		return nil, err
	}
	if cfg.Ctx <= 0 {
		c.cfg.Ctx = min(mc.Context, 4096)
	}
	c.posns = c.cfg.Ctx * c.cfg.Parallel
	if err := c.dialAll(ctx, cfg.ConnectTimeout, true); err != nil {
		return nil, err
	}
	ranks := []plan.Rank{{Name: "local"}}
	if mem, err := sysinfo.ReadMemory(); err == nil && mem.Usable() > 0 && mem.Usable() <= math.MaxInt64 {
		ranks[0].Mem = int64(mem.Usable())
	}
	for _, w := range c.workers {
		ranks = append(ranks, plan.Rank{Name: w.node.Addr, Mem: w.info.Mem})
	}
	if cfg.MTP && mc.NextN <= 0 {
		return nil, fmt.Errorf("cluster: %s (%s) has no MTP head (no nextn_predict_layers)", abs, mc.Arch)
	}
	p, err := plan.Make(c.file, plan.Request{Ranks: ranks, Mode: mode, Weights: cfg.TensorSplit, Ctx: c.cfg.Ctx,
		Parallel: c.cfg.Parallel, MaxBatch: cfg.MaxBatch, Threads: cfg.Threads, KVF32: cfg.KVF32, MTP: cfg.MTP})
	if err != nil {
		var fe *plan.FitError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%w\n%s", err, p.Table())
		}
		return nil, err
	}
	c.plan = p
	c.log.Info("cluster: plan", "split", mode.String(), "by", p.SplitBy, "ranks", world)
	for _, rp := range p.Ranks {
		c.log.Info("cluster: rank", "rank", rp.Rank, "name", rp.Name, "shard", rp.Shard.String(),
			"weights", plan.Bytes(rp.Weights), "kv", plan.Bytes(rp.KV))
		if rp.Shard.LastStage(mc) {
			c.maxVoc = max(c.maxVoc, rp.Shard.Vocab())
		}
	}
	if err := c.holdLocal(abs, ranks[0].Mem); err != nil {
		return nil, err
	}
	if err := c.bindLocal(); err != nil {
		return nil, err
	}
	if err := c.loadAll(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func (c *Cluster) progress(format string, a ...any) {
	if c.cfg.Progress != nil {
		fmt.Fprintf(c.cfg.Progress, "braid: "+format+"\n", a...)
	}
}

// holdLocal chooses how rank 0 holds its weights (--load-mode) and holds
// them so, refusing a copy that does not fit the memory usable (mem, 0 =
// unknown).
func (c *Cluster) holdLocal(path string, mem int64) error {
	r := &c.plan.Ranks[0]
	lf := plan.LoadFacts{File: c.file.Bytes(), Weights: r.Weights, Other: r.KV + r.Scratch, Usable: mem, InMemoryFS: sysinfo.InMemoryFS(path)}
	c.load = plan.ChooseLoad(c.cfg.LoadMode, c.cfg.LoadAuto, lf)
	if need := lf.Need(c.load.Mode); mem > 0 && need > mem {
		return fmt.Errorf("rank 0 (this node) does not fit with --load-mode %s: needs %s (a copy of the file, %s; KV cache and scratch %s) but %s is usable",
			c.load.Mode, plan.Bytes(need), plan.Bytes(lf.File), plan.Bytes(lf.Other), plan.Bytes(mem))
	}
	if err := c.file.SetMode(gguf.LoadOptions{Mode: c.load.Mode}); err != nil {
		return err
	}
	c.progress("weights: %s", c.load)
	return nil
}

// Load says how rank 0 holds its weights, and why.
func (c *Cluster) Load() plan.LoadChoice { return c.load }

// bindLocal binds rank 0's shard once; its links follow every new mesh.
func (c *Cluster) bindLocal() error {
	sh := c.plan.Ranks[0].Shard
	sh.Notes = nil
	c.pool = kernels.NewPool(c.cfg.Threads)
	r := &rank{sh: sh, world: len(c.plan.Ranks), tp: c.mode.TP, pp: c.mode.PP}
	r.comm, r.stage = newRankLinks(&sh, r.world, r.tp, r.pp)
	opt := model.Options{MaxBatch: c.cfg.MaxBatch, Comm: r.comm, Shard: &sh}
	if r.stage != nil {
		opt.Stage = r.stage
	}
	m, err := model.New(c.file, c.pool, opt)
	if err != nil {
		return fmt.Errorf("rank 0: binding %s: %w", sh.String(), err)
	}
	r.m, r.cfg = m, &m.Cfg
	if err := r.emptyCache(c.cacheSize()); err != nil {
		return err
	}
	c.local, c.vocab = r, m.Cfg.Vocab
	c.lists = make([][]model.Candidate, c.mode.TP)
	if c.cfg.MTP {
		// The head drafts between steps, on this rank's cores.
		if c.head, err = model.NewMTPHead(c.file, c.pool, c.cfg.MaxBatch); err != nil {
			return fmt.Errorf("rank 0: the MTP head: %w", err)
		}
	}
	return nil
}

// MTPHead is the model's MTP head, whole on this rank (Config.MTP), for an
// MTP drafter; nil without.
func (c *Cluster) MTPHead() *model.Model { return c.head }

// SetExactColumns is engine.Spec.Exact over the cluster: the steps that
// follow, until it is called with 0, compute the products of at most n
// tokens on every rank as one-token steps do (kernels.Pool.SetExactColumns
// on this rank's pool now, and on each worker's around each step, carried
// by the Step frame), so that a verification step's logits are bit for bit
// those of plain decode.
func (c *Cluster) SetExactColumns(n int) {
	c.exact = max(n, 0)
	c.pool.SetExactColumns(c.exact)
}

// describe names a rank for errors: its rank and the address the user gave.
func (c *Cluster) describe(rank int) string {
	if rank == 0 {
		return "rank 0 (this node)"
	}
	if rank > 0 && rank <= len(c.workers) {
		return fmt.Sprintf("rank %d (%s)", rank, c.workers[rank-1].node.Addr)
	}
	return fmt.Sprintf("rank %d", rank)
}

// sessErr names the worker behind a session error (the session's own rank
// numbers are those of a mesh of two).
func (c *Cluster) sessErr(w *worker, err error) error {
	var pe *dist.PeerError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", c.describe(w.rank), pe.What, pe.Err)
	}
	var re *remoteError
	if errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("%s: %w", c.describe(w.rank), err)
}

// meshErr names the rank behind a data-plane error with its control address
// too (the data plane's addresses are the workers' data ports).
func (c *Cluster) meshErr(err error) error {
	var pe *dist.PeerError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s, data plane %s: %s: %w", c.describe(pe.Rank), pe.Addr, pe.What, pe.Err)
	}
	return err
}

// dialAll opens a session to every worker and asks for its facts, each
// worker retried until timeout while it is not up yet; loud logs every
// retry as a warning (forming at Open: a leader waits for its workers).
func (c *Cluster) dialAll(ctx context.Context, timeout time.Duration, loud bool) error {
	errs := make([]error, len(c.workers))
	var wg sync.WaitGroup
	for i, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.dial(ctx, w, timeout, loud)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, w := range c.workers {
			c.closeSession(w)
		}
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

func (c *Cluster) dial(ctx context.Context, w *worker, timeout time.Duration, loud bool) error {
	var retry func(dist.Retry)
	if loud {
		retry = func(r dist.Retry) {
			c.log.Warn("cluster: worker not reachable yet; retrying", "rank", w.rank, "addr", w.node.Addr, "attempt", r.Attempt,
				"err", r.Err, "retry_in", r.Wait, "waited", r.Waited.Round(time.Millisecond), "wait_limit", r.Limit)
		}
	}
	tr, err := dist.Connect(ctx, dist.MeshConfig{Rank: 0, Addrs: []string{"", w.node.Addr}, Secret: c.cfg.Secret, TLS: c.cfg.TLS,
		Timeout: c.cfg.Timeout, ConnectTimeout: timeout, Spin: c.cfg.Spin, Build: c.cfg.Build, Logger: c.log,
		Resolver: c.cfg.Resolver, OnRetry: retry})
	if err != nil {
		return c.sessErr(w, err)
	}
	w.sess = tr
	p, err := c.call(w, []byte{kindInfo}, nil)
	if err != nil {
		return err
	}
	w.info = infoMsg{}
	if err := parseJSON(p, &w.info); err != nil {
		return c.sessErr(w, err)
	}
	c.log.Info("cluster: worker joined", "rank", w.rank, "addr", w.node.Addr, "data", w.info.DataAddr,
		"mem", plan.Bytes(w.info.Mem), "threads", w.info.Threads, "cores", w.info.Facts.Cores)
	return nil
}

func (c *Cluster) closeSession(w *worker) {
	if w.sess != nil {
		w.sess.Close()
		p := w.sess.Stats().Peers[1]
		w.closedSent += p.FramesSent
		w.closedRecv += p.FramesRecv
		w.sess = nil
		w.publish()
	}
}

// send writes one request to w.
func (c *Cluster) send(w *worker, payload []byte) error {
	if w.sess == nil {
		return c.sessErr(w, errNotFormed)
	}
	w.req++
	if err := w.sess.SendControl(1, wire.Tag{Step: w.req, Op: wire.OpStep}, payload); err != nil {
		return c.sessErr(w, err)
	}
	return nil
}

// recv waits for w's response to its last request, passing progress lines
// on; each wait has the session's deadline, so a worker that reports
// progress may take longer in all.
func (c *Cluster) recv(w *worker, progress func(string)) ([]byte, error) {
	return c.recvReq(w, w.req, progress)
}

// recvReq waits for w's response to request req: an earlier one than the
// last when several steps are in flight (pipeline.go), whose responses
// come in order.
func (c *Cluster) recvReq(w *worker, req uint64, progress func(string)) ([]byte, error) {
	for {
		tag, p, err := w.sess.RecvControl(1)
		if err != nil {
			return nil, c.sessErr(w, err)
		}
		if len(p) > 0 && p[0] == kindLeaving {
			// Unsolicited, after the last response the worker sent: it
			// stops, and closes the session next.
			return nil, &leftError{Rank: w.rank, Addr: w.node.Addr, Reason: string(clip(p[1:]))}
		}
		if tag.Op != wire.OpResult || tag.Step != req || len(p) == 0 {
			return nil, c.sessErr(w, fmt.Errorf("%w: response %s to request %d (%d bytes)", wire.ErrMalformed, tag, req, len(p)))
		}
		switch p[0] {
		case kindOK:
			return p[1:], nil
		case kindProgress:
			if progress != nil {
				progress(string(clip(p[1:])))
			}
		case kindError:
			return nil, &remoteError{Rank: w.rank, Addr: w.node.Addr, Msg: string(clip(p[1:]))}
		case kindStream:
			return nil, errStreamWanted
		default:
			return nil, c.sessErr(w, fmt.Errorf("%w: response kind %d", wire.ErrMalformed, p[0]))
		}
	}
}

func clip(b []byte) []byte {
	if len(b) > 8<<10 {
		b = b[:8<<10]
	}
	return b
}

func (c *Cluster) call(w *worker, payload []byte, progress func(string)) ([]byte, error) {
	if err := c.send(w, payload); err != nil {
		return nil, err
	}
	return c.recv(w, progress)
}

// loadAll loads every worker's shard, then forms the data-plane mesh.
func (c *Cluster) loadAll(ctx context.Context) error {
	world := len(c.plan.Ranks)
	start := time.Now()
	errs := make([]error, len(c.workers))
	var wg sync.WaitGroup
	for i, w := range c.workers {
		path := w.node.Model
		if path == "" {
			path = c.path
		}
		m := loadMsg{SHA256: c.sha, Path: path, Size: c.size, Rank: w.rank, World: world, TP: c.mode.TP, PP: c.mode.PP,
			Shard: c.plan.Ranks[w.rank].Shard, MaxBatch: c.cfg.MaxBatch, Ctx: c.cfg.Ctx, Positions: c.posns, KVF32: c.cfg.KVF32,
			Stream: true, Hub: c.cfg.Hub}
		m.Shard.Notes = nil
		payload, err := appendJSON(nil, kindLoad, &m)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			progress := func(s string) { c.progress("%s: %s", c.describe(w.rank), s) }
			_, err := c.call(w, payload, progress)
			if errors.Is(err, errStreamWanted) {
				// The worker has no copy: it waits for the slices.
				if err = c.streamTo(w); err == nil {
					_, err = c.recv(w, progress)
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: loading: %w", err)
	}
	c.progress("loaded %d ranks in %v", world, time.Since(start).Round(time.Millisecond))
	return c.connectAll(ctx)
}

// dataAddr is where rank i dials rank j's data plane.
func (c *Cluster) dataAddr(i, j int) (string, error) {
	w := c.workers[j-1]
	_, port, err := net.SplitHostPort(w.info.DataAddr)
	if err != nil {
		return "", fmt.Errorf("%s reported data address %q: %w", c.describe(j), w.info.DataAddr, err)
	}
	if a, ok := c.cfg.Links[[2]int{i, j}]; ok && a != "" {
		if _, _, err := net.SplitHostPort(a); err == nil {
			return a, nil
		}
		return net.JoinHostPort(a, port), nil
	}
	host, _, err := net.SplitHostPort(w.node.Addr)
	if err != nil {
		return "", fmt.Errorf("%s: address %q: %w", c.describe(j), w.node.Addr, err)
	}
	return net.JoinHostPort(host, port), nil
}

// connectAll has every rank join the data-plane mesh: the workers on their
// data listeners, this rank by dialing them all.
func (c *Cluster) connectAll(ctx context.Context) error {
	world := len(c.plan.Ranks)
	addrs := make([][]string, world)
	for i := range addrs {
		addrs[i] = make([]string, world)
		for j := i + 1; j < world; j++ {
			a, err := c.dataAddr(i, j)
			if err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
			addrs[i][j] = a
		}
	}
	for _, w := range c.workers {
		payload, err := appendJSON(nil, kindConnect, &connectMsg{Addrs: addrs[w.rank], TimeoutMS: c.cfg.Timeout.Milliseconds(), Stripes: c.cfg.Stripes, SpinUS: spinUS(c.cfg.Spin)})
		if err != nil {
			return err
		}
		if err := c.send(w, payload); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	mesh, err := dist.Connect(ctx, dist.MeshConfig{Rank: 0, Addrs: addrs[0], Secret: c.cfg.Secret, TLS: c.cfg.TLS, Stripes: max(c.cfg.Stripes, 1),
		Timeout: c.cfg.Timeout, ConnectTimeout: 2 * c.cfg.Timeout, Spin: c.cfg.Spin, Build: c.cfg.Build, Logger: c.log, Resolver: c.cfg.Resolver,
		Shm: dist.ShmDefault()})
	errs := make([]error, 0, len(c.workers)+1)
	if err != nil {
		errs = append(errs, c.meshErr(err))
	}
	for _, w := range c.workers {
		if _, err := c.recv(w, nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		if mesh != nil {
			mesh.Close()
		}
		return fmt.Errorf("cluster: forming the data plane: %w", err)
	}
	c.mesh = mesh
	c.local.attach(mesh, 0)
	c.formed, c.broken = true, nil
	links := make([]engine.Link, 0, world*(world-1)/2)
	for i := 0; i < world; i++ {
		for j := i + 1; j < world; j++ {
			links = append(links, engine.Link{From: i, To: j, Addr: addrs[i][j], Transport: mesh.Kind()})
		}
	}
	for _, l := range links {
		c.log.Info("cluster: data plane", "rank", l.From, "peer", l.To, "addr", l.Addr, "transport", l.Transport)
	}
	c.linksMu.Lock()
	c.links = links
	c.linksMu.Unlock()
	return nil
}

// RankStats returns every rank's running step totals, this node (rank 0)
// first. Safe to call while steps run.
func (c *Cluster) RankStats() []engine.RankStats {
	out := []engine.RankStats{c.localTotals.stats(0, "")}
	for _, w := range c.workers {
		out = append(out, w.totals.stats(w.rank, w.node.Addr))
	}
	return out
}

// Links returns the data-plane connections of the last forming: which
// address each rank dialled each higher rank at, over which transport.
func (c *Cluster) Links() []engine.Link {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	return append([]engine.Link(nil), c.links...)
}

// teardown ends the cluster after a failure: the mesh closes (so ranks
// still waiting fail at once instead of at their deadline), the sessions
// close (the workers keep their weights), and this rank's KV cache is
// emptied in place, as the workers' will be at the re-form.
func (c *Cluster) teardown(cause error) {
	c.broken = cause
	c.formed = false
	if c.profiling { // the workers' profiles end with their sessions
		c.profiling = false
		c.local.stopProfile(0, c.mesh)
	}
	if c.mesh != nil {
		c.mesh.Close()
		c.mesh = nil
	}
	if c.local != nil {
		c.local.attach(nil, 0)
		c.local.cache.Reset()
	}
	for _, w := range c.workers {
		c.closeSession(w)
	}
	c.ops = c.ops[:0]
	c.flight = c.flight[:0] // lost with the sessions
}

// reform brings a broken cluster back: sessions, the same plan's loads
// (fast: the workers kept their weights, or reload from their local copy)
// and a new mesh.
func (c *Cluster) reform() error { return c.reformWithin(c.cfg.ReformTimeout) }

// reformWithin is reform with the workers retried for at most timeout.
func (c *Cluster) reformWithin(timeout time.Duration) error {
	if c.closed {
		return errors.New("cluster: closed")
	}
	ctx := context.Background()
	if err := c.dialAll(ctx, timeout, false); err != nil {
		return fmt.Errorf("%w: %w (the cluster failed before: %v)", ErrUnavailable, err, c.broken)
	}
	if err := c.loadAll(ctx); err != nil {
		c.teardown(c.broken)
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	c.reforms.Add(1)
	c.log.Info("cluster: re-formed", "ranks", len(c.plan.Ranks))
	return nil
}

// Vocab is the model's vocabulary size.
func (c *Cluster) Vocab() int { return c.vocab }

// Config is the model's configuration.
func (c *Cluster) Config() *model.Config { return c.local.cfg }

// cacheSize is the KV cache every rank holds (see loadMsg.cacheSize).
func (c *Cluster) cacheSize() model.CacheSize {
	return model.CacheSize{Positions: c.posns, Ctx: c.cfg.Ctx, MaxStep: c.cfg.MaxBatch, F32: c.cfg.KVF32}
}

// File is the coordinator's open model (metadata, tokenizer).
func (c *Cluster) File() *gguf.Model { return c.file }

// Plan is the plan in force.
func (c *Cluster) Plan() *plan.Plan { return c.plan }

// Reforms counts the times the cluster re-formed after a failure.
func (c *Cluster) Reforms() uint64 { return c.reforms.Load() }

// maxFullRows bounds the rows of full logits one result carries, so a step
// result stays under the control frame limit; longer requests run as
// several steps.
func (c *Cluster) maxFullRows() int {
	return c.maxRows(engine.FullLogits, false)
}

// maxRows bounds the output rows of one step so that each result stays
// under the control frame limit: full logits or candidates, and hidden
// states when asked for.
func (c *Cluster) maxRows(out engine.Output, hidden bool) int {
	per := 8 * max(out.TopK, 1)
	if out.Full {
		per = 4 * max(c.maxVoc, 1)
	}
	if hidden {
		per += 4 * c.local.cfg.Embd
	}
	return max(1, int(wire.DefaultLimits.Control-1024)/per)
}

// Forward runs one step on every rank. The step fails with an error naming
// the rank and address when a worker dies, hangs or loses a link; the
// cluster then re-forms at the next call.
func (c *Cluster) Forward(b *model.Batch, out engine.Output, logits []float32) error {
	return c.forward(b, out, logits, nil)
}

// ForwardHidden is Forward that also writes each output row's final-normed
// hidden state (Config().Embd values; an MTP head's input) into hidden
// (engine.HiddenBackend). On a tensor split rank 0 computes them itself;
// otherwise the first rank of the last stage returns them with its result:
// 4*Embd bytes per output row (a verification of 1+k tokens: (1+k)*4*Embd
// bytes more in that worker's result, nothing more in the Step frames).
func (c *Cluster) ForwardHidden(b *model.Batch, out engine.Output, logits, hidden []float32) error {
	if want := b.Outputs() * c.local.cfg.Embd; len(hidden) < want {
		return fmt.Errorf("%w: hidden-state buffer holds %d values, need %d", model.ErrBadBatch, len(hidden), want)
	}
	return c.forward(b, out, logits, hidden)
}

// Head is the output head over final-normed hidden states on this rank,
// with the MTP head's binding of it (every logit, one product per row):
// each row's logits are those a step that outputs that token alone
// computes on the ranks that hold the vocabulary's slices (engine.HiddenBackend).
func (c *Cluster) Head(hidden, logits []float32) error {
	if c.head == nil {
		return errors.New("cluster: the output head over hidden states needs the MTP head on rank 0 (Config.MTP)")
	}
	return c.head.Head(hidden, logits)
}

func (c *Cluster) forward(b *model.Batch, out engine.Output, logits, hidden []float32) error {
	if c.closed {
		return errors.New("cluster: closed")
	}
	if len(c.flight) > 0 {
		return engine.ErrInFlight
	}
	rows := b.Outputs()
	if len(logits) < rows*c.vocab {
		return fmt.Errorf("%w: logits buffer holds %d values, need %d", model.ErrBadBatch, len(logits), rows*c.vocab)
	}
	if !c.formed {
		if err := c.reform(); err != nil {
			return err
		}
	}
	if !out.Full && out.TopK <= 0 {
		out.TopK = 1
	}
	lim := c.maxRows(out, hidden != nil)
	if rows <= lim {
		return c.step(b, out, logits, hidden)
	}
	// A long batch: several steps, each result under the frame limit.
	E := c.local.cfg.Embd
	n, start, done := len(b.Tokens), 0, 0
	for start < n {
		end, k := start, 0
		for end < n && (k < lim || !b.Output[end]) {
			if b.Output[end] {
				k++
			}
			end++
		}
		sub := model.Batch{Tokens: b.Tokens[start:end], Pos: b.Pos[start:end], Seq: b.Seq[start:end], Output: b.Output[start:end]}
		var hid []float32
		if hidden != nil {
			hid = hidden[done*E:]
		}
		if err := c.step(&sub, out, logits[done*c.vocab:], hid); err != nil {
			return err
		}
		done += k
		start = end
	}
	return nil
}

// step is one Step frame to each worker, this rank's shard, and one result
// from each (pipeline.go); hidden, when set, receives the output rows'
// hidden states.
func (c *Cluster) step(b *model.Batch, out engine.Output, logits, hidden []float32) error {
	if err := c.launch(b, out, c.Depth(), hidden); err != nil {
		return err
	}
	return c.collect(logits)
}

// stepError picks the most telling cause: a worker's own report or a dead
// connection names the failed rank, while the others only saw their peer
// go away.
func (c *Cluster) stepError(local error, remote []error) error {
	// A worker that said it leaves is the cause; the others only lost it.
	for _, err := range remote {
		var le *leftError
		if errors.As(err, &le) {
			return fmt.Errorf("%w: step %d failed: %w", ErrUnavailable, c.stepNo, le)
		}
	}
	var all []error
	if local != nil {
		all = append(all, c.meshErr(local))
	}
	all = append(all, remote...)
	return fmt.Errorf("%w: step %d failed: %w", ErrUnavailable, c.stepNo, errors.Join(all...))
}

// merge assembles the output rows from the last stage's results.
func (c *Cluster) merge(rows int, out engine.Output, logits []float32) error {
	tp, pp := c.mode.TP, c.mode.PP
	first := (pp - 1) * tp
	var lres result
	if first == 0 {
		c.local.result(&lres, rows, out.Full, out.TopK)
	}
	res := func(rank int) (*result, error) {
		if rank == 0 {
			return &lres, nil
		}
		r := &c.workers[rank-1].res
		if r.Rows != rows || r.Mode == resNone {
			return nil, fmt.Errorf("cluster: step %d: %s returned %d rows (mode %d) for %d outputs", c.stepNo, c.describe(rank), r.Rows, r.Mode, rows)
		}
		return r, nil
	}
	shardOf := func(rank int) *model.Shard { return &c.plan.Ranks[rank].Shard }
	if out.Full {
		for rank := first; rank < first+tp; rank++ {
			r, err := res(rank)
			if err != nil {
				return err
			}
			sh := shardOf(rank)
			if r.Mode != resFull || r.Width != sh.Vocab() {
				return fmt.Errorf("cluster: step %d: %s returned rows of %d (mode %d), want full slices of %d", c.stepNo, c.describe(rank), r.Width, r.Mode, sh.Vocab())
			}
			if err := model.PutVocabSlice(logits, c.vocab, r.Logits, sh.VocabLo, sh.VocabHi); err != nil {
				return err
			}
		}
		return nil
	}
	k := out.TopK
	for row := 0; row < rows; row++ {
		for t := 0; t < tp; t++ {
			rank := first + t
			r, err := res(rank)
			if err != nil {
				return err
			}
			switch r.Mode {
			case resCands:
				c.lists[t] = r.Cands[row*r.Width : (row+1)*r.Width]
			case resFull:
				sh := shardOf(rank)
				c.lists[t] = model.TopK(c.lists[t][:0:0], r.Logits[row*r.Width:(row+1)*r.Width], int32(sh.VocabLo), k)
			}
		}
		c.merged = model.MergeTopK(c.merged, k, c.lists...)
		engine.FillCandidates(logits[row*c.vocab:(row+1)*c.vocab], c.merged)
	}
	return nil
}

// The KV operations act on this rank's cache now and are replayed on every
// worker at the start of the next step.

// Drop forgets a sequence on every rank.
func (c *Cluster) Drop(seq kvcache.SeqID) {
	if !c.local.cache.Has(seq) {
		return
	}
	c.local.cache.Drop(seq)
	c.ops = append(c.ops, kvOp{Kind: opDrop, A: seq})
}

// Has reports whether the caches hold seq.
func (c *Cluster) Has(seq kvcache.SeqID) bool { return c.local.cache.Has(seq) }

// Len is the number of positions seq holds.
func (c *Cluster) Len(seq kvcache.SeqID) int { return c.local.cache.Len(seq) }

// Reserve makes room for n positions of seq on every rank.
func (c *Cluster) Reserve(seq kvcache.SeqID, n int) error {
	if err := c.local.cache.Reserve(seq, n); err != nil {
		return err
	}
	c.ops = append(c.ops, kvOp{Kind: opReserve, A: seq, N: int32(n)})
	return nil
}

// CopyPrefix makes dst share the first n positions of src on every rank.
func (c *Cluster) CopyPrefix(dst, src kvcache.SeqID, n int) error {
	if err := c.local.cache.CopyPrefix(dst, src, n); err != nil {
		return err
	}
	c.ops = append(c.ops, kvOp{Kind: opCopyPrefix, A: dst, B: src, N: int32(n)})
	return nil
}

// Truncate shortens seq to n positions on every rank.
func (c *Cluster) Truncate(seq kvcache.SeqID, n int) error {
	if err := c.local.cache.Truncate(seq, n); err != nil {
		return err
	}
	c.ops = append(c.ops, kvOp{Kind: opTruncate, A: seq, N: int32(n)})
	return nil
}

// ResumePoint is where seq can continue, from this rank's cache: every
// rank keeps the same lengths (a rank without recurrent layers counts
// them too, see kvcache.Config.Recurrent).
func (c *Cluster) ResumePoint(seq kvcache.SeqID, n int) int { return c.local.cache.ResumePoint(seq, n) }

// Snapshot keeps seq's recurrent state at length n on every rank (nothing
// to keep for a model without recurrent layers).
func (c *Cluster) Snapshot(seq kvcache.SeqID, n int) error {
	if !c.local.cache.Config().Recurrent() {
		return nil
	}
	if err := c.local.cache.Snapshot(seq, n); err != nil {
		return err
	}
	c.ops = append(c.ops, kvOp{Kind: opSnapshot, A: seq, N: int32(n)})
	return nil
}

// Forget releases seq's snapshots from length from on every rank.
func (c *Cluster) Forget(seq kvcache.SeqID, from int) {
	if !c.local.cache.Config().Recurrent() || !c.local.cache.Has(seq) {
		return
	}
	c.local.cache.Forget(seq, from)
	c.ops = append(c.ops, kvOp{Kind: opForget, A: seq, N: int32(from)})
}

// KVConfig is this rank's cache configuration (every rank has the same
// blocks). Like every Backend method, for the goroutine that runs the steps.
func (c *Cluster) KVConfig() kvcache.Config { return c.local.cache.Config() }

// KVStats is this rank's cache pool snapshot.
func (c *Cluster) KVStats() kvcache.Stats { return c.local.cache.Stats() }

// WorkerCounters are the step frames exchanged with one worker, and the
// frame totals of its sessions (every request and response, including
// loads) as of the end of the last step or session.
type WorkerCounters struct {
	Rank                       int
	Addr                       string
	StepRequests, StepResults  uint64
	FramesSent, FramesReceived uint64
}

// Counters returns the frame counters per worker. Safe to call while steps
// run: it reads what the cluster's goroutine published.
func (c *Cluster) Counters() []WorkerCounters {
	out := make([]WorkerCounters, 0, len(c.workers))
	for _, w := range c.workers {
		out = append(out, WorkerCounters{Rank: w.rank, Addr: w.node.Addr, StepRequests: w.stepReqs.Load(), StepResults: w.stepResps.Load(),
			FramesSent: w.framesSent.Load(), FramesReceived: w.framesRecv.Load()})
	}
	return out
}

// liveCounters are the counters as of now, for the goroutine that owns
// the cluster (a profile counts the frames up to its own requests).
func (c *Cluster) liveCounters() []WorkerCounters {
	for _, w := range c.workers {
		w.publish()
	}
	return c.Counters()
}

// Unload asks every worker to free its weights, then closes.
func (c *Cluster) Unload() error {
	var errs []error
	for _, w := range c.workers {
		if w.sess == nil {
			continue
		}
		if _, err := c.call(w, []byte{kindUnload}, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, c.Close())...)
}

// Close ends the sessions and the mesh and frees this rank's shard; the
// workers keep their weights for a fast re-join.
func (c *Cluster) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.mesh != nil {
		c.mesh.Close()
		c.mesh = nil
	}
	for _, w := range c.workers {
		c.closeSession(w)
	}
	if c.pool != nil {
		c.pool.Close()
	}
	if c.file != nil {
		c.file.Close()
	}
	return nil
}

// spinUS is a Spin for connectMsg: the default stays 0 (the worker's own
// setting), never is -1, and a positive spin is at least 1 µs.
func spinUS(d time.Duration) int64 {
	switch {
	case d == 0:
		return 0
	case d < 0:
		return -1
	}
	return max(d.Microseconds(), 1)
}

// whyGone explains a worker's failed session: when the worker said it was
// leaving before it closed (a stop it was told to make), that is the
// reason, not the closed connection. The notice is the last frame the
// session holds.
func (c *Cluster) whyGone(w *worker, err error) error {
	if w.sess == nil || w.sess.Err(1) == nil {
		return err
	}
	for range 4 { // a response or progress line may still be ahead of it
		_, p, rerr := w.sess.RecvControl(1)
		if rerr != nil {
			return err
		}
		if len(p) > 0 && p[0] == kindLeaving {
			return &leftError{Rank: w.rank, Addr: w.node.Addr, Reason: string(clip(p[1:]))}
		}
	}
	return err
}

// Heal checks the cluster between requests (engine.Healer; the scheduler
// calls it on its goroutine while it has no request). A worker whose
// session or data-plane link ended, because it left, died or was cut off,
// tears the cluster down at once, so that the server stops saying it is
// ready without waiting for a request to fail. A broken cluster tries to
// re-form, each worker retried for a few seconds, with exponential
// backoff between the tries (1 s doubling to 15 s). It returns nil when
// the cluster is formed, else why not, wrapping ErrUnavailable.
func (c *Cluster) Heal() error {
	if c.closed {
		return fmt.Errorf("%w: cluster closed", ErrUnavailable)
	}
	if c.formed {
		for _, w := range c.workers {
			err := w.sess.Err(1)
			if err == nil && c.mesh != nil {
				if merr := c.mesh.Err(w.rank); merr != nil {
					err = c.meshErr(merr)
				}
			}
			if err == nil {
				continue
			}
			err = fmt.Errorf("%w: %w", ErrUnavailable, c.whyGone(w, c.sessErr(w, err)))
			c.log.Warn("cluster: a rank is gone; re-forming when it is back", "rank", w.rank, "addr", w.node.Addr, "err", err)
			c.teardown(err)
			c.healAt, c.healWait = time.Now(), 0
			return err
		}
		return nil
	}
	if time.Now().Before(c.healAt) {
		if c.broken != nil {
			return c.broken
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, errNotFormed)
	}
	err := c.reformWithin(min(c.cfg.ReformTimeout, 3*time.Second))
	if err == nil {
		c.healWait = 0
		return nil
	}
	c.healWait = min(max(2*c.healWait, time.Second), 15*time.Second)
	c.healAt = time.Now().Add(c.healWait)
	c.log.Warn("cluster: not re-formed; trying again", "retry_in", c.healWait, "err", err)
	return err
}
