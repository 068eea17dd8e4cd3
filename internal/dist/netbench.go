package dist

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"braid/internal/dist/wire"
)

// NetbenchConfig says what Netbench measures. Every rank must use the same
// configuration: the iteration counts decide the message sequence.
type NetbenchConfig struct {
	PingBytes int // ping-pong message size (default 64)
	PingIters int // round trips per pair (default 1000)
	BWBytes   int // per-pair bandwidth message size (default 16 MiB)
	BWIters   int // messages per pair for bandwidth (default 8)
	MinBytes  int // all-reduce sweep from MinBytes (default 1 KiB) ...
	MaxBytes  int // ... doubling up to MaxBytes (default 64 MiB)
	Algos     []Algo
	// SweepBudget is the bytes all-reduced per size and algorithm (the
	// iterations are SweepBudget/size, at least 3 and at most 200).
	SweepBudget int
}

func (c *NetbenchConfig) normalize() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.PingBytes, 64)
	def(&c.PingIters, 1000)
	def(&c.BWBytes, 16<<20)
	def(&c.BWIters, 8)
	def(&c.MinBytes, 1<<10)
	def(&c.MaxBytes, 64<<20)
	def(&c.SweepBudget, 512<<20)
	if len(c.Algos) == 0 {
		c.Algos = Algos()
	}
}

// PairResult is one pair's point-to-point figures.
type PairResult struct {
	A, B    int    // ranks; A drives the measurement
	Addr    string // the address A reaches B at
	P50     time.Duration
	P99     time.Duration // one-way latency: half the round trip
	BWBytes int
	GBps    float64 // streaming bandwidth A -> B, 1e9 bytes/s
}

// SweepResult is one all-reduce size and algorithm.
type SweepResult struct {
	Bytes int
	Algo  Algo
	Iters int
	Time  time.Duration // per all-reduce: the mean over iterations, the slowest rank
	AlgBW float64       // bytes / time, GB/s (1e9), as nccl-tests
	BusBW float64       // AlgBW * 2(n-1)/n: what each link carried
}

// NetbenchReport is what Netbench returns on rank 0.
type NetbenchReport struct {
	Transport string
	Ranks     int
	Stripes   int
	Pairs     []PairResult
	Sweep     []SweepResult
	// OneShotMax is the one-shot threshold that fits the sweep best: a
	// fastest algorithm: a measured value for Comm.OneShotMax, and Large
	// the algorithm to use above it (see crossover).
	OneShotMax int
	Large      Algo
}

// Netbench measures the ranks of c: per pair latency and bandwidth, then an
// all-reduce sweep. Every rank calls it; rank 0 gets the report, the others
// nil. ctx is checked between measurements.
func Netbench(ctx context.Context, c *Comm, cfg NetbenchConfig) (*NetbenchReport, error) {
	cfg.normalize()
	n, me := c.Size(), c.Rank()
	rep := &NetbenchReport{Transport: c.t.Kind(), Ranks: n}
	if n > 1 {
		rep.Stripes = c.t.Peer((me + 1) % n).Conns
	}
	ping := make([]byte, cfg.PingBytes)
	big := make([]byte, cfg.BWBytes)
	lat := make([]time.Duration, cfg.PingIters)
	var resBuf [16]byte
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			switch me {
			case a:
				for i := range lat {
					start := time.Now()
					if err := c.t.Send(b, c.sendTag(b, wire.OpBench), ping); err != nil {
						return nil, err
					}
					if _, err := c.t.Recv(b, c.recvTag(b, wire.OpBench)); err != nil {
						return nil, err
					}
					lat[i] = time.Since(start) / 2
				}
				start := time.Now()
				for range cfg.BWIters {
					if err := c.t.Send(b, c.sendTag(b, wire.OpBench), big); err != nil {
						return nil, err
					}
				}
				if _, err := c.t.Recv(b, c.recvTag(b, wire.OpBench)); err != nil {
					return nil, err
				}
				el := time.Since(start)
				slices.Sort(lat)
				pr := PairResult{A: a, B: b, Addr: c.t.Peer(b).Addr, P50: lat[len(lat)/2], P99: lat[len(lat)*99/100],
					BWBytes: cfg.BWBytes, GBps: float64(cfg.BWBytes*cfg.BWIters) / el.Seconds() / 1e9}
				// Rank 0 collects every pair's figures.
				if a == 0 {
					rep.Pairs = append(rep.Pairs, pr)
				} else {
					binary.LittleEndian.PutUint64(resBuf[0:], uint64(pr.P50))
					binary.LittleEndian.PutUint64(resBuf[8:], uint64(pr.P99))
					msg := append(resBuf[:], []byte(fmt.Sprintf("%g %s", pr.GBps, pr.Addr))...)
					if err := c.t.Send(0, c.sendTag(0, wire.OpBench), msg); err != nil {
						return nil, err
					}
				}
			case b:
				for range cfg.PingIters {
					if _, err := c.t.Recv(a, c.recvTag(a, wire.OpBench)); err != nil {
						return nil, err
					}
					if err := c.t.Send(a, c.sendTag(a, wire.OpBench), ping); err != nil {
						return nil, err
					}
				}
				for range cfg.BWIters {
					if _, err := c.t.Recv(a, c.recvTag(a, wire.OpBench)); err != nil {
						return nil, err
					}
				}
				if err := c.t.Send(a, c.sendTag(a, wire.OpBench), ping[:1]); err != nil {
					return nil, err
				}
			}
			if me == 0 && a != 0 {
				m, err := c.t.Recv(a, c.recvTag(a, wire.OpBench))
				if err != nil {
					return nil, err
				}
				pr := PairResult{A: a, B: b, BWBytes: cfg.BWBytes}
				if len(m) < 16 {
					return nil, fmt.Errorf("dist: netbench: rank %d sent a %d-byte pair result", a, len(m))
				}
				pr.P50 = time.Duration(binary.LittleEndian.Uint64(m[0:]))
				pr.P99 = time.Duration(binary.LittleEndian.Uint64(m[8:]))
				if _, err := fmt.Sscanf(string(m[16:]), "%g %s", &pr.GBps, &pr.Addr); err != nil {
					return nil, fmt.Errorf("dist: netbench: rank %d's pair result: %v", a, err)
				}
				rep.Pairs = append(rep.Pairs, pr)
			}
			if err := c.Barrier(); err != nil {
				return nil, err
			}
		}
	}

	x := make([]float32, cfg.MaxBytes/4)
	for i := range x {
		x[i] = float32(me + 1)
	}
	var times [1]float32
	for size := cfg.MinBytes; size <= cfg.MaxBytes; size *= 2 {
		for _, algo := range cfg.Algos {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			v := x[:size/4]
			iters := min(200, max(3, cfg.SweepBudget/size))
			if err := c.AllReduce(v, algo); err != nil { // warm-up: buffers grow
				return nil, err
			}
			if err := c.Barrier(); err != nil {
				return nil, err
			}
			start := time.Now()
			for range iters {
				if err := c.AllReduce(v, algo); err != nil {
					return nil, err
				}
			}
			times[0] = float32(time.Since(start).Seconds() / float64(iters))
			if err := c.AllReduceMax(times[:]); err != nil {
				return nil, err
			}
			t := time.Duration(float64(times[0]) * 1e9)
			alg := float64(size) / float64(times[0]) / 1e9
			rep.Sweep = append(rep.Sweep, SweepResult{Bytes: size, Algo: algo, Iters: iters, Time: t, AlgBW: alg,
				BusBW: alg * 2 * float64(n-1) / float64(n)})
			// Values grow with every sum; keep them small and exact.
			for i := range v {
				v[i] = float32(me + 1)
			}
		}
	}
	rep.OneShotMax, rep.Large = crossover(rep.Sweep)
	if me != 0 {
		return nil, nil
	}
	return rep, nil
}

// crossover picks the one-shot threshold from a sweep: the size T (one-shot
// up to T, the best other algorithm above) that minimizes the summed
// slowdown against the fastest algorithm at each size. Summing over all
// sizes keeps one noisy point (a shared machine) from moving the threshold.
func crossover(sweep []SweepResult) (oneShotMax int, large Algo) {
	times := map[int]map[Algo]time.Duration{}
	var sizes []int
	for _, s := range sweep {
		if times[s.Bytes] == nil {
			times[s.Bytes] = map[Algo]time.Duration{}
			sizes = append(sizes, s.Bytes)
		}
		times[s.Bytes][s.Algo] = s.Time
	}
	slices.Sort(sizes)
	rel := func(b int, a Algo) float64 {
		t, ok := times[b][a]
		if !ok {
			return math.Inf(1)
		}
		best := t
		for _, u := range times[b] {
			best = min(best, u)
		}
		return float64(t) / float64(best)
	}
	bestCost := math.Inf(1)
	large = TwoShot
	for _, l := range []Algo{TwoShot, Ring} {
		for i := -1; i < len(sizes); i++ { // one-shot for sizes[:i+1]
			cost := 0.0
			for j, b := range sizes {
				if j <= i {
					cost += rel(b, OneShot)
				} else {
					cost += rel(b, l)
				}
			}
			if cost < bestCost {
				bestCost, large, oneShotMax = cost, l, 0
				if i >= 0 {
					oneShotMax = sizes[i]
				}
			}
		}
	}
	return oneShotMax, large
}

// Barrier returns when every rank has called it (a one-float all-reduce).
func (c *Comm) Barrier() error {
	var one [1]float32
	return c.AllReduce(one[:], OneShot)
}

// AllReduceMax replaces x by the element-wise maximum over all ranks (a
// small, one-shot helper for reports: e.g. the slowest rank's time).
func (c *Comm) AllReduceMax(x []float32) error {
	if c.err != nil || c.size == 1 {
		return c.err
	}
	b := bytesOf(x)
	for i := 1; i < c.size; i++ {
		p := (c.rank + i) % c.size
		if err := c.t.Send(p, c.sendTag(p, wire.OpBench), b); err != nil {
			return c.fail(err)
		}
	}
	for i := 1; i < c.size; i++ {
		p := (c.rank + i) % c.size
		v, err := c.recvFloats(p, wire.OpBench, len(x))
		if err != nil {
			return c.fail(err)
		}
		for j := range x {
			x[j] = float32(math.Max(float64(x[j]), float64(v[j])))
		}
	}
	return nil
}

// WriteTable prints the report as tables, nccl-tests style.
func (r *NetbenchReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "transport %s, %d ranks", r.Transport, r.Ranks)
	if r.Stripes > 1 {
		fmt.Fprintf(w, ", %d connections per pair", r.Stripes)
	}
	fmt.Fprintln(w)
	if len(r.Pairs) > 0 {
		fmt.Fprintf(w, "\npoint to point (latency is one way: half the round trip)\n")
		fmt.Fprintf(w, "%-6s %-24s %12s %12s %14s\n", "pair", "address", "lat p50", "lat p99", "bandwidth")
		for _, p := range r.Pairs {
			fmt.Fprintf(w, "%-6s %-24s %12s %12s %9.2f GB/s\n", fmt.Sprintf("%d-%d", p.A, p.B), p.Addr,
				fmtDur(p.P50), fmtDur(p.P99), p.GBps)
		}
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintf(w, "\nall-reduce (float32 sum; time per call on the slowest rank; GB = 1e9 bytes)\n")
		fmt.Fprintf(w, "%12s %-8s %6s %12s %12s %12s\n", "bytes", "algo", "iters", "time", "algbw GB/s", "busbw GB/s")
		for _, s := range r.Sweep {
			fmt.Fprintf(w, "%12d %-8s %6d %12s %12.3f %12.3f\n", s.Bytes, s.Algo, s.Iters, fmtDur(s.Time), s.AlgBW, s.BusBW)
		}
		fmt.Fprintf(w, "\nbest fit: one-shot up to %d bytes, %s above (Comm.OneShotMax, Comm.Large)\n", r.OneShotMax, r.Large)
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// JSON writes the report with durations in nanoseconds and algorithms by name.
func (r *NetbenchReport) JSON() ([]byte, error) {
	type pair struct {
		A, B    int
		Addr    string
		P50Ns   int64   `json:"p50_ns"`
		P99Ns   int64   `json:"p99_ns"`
		BWBytes int     `json:"bw_bytes"`
		GBps    float64 `json:"gbps"`
	}
	type sweep struct {
		Bytes  int     `json:"bytes"`
		Algo   string  `json:"algo"`
		Iters  int     `json:"iters"`
		TimeNs int64   `json:"time_ns"`
		AlgBW  float64 `json:"algbw_gbps"`
		BusBW  float64 `json:"busbw_gbps"`
	}
	out := struct {
		Transport  string  `json:"transport"`
		Ranks      int     `json:"ranks"`
		Stripes    int     `json:"stripes"`
		Pairs      []pair  `json:"pairs"`
		Sweep      []sweep `json:"allreduce"`
		OneShotMax int     `json:"oneshot_max_bytes"`
		Large      string  `json:"large_algo"`
	}{Transport: r.Transport, Ranks: r.Ranks, Stripes: r.Stripes, OneShotMax: r.OneShotMax, Large: r.Large.String()}
	for _, p := range r.Pairs {
		out.Pairs = append(out.Pairs, pair{p.A, p.B, p.Addr, int64(p.P50), int64(p.P99), p.BWBytes, p.GBps})
	}
	for _, s := range r.Sweep {
		out.Sweep = append(out.Sweep, sweep{s.Bytes, s.Algo.String(), s.Iters, int64(s.Time), s.AlgBW, s.BusBW})
	}
	return json.MarshalIndent(out, "", "  ")
}
