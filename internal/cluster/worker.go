package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/sysinfo"
)

// WorkerConfig configures a worker.
type WorkerConfig struct {
	// Secret is the cluster's shared secret (dist.LoadSecret); nil accepts
	// loopback coordinators and peers only (unless TLS is set).
	Secret []byte
	// TLS makes the control and data connections mutual TLS with the
	// cluster's CA (dist.LoadTLS); nil is plain TCP.
	TLS *dist.TLS
	// Threads run the shard's kernels (0 = every core).
	Threads int
	// MemLimit caps the memory the worker offers for a shard, in bytes
	// (0 = what the node has usable: MemAvailable and any cgroup limit).
	MemLimit int64
	// ModelsDir is searched for a model by file name when it is not at the
	// path the coordinator names.
	ModelsDir string
	// DataListen is the data-plane listen address; empty means the control
	// listener's host with a free port.
	DataListen string
	// Timeout bounds every network wait (dist.DefaultTimeout when 0). An
	// idle session is kept while the coordinator answers pings.
	Timeout time.Duration
	// Spin is how long receives poll their sockets before parking
	// (dist.DefaultSpin when 0, never when negative); the coordinator's
	// setting, when it sends one, governs the ranks' mesh.
	Spin time.Duration
	// Build overrides the build digest (tests of the mismatch refusal).
	Build string
	// Logger receives the worker's log lines (slog.Default() when nil).
	Logger *slog.Logger
	// HashCacheDir holds the model hash cache (default: the user's cache
	// directory).
	HashCacheDir string
	// ShardCacheDir keeps the shards streamed from a coordinator (default:
	// os.UserCacheDir()/braid/shards).
	ShardCacheDir string
	// HubCache is the Hugging Face hub cache where a model the coordinator
	// names by hub reference is looked for and pulled (default: the one
	// the Hugging Face tools use); NoPull forbids pulling (hubfetch.go).
	HubCache string
	NoPull   bool
	// Resolver resolves the other ranks' names on the data plane (nil:
	// the system's resolver).
	Resolver *net.Resolver
	// LoadMode and LoadAuto are the worker's --load-mode: how a shard's
	// weights are held, chosen by plan.ChooseLoad when LoadAuto. Each node
	// chooses for itself: the choice rests on its memory, file system and
	// limits.
	LoadMode gguf.LoadMode
	LoadAuto bool
}

// Worker serves one coordinator at a time: it reports its facts, loads its
// shard from its local copy of the model, forms the data-plane mesh with
// its peers and runs steps. Its weights outlive a session, so the same
// coordinator (or another asking for the same model and shard) re-joins
// without reading them again; a request for another model, or Unload,
// frees them.
type Worker struct {
	cfg    WorkerConfig
	log    *slog.Logger
	hashes *hashCache
	data   net.Listener

	mu     sync.Mutex
	sess   *dist.TCP    // the current session, nil when idle
	status WorkerStatus // what /health says; under mu

	// stopping is set when Serve's context ends: the worker finishes the
	// request in progress and leaves.
	stopping atomic.Bool
	// leaveReason is what the Leaving notice says (SetLeaveReason).
	leaveReason atomic.Pointer[string]

	// quiet stops load progress lines while the coordinator streams
	// weights (it reads nothing then); streamed counts the bytes received.
	quiet    atomic.Bool
	streamed atomic.Uint64
	// exactSteps counts the steps run with exact verification (Status).
	exactSteps atomic.Uint64

	// Owned by the session goroutine (and the load it waits for).
	reqTag wire.Tag // the reply tag of the request being served
	cur    *holding
	mesh   *dist.TCP
	step   stepMsg
	res    result
	out    []byte
	// refused holds the shard files already refused in the log, with
	// why, so that a load's several lookups say it once.
	refused map[string]string
}

// holding is a loaded shard.
type holding struct {
	key     loadKey
	path    string
	file    *gguf.Model
	pool    *kernels.Pool
	r       *rank
	weights int64
}

type loadKey struct {
	sha              string
	shard            string
	rank, world      int
	tp, pp, maxBatch int
}

// NewWorker makes a worker whose control listener is at ctlAddr (used to
// choose the data-plane address when cfg.DataListen is empty).
func NewWorker(cfg WorkerConfig, ctlAddr net.Addr) (*Worker, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = dist.DefaultTimeout
	}
	if cfg.Threads <= 0 {
		cfg.Threads = runtime.NumCPU()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Build == "" {
		cfg.Build = dist.BuildDigest()
	}
	addr := cfg.DataListen
	if addr == "" {
		host := ""
		if ta, ok := ctlAddr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
			host = ta.IP.String()
		}
		addr = net.JoinHostPort(host, "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("worker: data-plane listener on %s: %w", addr, err)
	}
	return &Worker{cfg: cfg, log: cfg.Logger, hashes: newHashCache(cfg.HashCacheDir), data: ln}, nil
}

// DataAddr is the data-plane listener's address.
func (w *Worker) DataAddr() net.Addr { return w.data.Addr() }

// WorkerStatus is what a worker's health endpoint reports.
type WorkerStatus struct {
	// Session says whether a coordinator is connected; Coordinator is its
	// address.
	Session     bool   `json:"session"`
	Coordinator string `json:"coordinator,omitempty"`
	// Rank and World are the rank this worker holds a shard for, of how
	// many, and Model the file; empty while it holds none.
	Rank  int    `json:"rank,omitempty"`
	World int    `json:"world,omitempty"`
	Model string `json:"model,omitempty"`
	// Loading says a Load is running.
	Loading bool `json:"loading,omitempty"`
	// Leaving says the worker was told to stop and is leaving.
	Leaving bool `json:"leaving,omitempty"`
	// ExactSteps counts the steps this process ran with exact
	// verification (a speculative verification computing every token as
	// a one-token step does).
	ExactSteps uint64 `json:"exact_steps"`
}

// Status is the worker's state now; safe from any goroutine (a health
// probe reads it, never the session).
func (w *Worker) Status() WorkerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status
	st.Leaving = w.stopping.Load()
	st.ExactSteps = w.exactSteps.Load()
	return st
}

func (w *Worker) setStatus(f func(*WorkerStatus)) {
	w.mu.Lock()
	f(&w.status)
	w.mu.Unlock()
}

// SetLeaveReason sets what the worker tells its coordinator when its
// Serve context ends ("the worker is shutting down (SIGTERM)", ...).
func (w *Worker) SetLeaveReason(why string) { w.leaveReason.Store(&why) }

// Serve accepts coordinators on ln, one session at a time, until ctx ends;
// it then frees everything and returns. A connection that fails the
// handshake or sends a malformed frame is closed with a log line; nothing a
// peer sends ends Serve.
func (w *Worker) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := newHandoff(ln.Addr())
	stopFlag := context.AfterFunc(ctx, func() { w.stopping.Store(true) })
	defer stopFlag()
	// The transports live until Serve returns, not until ctx ends: a stop
	// lets the request in progress finish on them (formCtx).
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.acceptLoop(ctx, ln, h)
	}()
	defer func() {
		cancel()
		ln.Close()
		h.Close()
		wg.Wait()
		w.unload()
		w.data.Close()
	}()
	w.log.Info("worker: listening", "addr", ln.Addr().String(), "data", w.data.Addr().String(),
		"threads", w.cfg.Threads, "secret", len(w.cfg.Secret) > 0, "build", w.cfg.Build)
	for ctx.Err() == nil {
		fctx, formed := formCtx(ctx, life)
		tr, err := dist.Connect(fctx, dist.MeshConfig{Rank: 1, Addrs: []string{"", ""}, Listener: h, Secret: w.cfg.Secret, TLS: w.cfg.TLS, Resolver: w.cfg.Resolver,
			Timeout: w.cfg.Timeout, ConnectTimeout: 24 * time.Hour, Spin: w.cfg.Spin, Build: w.cfg.Build, Logger: w.log})
		formed()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			w.log.Warn("worker: no session", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		w.mu.Lock()
		w.sess = tr
		w.status.Session, w.status.Coordinator = true, tr.Peer(0).Addr
		w.mu.Unlock()
		w.session(ctx, life, tr)
		w.mu.Lock()
		w.sess = nil
		w.status.Session, w.status.Coordinator = false, ""
		w.mu.Unlock()
	}
	return nil
}

// formCtx is the context to form a transport with: it ends with stop
// while the transport forms (a stop while waiting for peers), but once
// formed is called only with life, which bounds the transport's lifetime
// (dist.Connect closes a transport when its context ends).
func formCtx(stop, life context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(life)
	undo := context.AfterFunc(stop, cancel)
	return ctx, func() { undo() }
}

// acceptLoop owns the control listener. While no coordinator is served, a
// new connection goes to the next session's handshake. While one is, the
// newcomer is refused with the reason, unless the current coordinator no
// longer answers a ping: then that session ends and the newcomer takes over
// (a coordinator that vanished without closing its connection must not
// keep the worker for a whole timeout).
func (w *Worker) acceptLoop(ctx context.Context, ln net.Listener, h *handoff) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			w.log.Warn("worker: accept", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		w.mu.Lock()
		cur := w.sess
		w.mu.Unlock()
		if cur == nil {
			h.offer(c)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cur.Ping(0); err == nil {
				w.log.Warn("worker: refused a second coordinator", "from", c.RemoteAddr().String(), "serving", cur.Peer(0).Addr)
				if w.cfg.TLS != nil {
					// The newcomer reads the reason only inside TLS (and one
					// that cannot do TLS hears that instead).
					tc, err := dist.ServerTLS(c, w.cfg.TLS, 5*time.Second)
					if err != nil {
						w.log.Warn("worker: refusing a second coordinator", "from", c.RemoteAddr().String(), "err", err)
						c.Close()
						return
					}
					c = tc
				}
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write(wire.Append(nil, wire.Header{Type: wire.TypeError}, []byte("worker busy: it serves another coordinator (one at a time)")))
				c.Close()
				return
			}
			w.log.Warn("worker: the coordinator does not answer; ending its session for a new one", "serving", cur.Peer(0).Addr, "new", c.RemoteAddr().String())
			cur.Close()
			h.offer(c)
		}()
	}
}

// session answers one coordinator's requests until it goes away, or
// until ctx ends: then the request in progress is answered, the
// coordinator told that this worker leaves (kindLeaving) and the session
// closed. The weights stay; the data-plane mesh closes.
func (w *Worker) session(ctx, life context.Context, tr *dist.TCP) {
	coord := tr.Peer(0).Addr
	w.log.Info("worker: coordinator connected", "addr", coord)
	// busy (a request is being served) and left (the notice is sent) are
	// under mu: the stop may come from the signal's goroutine while the
	// session waits for a request, or while it serves one.
	var mu sync.Mutex
	busy, left := false, false
	leave := func() { // with mu held
		if left {
			return
		}
		left = true
		why := "the worker is stopping"
		if p := w.leaveReason.Load(); p != nil {
			why = *p
		}
		w.log.Info("worker: leaving the cluster", "coordinator", coord, "why", why)
		if err := tr.SendControl(0, wire.Tag{Op: wire.OpResult}, append([]byte{kindLeaving}, why...)); err != nil {
			w.log.Warn("worker: telling the coordinator it leaves", "coordinator", coord, "err", err)
		}
		tr.Close()
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !busy {
			leave()
		} // else the session leaves once the request in progress is answered
	})
	defer func() {
		stop()
		w.closeMesh()
		tr.Close()
	}()
	for {
		tag, p, err := tr.RecvControl(0)
		if err != nil {
			if errors.Is(err, dist.ErrTimeout) && ctx.Err() == nil {
				if _, perr := tr.Ping(0); perr == nil {
					continue // idle between requests
				}
			}
			w.log.Info("worker: session ended", "coordinator", coord, "err", err)
			return
		}
		mu.Lock()
		if left {
			mu.Unlock()
			return
		}
		busy = true
		mu.Unlock()
		if !w.serveRequest(ctx, life, tr, coord, tag, p) {
			return
		}
		mu.Lock()
		busy = false
		if ctx.Err() != nil {
			leave()
			mu.Unlock()
			return
		}
		mu.Unlock()
	}
}

// serveRequest answers one request; false ends the session.
func (w *Worker) serveRequest(ctx, life context.Context, tr *dist.TCP, coord string, tag wire.Tag, p []byte) bool {
	var err error
	if tag.Op != wire.OpStep || len(p) == 0 {
		w.log.Warn("worker: malformed request; closing the session", "coordinator", coord, "tag", tag.String(), "bytes", len(p))
		return false
	}
	reply := wire.Tag{Step: tag.Step, Op: wire.OpResult}
	w.reqTag = reply
	send := func(b []byte) bool {
		if err := tr.SendControl(0, reply, b); err != nil {
			w.log.Warn("worker: sending a response", "coordinator", coord, "err", err)
			return false
		}
		return true
	}
	var out []byte
	switch p[0] {
	case kindInfo:
		info := w.info()
		if len(p) > 1 {
			// With a Load: where its model would come from (braid plan).
			var m loadMsg
			if err = parseJSON(p[1:], &m); err != nil {
				break
			}
			if !isSHA256(m.SHA256) {
				err = fmt.Errorf("%w: model SHA-256 %q", wire.ErrMalformed, m.SHA256)
				break
			}
			err = w.withProgress(send, func(stage func(string)) error {
				info.Source = w.source(&m, stage)
				return nil
			})
			if err != nil {
				break
			}
		}
		out, err = appendJSON(w.out[:0], kindOK, info)
	case kindLoad:
		var m loadMsg
		if err = parseJSON(p[1:], &m); err != nil {
			break
		}
		err = w.loadWithProgress(&m, send)
		out = []byte{kindOK}
	case kindConnect:
		var m connectMsg
		if err = parseJSON(p[1:], &m); err != nil {
			break
		}
		fctx, formed := formCtx(ctx, life)
		err = w.connect(fctx, &m)
		formed()
		out = []byte{kindOK}
	case kindStep:
		if err = parseStep(p[1:], &w.step); err != nil {
			break
		}
		out, err = w.runStep()
	case kindUnload:
		w.unload()
		out = []byte{kindOK}
	case kindPing:
		out = []byte{kindOK}
	case kindProfile:
		out, err = w.profileRequest(p[1:])
	case kindNetbench:
		var m netbenchMsg
		if err = parseJSON(p[1:], &m); err != nil {
			break
		}
		// No progress lines: the coordinator runs the same collectives
		// meanwhile and reads the answer when they end, together.
		err = w.netbench(ctx, &m)
		out = []byte{kindOK}
	default:
		err = fmt.Errorf("%w: request kind %d", wire.ErrMalformed, p[0])
	}
	if errors.Is(err, wire.ErrMalformed) {
		w.log.Warn("worker: malformed request; closing the session", "coordinator", coord, "err", err)
		send(errorPayload(nil, err))
		return false
	}
	if err != nil {
		w.log.Warn("worker: request failed", "coordinator", coord, "kind", p[0], "err", err)
		out = errorPayload(w.out[:0], err)
	}
	w.out = out
	return send(out)
}

// offered is the memory the worker offers for a shard.
func (w *Worker) offered(f dist.NodeFacts) int64 {
	mem := int64(f.MemUsable)
	if mem < 0 {
		mem = 0
	}
	if w.cfg.MemLimit > 0 && (mem == 0 || w.cfg.MemLimit < mem) {
		mem = w.cfg.MemLimit
	}
	return mem
}

func (w *Worker) info() *infoMsg {
	f := dist.LocalFacts()
	m := &infoMsg{Facts: f, Mem: w.offered(f), Threads: w.cfg.Threads}
	m.DataAddr = w.data.Addr().String()
	if w.cur != nil {
		m.Loaded = w.cur.key.sha
		if w.cfg.MemLimit == 0 {
			m.Mem += w.cur.weights // freed or reused by the next Load
		}
	}
	return m
}

// loadWithProgress runs the load while telling the coordinator how it goes.
func (w *Worker) loadWithProgress(m *loadMsg, send func([]byte) bool) error {
	w.setStatus(func(s *WorkerStatus) { s.Loading = true })
	defer w.setStatus(func(s *WorkerStatus) { s.Loading = false })
	return w.withProgress(send, func(stage func(string)) error { return w.load(m, stage) })
}

// withProgress runs a long request while telling the coordinator how it
// goes every second, so that it is not mistaken for a hung worker.
func (w *Worker) withProgress(send func([]byte) bool, run func(stage func(string)) error) error {
	done := make(chan error, 1)
	var stage syncString
	stage.set("starting")
	go func() { done <- run(stage.set) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if !w.quiet.Load() {
				send(append([]byte{kindProgress}, stage.get()...))
			}
		}
	}
}

type syncString struct {
	mu sync.Mutex
	s  string
}

func (s *syncString) set(v string) { s.mu.Lock(); s.s = v; s.mu.Unlock() }
func (s *syncString) get() string  { s.mu.Lock(); defer s.mu.Unlock(); return s.s }

// findModel finds the local copy of the model: at the path the coordinator
// gave, else by file name under --models-dir, identified by SHA-256.
func (w *Worker) findModel(m *loadMsg) (string, error) {
	var cands []string
	if m.Path != "" {
		cands = append(cands, m.Path)
	}
	if w.cfg.ModelsDir != "" && m.Path != "" {
		cands = append(cands, filepath.Join(w.cfg.ModelsDir, filepath.Base(m.Path)))
	}
	var tried []string
	for _, p := range cands {
		fi, err := os.Stat(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, errors.Unwrap(err)))
			continue
		}
		if fi.Size() != m.Size {
			tried = append(tried, fmt.Sprintf("%s: %d bytes, want %d", p, fi.Size(), m.Size))
			continue
		}
		sum, _, err := w.hashes.SHA256(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		if sum != m.SHA256 {
			tried = append(tried, fmt.Sprintf("%s: SHA-256 %s…, want %s…", p, sum[:12], m.SHA256[:min(12, len(m.SHA256))]))
			continue
		}
		return p, nil
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("no local copy of model %s: the coordinator named no path and no --models-dir is set", m.SHA256)
	}
	return "", fmt.Errorf("no local copy of model %s (tried %v); copy the file to this node (same path, or under --models-dir)", m.SHA256, tried)
}

// key identifies the shard m loads: the same key reuses the weights.
func (m *loadMsg) key() loadKey {
	return loadKey{sha: m.SHA256, shard: fmt.Sprintf("%+v", m.Shard), rank: m.Rank, world: m.World, tp: m.TP, pp: m.PP, maxBatch: m.MaxBatch}
}

// source says where the weights of load m would come from, deciding as
// load does, in its order (braid plan asks this before anything is
// loaded): the shard it holds now, its copy at m's path or under
// --models-dir, its hub cache, a pull from the hub (which it asks whether
// it answers), a shard file, else the coordinator's stream. It may hash
// its copy (once; the hash is cached for the load) and asks the hub for
// the model's file list, but fetches, writes and frees nothing.
func (w *Worker) source(m *loadMsg, stage func(string)) *sourceMsg {
	if w.cur != nil && w.cur.key == m.key() {
		return &sourceMsg{Action: SourceRead, From: fromLoaded, Path: w.cur.path}
	}
	stage("looking for the model at " + m.Path)
	path, err := w.findModel(m)
	if err == nil {
		from := fromPath
		if path != m.Path {
			from = fromModelsDir
		}
		return &sourceMsg{Action: SourceRead, From: from, Path: path}
	}
	why := []string{"no copy at " + m.Path}
	if w.cfg.ModelsDir != "" {
		why[0] += " nor under --models-dir " + w.cfg.ModelsDir
	}
	shardPath, _, shard := w.findShard(m)
	if m.Hub != nil {
		src, herr := w.hubSource(m, !shard, stage)
		if src != nil {
			return src
		}
		why = append(why, herr)
	}
	if shard {
		from := fromShardFile
		if filepath.Dir(shardPath) == filepath.Clean(w.shardDir()) {
			from = fromShardCache
		}
		return &sourceMsg{Action: SourceRead, From: from, Path: shardPath}
	}
	if !m.Stream {
		return &sourceMsg{Why: strings.Join(why, "; ") + "; and the coordinator does not stream"}
	}
	return &sourceMsg{Action: SourceReceive, Why: strings.Join(why, "; ")}
}

// load makes this worker hold the shard m asks for. The same model and
// shard as now reuses the weights (and its KV cache, emptied); anything else
// frees them first. A shard that does not fit is refused before anything
// is allocated.
func (w *Worker) load(m *loadMsg, stage func(string)) error {
	if m.World < 2 || m.Rank < 1 || m.Rank >= m.World || m.TP < 1 || m.PP < 1 || m.TP*m.PP != m.World {
		return fmt.Errorf("%w: load for rank %d of %d as %dx%d", wire.ErrMalformed, m.Rank, m.World, m.TP, m.PP)
	}
	if m.Positions < 1 || m.Positions > 1<<26 || m.MaxBatch < 1 || m.MaxBatch > 1<<20 || m.Ctx < 1 {
		return fmt.Errorf("%w: load with %d positions, context %d, batch %d", wire.ErrMalformed, m.Positions, m.Ctx, m.MaxBatch)
	}
	w.closeMesh()
	key := m.key()
	if w.cur != nil && w.cur.key == key {
		stage("reusing the loaded shard")
		if err := w.cur.r.emptyCache(m.cacheSize()); err != nil {
			return err
		}
		w.log.Info("worker: reusing the loaded shard", "model", w.cur.path, "rank", m.Rank, "shard", w.cur.r.sh.String())
		return nil
	}
	w.unload()
	stage("finding the model")
	path, err := w.findModel(m)
	if err != nil && m.Hub != nil {
		// The model by its hub name: in this node's hub cache, else
		// pulled there (unless a shard file is here already).
		_, _, shard := w.findShard(m)
		if p, herr := w.fromHub(m, !shard, stage); herr == nil {
			path, err = p, nil
		} else {
			w.log.Info("worker: the model is not at the coordinator's path nor from the hub", "hub", herr)
		}
	}
	if err != nil {
		// No copy of the model: a shard file of this shard, or the
		// coordinator's stream.
		if p, where, ok := w.findShard(m); ok {
			w.log.Info("worker: loading the shard from "+where, "path", p)
			path, err = p, nil
		} else if m.Stream {
			w.log.Info("worker: no local copy of the model; asking the coordinator for the slices", "why", err)
			if path, err = w.receiveShard(m, stage); err != nil {
				return err
			}
		} else {
			return err
		}
	}
	stage("opening " + path)
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	c, err := model.ReadConfig(f)
	if err != nil {
		return err
	}
	sh := m.Shard
	sh.Notes = nil
	if err := sh.Validate(c); err != nil {
		return fmt.Errorf("rank %d: the plan's shard does not fit this model: %w", m.Rank, err)
	}
	weights, err := model.WeightBytes(f, c, &sh)
	if err != nil {
		return err
	}
	kv := model.KVBytes(model.CacheConfig(c, &sh, m.cacheSize()))
	scratch := model.ScratchBytes(c, &sh, m.MaxBatch, w.cfg.Threads, m.Ctx)
	facts := dist.LocalFacts()
	if mem := w.offered(facts); mem > 0 && weights+kv+scratch > mem {
		return fmt.Errorf("rank %d does not fit: needs %s (weights %s, KV cache %s, scratch %s) but offers %s",
			m.Rank, plan.Bytes(weights+kv+scratch), plan.Bytes(weights), plan.Bytes(kv), plan.Bytes(scratch), plan.Bytes(mem))
	}
	lf := plan.LoadFacts{File: f.Bytes(), Weights: weights, Other: kv + scratch, Usable: w.offered(facts), InMemoryFS: sysinfo.InMemoryFS(path)}
	load := plan.ChooseLoad(w.cfg.LoadMode, w.cfg.LoadAuto, lf)
	if need := lf.Need(load.Mode); lf.Usable > 0 && need > lf.Usable {
		return fmt.Errorf("rank %d does not fit with --load-mode %s: needs %s (a copy of the file, %s; KV cache and scratch %s) but offers %s",
			m.Rank, load.Mode, plan.Bytes(need), plan.Bytes(lf.File), plan.Bytes(lf.Other), plan.Bytes(lf.Usable))
	}
	stage("holding weights: " + load.Mode.String())
	if err := f.SetMode(gguf.LoadOptions{Mode: load.Mode}); err != nil {
		return fmt.Errorf("rank %d: %w", m.Rank, err)
	}
	w.log.Info("worker: weights", "mode", load.Mode.String(), "why", load.Reason)
	stage("binding weights")
	pool := kernels.NewPool(w.cfg.Threads)
	r := &rank{cfg: c, sh: sh, world: m.World, tp: m.TP, pp: m.PP}
	r.comm, r.stage = newRankLinks(&sh, m.World, m.TP, m.PP)
	opt := model.Options{MaxBatch: m.MaxBatch, Comm: r.comm, Shard: &sh}
	if r.stage != nil {
		opt.Stage = r.stage
	}
	mod, err := model.New(f, pool, opt)
	if err != nil {
		pool.Close()
		return fmt.Errorf("rank %d: binding %s: %w", m.Rank, sh.String(), err)
	}
	r.m = mod
	r.cfg = &mod.Cfg
	w.log.Info("worker: layout", "rank", m.Rank, "repack", mod.Repacked().String())
	if err = r.emptyCache(m.cacheSize()); err != nil {
		pool.Close()
		return err
	}
	ok = true
	w.cur = &holding{key: key, path: path, file: f, pool: pool, r: r, weights: weights + kv + scratch}
	w.setStatus(func(s *WorkerStatus) { s.Rank, s.World, s.Model = m.Rank, m.World, path })
	w.log.Info("worker: loaded", "model", path, "rank", m.Rank, "shard", sh.String(), "weights", plan.Bytes(weights), "kv", plan.Bytes(kv))
	return nil
}

// connect joins the data-plane mesh of the loaded plan.
func (w *Worker) connect(ctx context.Context, m *connectMsg) error {
	if w.cur == nil {
		return errors.New("no model loaded: Load comes before Connect")
	}
	w.closeMesh()
	k := w.cur.key
	if len(m.Addrs) != k.world {
		return fmt.Errorf("%w: connect with %d addresses for %d ranks", wire.ErrMalformed, len(m.Addrs), k.world)
	}
	timeout := time.Duration(m.TimeoutMS) * time.Millisecond
	if timeout <= 0 || timeout > time.Hour {
		timeout = w.cfg.Timeout
	}
	spin := w.cfg.Spin
	if m.SpinUS != 0 {
		spin = time.Duration(m.SpinUS) * time.Microsecond
	}
	tr, err := dist.Connect(ctx, dist.MeshConfig{Rank: k.rank, Addrs: m.Addrs, Listener: w.data, Secret: w.cfg.Secret, TLS: w.cfg.TLS, Resolver: w.cfg.Resolver,
		Stripes: max(m.Stripes, 1), Timeout: timeout, ConnectTimeout: 2 * timeout, Spin: spin, Build: w.cfg.Build, Logger: w.log,
		Shm: dist.ShmDefault()})
	if err != nil {
		return err
	}
	w.mesh = tr
	w.cur.r.attach(tr, k.rank)
	return nil
}

func (w *Worker) closeMesh() {
	if w.mesh != nil {
		w.mesh.Close()
		w.mesh = nil
	}
	if w.cur != nil {
		w.cur.r.attach(nil, 0)
	}
}

// runStep runs one Step on the shard and encodes the result.
func (w *Worker) runStep() ([]byte, error) {
	if w.cur == nil {
		return nil, errors.New("no model loaded")
	}
	if w.mesh == nil {
		return nil, errors.New("not connected to the other ranks (a step failed before, or Connect was not sent)")
	}
	r, s := w.cur.r, &w.step
	if s.Exact > 0 {
		// A verification step: its tokens are computed as one-token
		// steps compute them, as on the coordinator (Cluster.SetExactColumns).
		w.cur.pool.SetExactColumns(s.Exact)
		w.exactSteps.Add(1)
	}
	d, err := r.run(s.Step, s.Ops, &s.Batch, s.Parts, s.Hidden)
	if s.Exact > 0 {
		w.cur.pool.SetExactColumns(0)
	}
	if err != nil {
		// The mesh is broken after any failure; the coordinator re-forms.
		w.closeMesh()
		return nil, fmt.Errorf("rank %d: step %d: %w", w.cur.key.rank, s.Step, err)
	}
	r.result(&w.res, s.Batch.Outputs(), s.Full, s.TopK)
	ar, st := r.waits()
	w.res.Compute, w.res.Reduce, w.res.Stage = uint64(d), uint64(ar), uint64(st)
	return appendResult(w.out[:0], &w.res), nil
}

// unload frees the shard and returns its memory to the system.
func (w *Worker) unload() {
	w.closeMesh()
	if w.cur == nil {
		return
	}
	w.log.Info("worker: unloading", "model", w.cur.path)
	w.setStatus(func(s *WorkerStatus) { s.Rank, s.World, s.Model = 0, 0, "" })
	w.cur.pool.Close()
	w.cur.file.Close()
	w.cur = nil
	w.step = stepMsg{}
	w.res = result{}
	w.out = nil
	runtime.GC()
	debug.FreeOSMemory()
}
