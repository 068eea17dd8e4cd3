package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"braid/internal/cluster"
	"braid/internal/dist"
)

func init() {
	register("netbench", "measure the links between ranks: latency, bandwidth, all-reduce sweep", runNetbench)
}

func runNetbench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("netbench", "(--workers HOST:PORT,... | --cluster FILE | --local N | --rank R --addrs ADDR0,ADDR1,... [--listen ADDR]) [flags]", stderr)
	var cf clusterFlags
	cf.register(fs)
	local := fs.Int("local", 0, "start `N` ranks in this process, joined over loopback TCP")
	inproc := fs.Bool("inproc", false, "with --local: use the in-process transport instead of TCP (software overhead only)")
	rank := fs.Int("rank", -1, "this process's rank, for a run across processes or machines (rank 0 prints the report)")
	addrs := fs.String("addrs", "", "comma-separated address at which this rank reaches each rank, in rank order (own entry ignored)")
	listen := fs.String("listen", "", "address this rank listens on for lower ranks (default: the port of its --addrs entry on all interfaces)")
	stripes := fs.Int("stripes", 1, "TCP connections per pair; messages of 1 MiB and more are striped over them")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	minBytes := fs.String("min-bytes", "1K", "smallest all-reduce size")
	maxBytes := fs.String("max-bytes", "64M", "largest all-reduce size (the sweep doubles from --min-bytes)")
	algos := fs.String("algos", "oneshot,twoshot,ring", "all-reduce algorithms to sweep")
	pingIters := fs.Int("ping-iters", 2000, "ping-pong round trips per pair")
	bwBytes := fs.String("bw-bytes", "16M", "message size for the per-pair bandwidth test")
	budget := fs.String("budget", "512M", "bytes all-reduced per size and algorithm (sets the iterations, 3..200)")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline of every wait")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	cfg := dist.NetbenchConfig{PingIters: *pingIters}
	var err error
	for _, s := range []struct {
		name string
		v    string
		dst  *int
	}{{"--min-bytes", *minBytes, &cfg.MinBytes}, {"--max-bytes", *maxBytes, &cfg.MaxBytes}, {"--bw-bytes", *bwBytes, &cfg.BWBytes}, {"--budget", *budget, &cfg.SweepBudget}} {
		if *s.dst, err = parseSize(s.v); err != nil {
			return usagef("%s: %v", s.name, err)
		}
	}
	if cfg.MinBytes < 4 || cfg.MaxBytes < cfg.MinBytes || cfg.MaxBytes > 1<<30 {
		return usagef("--min-bytes %d, --max-bytes %d: want 4 <= min <= max <= 1G", cfg.MinBytes, cfg.MaxBytes)
	}
	for _, a := range strings.Split(*algos, ",") {
		al, err := dist.ParseAlgo(strings.TrimSpace(a))
		if err != nil || al == dist.Auto {
			return usagef("--algos: %q is not one of oneshot, twoshot, ring", a)
		}
		cfg.Algos = append(cfg.Algos, al)
	}
	secret, err := dist.LoadSecret(cf.secretFile)
	if err != nil {
		return err
	}
	tlsCfg, err := dist.LoadTLSDir(cf.tlsDir)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var rep *dist.NetbenchReport
	switch {
	case cf.active() && (*local > 0 || *rank >= 0):
		return usagef("--workers/--cluster, --local and --rank exclude each other")
	case cf.active():
		// This node is rank 0, the workers follow in their order, over the
		// data plane a model would use (the same addresses per pair).
		ccfg, err := cf.config("-")
		if err != nil {
			return err
		}
		ccfg.Stripes, ccfg.Timeout, ccfg.Logger = *stripes, *timeout, log
		rep, err = cluster.Netbench(ctx, ccfg, cfg)
		if err != nil {
			return err
		}
	case *local > 0 && *rank >= 0:
		return usagef("--local and --rank exclude each other")
	case *local > 0:
		if *local > 64 {
			return usagef("--local %d: at most 64 ranks in one process", *local)
		}
		spin := spinSetting(cf.spin)
		if procs := runtime.GOMAXPROCS(0); *local > procs && !given(fs, "net-spin") {
			// The ranks share this process's procs: a rank that polls
			// holds one that another rank needs to send what it waits for
			// (3 ranks on 2: every all-reduce took the whole 500 µs spin).
			spin = -1
			fmt.Fprintf(stderr, "netbench: %d ranks on %d CPUs in one process: receives do not poll (--net-spin to make them)\n", *local, procs)
		}
		rep, err = netbenchLocal(ctx, *local, *inproc, dist.MeshConfig{Secret: secret, TLS: tlsCfg, Stripes: *stripes, Timeout: *timeout, Spin: spin, Logger: log}, cfg)
	case *rank >= 0:
		list := strings.Split(*addrs, ",")
		if *addrs == "" || *rank >= len(list) {
			return usagef("--rank %d needs --addrs with at least %d entries", *rank, *rank+1)
		}
		mc := dist.MeshConfig{Rank: *rank, Addrs: list, Listen: *listen, Secret: secret, TLS: tlsCfg, Stripes: *stripes, Timeout: *timeout, Spin: spinSetting(cf.spin), Logger: log}
		if mc.Listen == "" && *rank > 0 {
			_, port, err := net.SplitHostPort(list[*rank])
			if err != nil {
				return usagef("--addrs entry %d %q: %v", *rank, list[*rank], err)
			}
			mc.Listen = ":" + port
		}
		tr, err := dist.Connect(ctx, mc)
		if err != nil {
			return err
		}
		defer tr.Close()
		rep, err = dist.Netbench(ctx, dist.NewComm(tr), cfg)
		if err != nil {
			return err
		}
		if *rank != 0 {
			fmt.Fprintln(stderr, "netbench: done; rank 0 prints the report")
			return nil
		}
	default:
		return usagef("say --local N, or --rank R with --addrs (braid worker support comes with the worker)")
	}
	if err != nil {
		return err
	}
	if *jsonOut {
		b, err := rep.JSON()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	rep.WriteTable(stdout)
	return nil
}

// netbenchLocal runs n ranks in this process.
func netbenchLocal(ctx context.Context, n int, inproc bool, mc dist.MeshConfig, cfg dist.NetbenchConfig) (*dist.NetbenchReport, error) {
	ts := make([]dist.Transport, n)
	defer func() {
		for _, t := range ts {
			if t != nil {
				t.Close()
			}
		}
	}()
	if inproc {
		rs, err := dist.NewInProc(n, mc.Timeout)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			ts[i] = r
		}
	} else {
		addrs := make([]string, n)
		lns := make([]net.Listener, n)
		for i := range n {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			defer ln.Close()
			lns[i], addrs[i] = ln, ln.Addr().String()
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			c := mc
			c.Rank, c.Addrs, c.Listener = r, addrs, lns[r]
			wg.Go(func() {
				t, err := dist.Connect(ctx, c)
				if err == nil {
					ts[r] = t
				}
				errs[r] = err
			})
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("rank %d: %w", r, err)
			}
		}
	}
	reps := make([]*dist.NetbenchReport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			reps[r], errs[r] = dist.Netbench(ctx, dist.NewComm(ts[r]), cfg)
			if errs[r] != nil {
				ts[r].Close() // the others then fail at once instead of at their deadline
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return reps[0], nil
}

// parseSize reads a byte count with an optional K, M or G suffix (binary).
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > (1<<31)/mult {
		return 0, fmt.Errorf("%q is not a size like 4096, 64K, 16M or 1G", s)
	}
	return v * mult, nil
}
