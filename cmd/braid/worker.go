package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"braid/internal/cluster"
	"braid/internal/discover"
	"braid/internal/dist"
	"braid/internal/plan"
)

func init() {
	register("worker", "serve a coordinator: hold a shard of a model and run its steps", runWorker)
}

func runWorker(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("worker", "--listen HOST:PORT [--health-listen HOST:PORT] [--secret-file F] [--tls-dir DIR] [-t THREADS] [--mem-limit BYTES] [--models-dir DIR] [--no-pull]", stderr)
	listen := fs.String("listen", "", "control address coordinators connect to, e.g. :7000 (port 0 picks one; the address is printed)")
	healthListen := fs.String("health-listen", "", "address of a small HTTP listener for probes, e.g. :7001: GET /health (200 while the worker serves: session, rank, model) and /ready (200 until it is stopping); it never touches a coordinator's session")
	dataListen := fs.String("data-listen", "", "data-plane address the other ranks connect to (default: the --listen host, a free port)")
	secretFile := fs.String("secret-file", "", "file holding the cluster's shared secret (default: $BRAID_SECRET; none = loopback peers only)")
	tlsDir := fs.String("tls-dir", "", "mutual TLS with the coordinator and peers: a directory with ca.crt, node.crt and node.key (braid certs writes them; default: $BRAID_TLS_DIR; none = plain TCP)")
	threads := fs.Int("t", defaultThreads(), "threads")
	cpus := fs.String("cpus", "", cpusUsage)
	memLimit := fs.String("mem-limit", "", "most memory to offer for a shard, e.g. 24G (default: what the node has usable)")
	modelsDir := fs.String("models-dir", "", "directory searched for a model by file name when it is not at the coordinator's path")
	timeout := fs.Duration("timeout", dist.DefaultTimeout, "bound on every network wait")
	spin := fs.Duration("spin", dist.DefaultSpin, "how long to poll for the coordinator's next message before sleeping (0 = never; a coordinator's --net-spin governs the ranks' mesh)")
	noPull := fs.Bool("no-pull", false, "never download a model the coordinator names by hub repository (ORG/NAME:QUANT) into this node's hub cache; receive the shard instead")
	loadMode := fs.String("load-mode", "auto", plan.LoadModes+"; this node's choice, whatever the coordinator's")
	exitOnEOF := fs.Bool("exit-on-eof", false, "end when standard input closes (a parent that starts workers, like braid demo, passes a pipe so they end with it)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *listen == "" {
		return usagef("--listen HOST:PORT is required")
	}
	line, _, err := placeThreads(*cpus, threads, given(fs, "t", "threads"))
	if err != nil {
		return err
	}
	if line != "" {
		fmt.Fprintln(stderr, line)
	}
	if *threads < 1 {
		return usagef("-t %d: need at least one thread", *threads)
	}
	lmode, lauto, err := plan.ParseLoadMode(*loadMode)
	if err != nil {
		return usageError{err}
	}
	var mem int64
	if *memLimit != "" {
		v, err := parseBytes(*memLimit)
		if err != nil {
			return usagef("--mem-limit: %v", err)
		}
		mem = v
	}
	secret, err := dist.LoadSecret(*secretFile)
	if err != nil {
		return err
	}
	tlsCfg, err := dist.LoadTLSDir(*tlsDir)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if l, ok, err := discover.ReadLWS(os.LookupEnv); err != nil {
		return usageError{err}
	} else if ok {
		// The leader dials this pod by its LeaderWorkerSet hostname; the
		// index is this worker's rank.
		if err := l.CheckWorker(); err != nil {
			log.Warn("worker: LeaderWorkerSet environment", "err", err)
		} else {
			log.Info("worker: LeaderWorkerSet", "rank", l.Index, "leader", l.Leader, "group_size", l.Size)
		}
	}
	res, dnsServer, err := discover.ResolverFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	if res != nil {
		log.Info("worker: names resolve through "+discover.EnvDNSServer, "server", dnsServer)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	var hln net.Listener
	if *healthListen != "" {
		if hln, err = net.Listen("tcp", *healthListen); err != nil {
			ln.Close()
			return fmt.Errorf("--health-listen %s: %w", *healthListen, err)
		}
	}
	// A worker has no other work than its rank's (see limitProcs).
	defer limitProcs(*threads)()
	w, err := cluster.NewWorker(cluster.WorkerConfig{Secret: secret, TLS: tlsCfg, Threads: *threads, MemLimit: mem, ModelsDir: *modelsDir,
		DataListen: *dataListen, Timeout: *timeout, Spin: spinSetting(*spin), Logger: log, NoPull: *noPull,
		LoadMode: lmode, LoadAuto: lauto, Resolver: res}, ln.Addr())
	if err != nil {
		ln.Close()
		if hln != nil {
			hln.Close()
		}
		return err
	}
	health := ""
	if hln != nil {
		hs := &http.Server{Handler: w.HealthHandler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		served := make(chan struct{})
		go func() {
			defer close(served)
			hs.Serve(hln)
		}()
		// The probes answer until the worker has left (a probe during the
		// leaving sees /ready 503).
		defer func() {
			hs.Close()
			<-served
		}()
		health = ", health http://" + hln.Addr().String()
	}
	// The first line says where the worker listens (tests and scripts that
	// pass port 0 read it).
	fmt.Fprintf(stdout, "braid worker listening on %s (data %s%s)\n", ln.Addr(), w.DataAddr(), health)
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}
	log.Info("worker: between nodes: " + tlsCfg.Describe())
	if secret == nil && tlsCfg == nil {
		log.Warn("worker: no shared secret (--secret-file or BRAID_SECRET) and no --tls-dir: accepting loopback connections only")
	}
	// SIGTERM (an orchestrator's stop) or Ctrl-C: the worker answers the
	// request in progress, tells its coordinator it leaves and exits 0; a
	// second signal ends it at once.
	ctx, stop := interruptContext(func(format string, a ...any) { log.Info("worker: " + fmt.Sprintf(format, a...)) }, func(sig os.Signal) {
		w.SetLeaveReason(fmt.Sprintf("its worker is shutting down (%s)", signalName(sig)))
	})
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *exitOnEOF {
		// Stops with the pipe: when the parent ends, however it ends, the
		// kernel closes the write end and this read returns.
		go func() {
			io.Copy(io.Discard, os.Stdin)
			log.Info("worker: standard input closed (the parent ended); stopping")
			w.SetLeaveReason("its worker is shutting down (the process that started it ended)")
			cancel()
		}()
	}
	start := time.Now()
	err = w.Serve(ctx, ln)
	log.Info("worker: stopped", "uptime", time.Since(start).Round(time.Second))
	return err
}

// signalName is a signal as kill(1) names it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	}
	return sig.String()
}
