package perfmodel

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Link is one node's network link: the one-way latency of a small
// message (what `braid netbench` reports as p50: half a round trip,
// software included) and the streaming bandwidth.
type Link struct {
	BW  float64 // bytes/s
	Lat time.Duration
	// AR, when measured (a netbench sweep), is a small one-shot
	// all-reduce's time: more than one latency (every rank sends and
	// waits for every partial); 0 takes Lat.
	AR time.Duration `json:",omitempty"`
}

// ParseNetbench reads a `braid netbench --json` report: the link is its
// slowest pair (the highest p50 one-way latency, the lowest bandwidth) and
// its smallest one-shot all-reduce.
func ParseNetbench(data []byte) (Link, error) {
	var rep struct {
		Pairs []struct {
			P50  int64   `json:"p50_ns"`
			GBps float64 `json:"gbps"`
		} `json:"pairs"`
		Sweep []struct {
			Bytes int    `json:"bytes"`
			Algo  string `json:"algo"`
			Time  int64  `json:"time_ns"`
		} `json:"allreduce"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return Link{}, fmt.Errorf("netbench report: %w", err)
	}
	if len(rep.Pairs) == 0 {
		return Link{}, fmt.Errorf("netbench report: no pairs (a run of one rank?)")
	}
	l := Link{BW: math.Inf(1)}
	for i, p := range rep.Pairs {
		if p.P50 <= 0 || p.P50 > int64(time.Second) || !(p.GBps > 0) || p.GBps > 1e6 {
			return Link{}, fmt.Errorf("netbench report: pair %d: p50 %d ns, %g GB/s: want a latency under 1 s and a positive bandwidth", i, p.P50, p.GBps)
		}
		l.Lat = max(l.Lat, time.Duration(p.P50))
		l.BW = math.Min(l.BW, p.GBps*1e9)
	}
	small := 0
	for _, s := range rep.Sweep {
		if s.Algo == "oneshot" && s.Time > 0 && s.Time < int64(time.Second) && (small == 0 || s.Bytes < small) {
			small, l.AR = s.Bytes, time.Duration(s.Time)
		}
	}
	return l, nil
}

// Node is what the cost model knows about one node.
type Node struct {
	// Name is the preset (gb10, cpu, local) or "custom".
	Name string
	Mem  int64   // memory for the model, bytes (0: unknown)
	BW   float64 // memory read bandwidth, bytes/s
	// DecodeEff is the fraction of BW a decode step's weight streaming
	// reaches (kernels, cache misses, synchronisation between threads).
	DecodeEff float64
	// FLOPS is the matrix arithmetic rate of a batched (prefill) product.
	FLOPS float64
	Link  Link
	// Cal, for a calibrated node, has its measured rates per format; they
	// replace DecodeEff and FLOPS for the formats it has.
	Cal *Calibration
	// Source says where the figures come from.
	Source string
	// Host names the machine: ranks of one host share its memory
	// bandwidth and cores when they run at once (local ranks all share
	// this one). Threads is each rank's threads (a calibrated node's rate
	// at that count).
	Host    string
	Threads int
}

// rateAt is a calibrated rate per rank of share ranks of Threads threads
// running at once on this machine: the machine's rate at their threads
// (at most the calibrated count: beyond, the cores are oversubscribed),
// divided among them.
func (n *Node) rateAt(table []float64, share int) float64 {
	busy := max(n.Threads, 1) * max(share, 1)
	return table[min(busy, len(table))-1] / float64(max(share, 1))
}

// StreamRate is the bytes/s a decode product of format t streams at on
// one of share ranks running at once on this node's host.
func (n *Node) StreamRate(t string, share int) float64 {
	if n.Cal != nil {
		if r := n.Cal.Stream[t]; len(r) > 0 {
			// The scale first: a node at the calibrated bandwidth gets the
			// measured rate itself, not a product that rounds off it.
			return n.rateAt(r, share) * (n.BW / n.Cal.MemBW)
		}
	}
	return n.BW * n.DecodeEff / float64(max(share, 1))
}

// FlopRate is the flops/s of a batched product of format t, as StreamRate.
func (n *Node) FlopRate(t string, share int) float64 {
	if n.Cal != nil {
		if r := n.Cal.Flops[t]; len(r) > 0 {
			return n.rateAt(r, share) * (n.FLOPS / n.Cal.FLOPS)
		}
	}
	return n.FLOPS / float64(max(share, 1))
}

// GB10 is NVIDIA's DGX Spark node as the seeds describe it: 128 GB of
// unified LPDDR5x at 273 GB/s and a 200 Gb/s ConnectX-7 link. Its
// efficiency factors are stated here once and used for every model:
//
//   - DecodeEff 0.60: the one anchor taken from a published figure,
//     gpt-oss-120b MXFP4 at 46-48 tok/s decode on one GB10, whose 3.5 GB
//     read per token (internal/perfmodel/testdata/published.json) at 47
//     tok/s is 166 GB/s, 0.61 of 273. That figure is therefore not an
//     independent check of the model; the cluster figures are.
//   - FLOPS 17e12: llama.cpp's CUDA prefill of gpt-oss-120b on a DGX Spark
//     (pp2048 about 1700 tok/s, ggml-org's published DGX Spark table) at
//     2 x 5.1e9 active parameters a token; no figure of this project
//     fixes it.
//   - Mem 121 GiB: what the 128 GB leave to one process (the issue's
//     figure); Link 25 GB/s (200 Gb/s) at 20 us one way, a TCP message
//     over the direct cable (the example latency; not measured).
var GB10 = Node{Name: "gb10", Mem: 121 << 30, BW: 273e9, DecodeEff: 0.60, FLOPS: 17e12,
	Link: Link{BW: 25e9, Lat: 20 * time.Microsecond}, Source: "preset gb10 (DGX Spark: 128 GB LPDDR5x, 273 GB/s, 200 Gb/s ConnectX-7)"}

// CPU is a CPU server whose kernels behave like this node's: with a
// calibration its rates scale by the bandwidth given over the one
// measured; without one, DecodeEff 0.7 (what braid's Q4_K decode reaches
// of this machine's read bandwidth, docs/PERFORMANCE.md) and 5 flops per
// byte of bandwidth (this machine: about 200 GFLOP/s of Q4_K prefill on
// two cores over 40 GB/s). The memory and bandwidth must be given.
var CPU = Node{Name: "cpu", DecodeEff: 0.7, Link: Link{BW: 1.2e9, Lat: 60 * time.Microsecond}, Source: "preset cpu"}

// Presets are the named nodes of --nodes (besides local, this node as
// calibrated).
var Presets = map[string]Node{"gb10": GB10, "cpu": CPU}

var groupStart = regexp.MustCompile(`^\s*(?:(\d+)\s*x\s*)?"?([A-Za-z][A-Za-z0-9_-]*)(?::|"?\s*$)`)

// ParseNodes reads --nodes: groups separated by ';' or ',', each
// [Nx]NAME[:FIELD,...] where NAME is a preset (gb10, cpu) or local (this
// node as calibrated: local must be given) and the fields override it:
// a memory (121GiB, 64G), a bandwidth (273GB/s), link=BW@LATENCY
// (14GB/s@20us, 200Gb/s@5us), flops=RATE (17T, 500G) and eff=F (0 < F
// <= 1). A bad spec is refused naming the group and the field.
//
// local is this node as calibrated; when it is nil, noLocal says why
// (no calibration, a stale one) and a spec naming local is refused with it.
func ParseNodes(spec string, local *Node, noLocal string) ([]Node, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("--nodes: empty (want e.g. 3xgb10 or 2xcpu:64GiB,40GB/s,link=1.2GB/s@60us)")
	}
	var groups [][]string
	for _, semi := range strings.Split(spec, ";") {
		for _, tok := range strings.Split(semi, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				return nil, fmt.Errorf("--nodes %q: an empty field", spec)
			}
			if groupStart.MatchString(tok) || len(groups) == 0 {
				groups = append(groups, []string{tok})
			} else {
				groups[len(groups)-1] = append(groups[len(groups)-1], tok)
			}
		}
	}
	var out []Node
	for gi, g := range groups {
		head := g[0]
		m := groupStart.FindStringSubmatch(head)
		if m == nil {
			return nil, fmt.Errorf("--nodes group %d %q: want [Nx]NAME[:fields] with NAME one of %s", gi+1, head, presetNames())
		}
		count := 1
		if m[1] != "" {
			c, err := strconv.Atoi(m[1])
			if err != nil || c < 1 || c > 1024 {
				return nil, fmt.Errorf("--nodes group %d %q: count %q: want 1 to 1024 nodes", gi+1, head, m[1])
			}
			count = c
		}
		name := strings.ToLower(m[2])
		var n Node
		switch p, ok := Presets[name]; {
		case ok:
			n = p
		case name == "local":
			if local == nil {
				if noLocal == "" {
					noLocal = "this node is not calibrated (run braid plan --calibrate)"
				}
				return nil, fmt.Errorf("--nodes group %d: local: %s", gi+1, noLocal)
			}
			n = *local
		default:
			return nil, fmt.Errorf("--nodes group %d: unknown preset %q (known: %s)", gi+1, m[2], presetNames())
		}
		fields := g[1:]
		if rest := strings.Trim(head[len(m[0]):], `" `); rest != "" {
			fields = append([]string{rest}, fields...)
		}
		for _, f := range fields {
			if err := n.setField(strings.Trim(f, `" `)); err != nil {
				return nil, fmt.Errorf("--nodes group %d (%s): %w", gi+1, name, err)
			}
		}
		if n.BW <= 0 {
			return nil, fmt.Errorf("--nodes group %d (%s): bandwidth: not given (add e.g. 40GB/s)", gi+1, name)
		}
		if n.Mem <= 0 {
			return nil, fmt.Errorf("--nodes group %d (%s): memory: not given (add e.g. 64GiB)", gi+1, name)
		}
		if n.FLOPS <= 0 {
			n.FLOPS = 5 * n.BW
			if n.Cal != nil {
				n.FLOPS = n.Cal.FLOPS * n.BW / n.Cal.MemBW
			}
		}
		if n.Cal != nil && n.Name != "local" {
			// Another machine like this one: all its cores for its rank.
			n.Threads = n.Cal.Threads
		}
		for range count {
			if n.Name != "local" {
				n.Host = fmt.Sprintf("%s#%d", n.Name, len(out))
			}
			out = append(out, n)
		}
	}
	return out, nil
}

func presetNames() string {
	var s []string
	for k := range Presets {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(append(s, "local"), ", ")
}

func (n *Node) setField(f string) error {
	k, v, hasEq := strings.Cut(f, "=")
	switch {
	case hasEq && k == "link":
		bw, lat, ok := strings.Cut(v, "@")
		if !ok {
			return fmt.Errorf("link %q: want BANDWIDTH@LATENCY, e.g. 14GB/s@20us", v)
		}
		b, err := parseRate(bw)
		if err != nil {
			return fmt.Errorf("link bandwidth %q: %w", bw, err)
		}
		d, err := time.ParseDuration(strings.ReplaceAll(lat, "µ", "u"))
		if err != nil || d <= 0 || d > time.Second {
			return fmt.Errorf("link latency %q: want a duration between 0 and 1s, e.g. 20us", lat)
		}
		n.Link = Link{BW: b, Lat: d}
	case hasEq && k == "flops":
		x, err := parseSI(strings.TrimSuffix(strings.TrimSuffix(v, "FLOPS"), "flops"))
		if err != nil {
			return fmt.Errorf("flops %q: %w", v, err)
		}
		n.FLOPS = x
	case hasEq && k == "eff":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || !(x > 0 && x <= 1) {
			return fmt.Errorf("eff %q: want a fraction in (0, 1]", v)
		}
		n.DecodeEff, n.Cal = x, nil
	case hasEq:
		return fmt.Errorf("field %q: unknown (memory, bandwidth, link=, flops=, eff=)", k)
	case strings.HasSuffix(f, "/s"):
		b, err := parseRate(f)
		if err != nil {
			return fmt.Errorf("bandwidth %q: %w", f, err)
		}
		n.BW = b
	default:
		b, err := parseMem(f)
		if err != nil {
			return fmt.Errorf("memory %q: %w", f, err)
		}
		n.Mem = b
	}
	return nil
}

// numUnit splits "273GB/s" into 273 and "GB/s".
func numUnit(s string) (float64, string, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, "", fmt.Errorf("not a positive number")
	}
	return v, strings.TrimSpace(s[i:]), nil
}

// parseRate reads a bandwidth: B/s with K, M, G, T (1000s) or KiB.. (1024s);
// a lower-case b counts bits (200Gb/s is 25 GB/s).
func parseRate(s string) (float64, error) {
	v, u, err := numUnit(s)
	if err != nil {
		return 0, err
	}
	if !strings.HasSuffix(u, "/s") {
		return 0, fmt.Errorf("want a unit per second, e.g. GB/s or Gb/s")
	}
	u = strings.TrimSuffix(u, "/s")
	bits := strings.HasSuffix(u, "b")
	u = strings.TrimSuffix(strings.TrimSuffix(u, "B"), "b")
	mult, ok := map[string]float64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}[u]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (B/s, KB/s, MB/s, GB/s, TB/s, GiB/s; b for bits)", s)
	}
	r := v * mult
	if bits {
		r /= 8
	}
	if r > 1e15 {
		return 0, fmt.Errorf("over 1 PB/s")
	}
	return r, nil
}

// parseMem reads a memory size: K, M, G, T and KiB.. are 1024s, KB.. 1000s.
func parseMem(s string) (int64, error) {
	v, u, err := numUnit(s)
	if err != nil {
		return 0, err
	}
	mult, ok := map[string]float64{"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30,
		"T": 1 << 40, "TiB": 1 << 40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[u]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (GiB, GB, TiB, ...; a bandwidth needs /s)", u)
	}
	if v*mult >= 1<<62 {
		return 0, fmt.Errorf("too large")
	}
	if v*mult < 1<<20 {
		return 0, fmt.Errorf("under 1 MiB")
	}
	return int64(v * mult), nil
}

// parseSI reads 17T, 500G, 2.5e12.
func parseSI(s string) (float64, error) {
	v, u, err := numUnit(s)
	if err != nil {
		return 0, err
	}
	mult, ok := map[string]float64{"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[u]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (G, T, P)", u)
	}
	return v * mult, nil
}

// String describes the node in one line.
func (n *Node) String() string {
	return fmt.Sprintf("%s: %.0f GiB, %.0f GB/s (decode x%.2f), %.1f TFLOP/s, link %.2f GB/s @ %s",
		n.Name, float64(n.Mem)/(1<<30), n.BW/1e9, n.effOf(), n.FLOPS/1e12, n.Link.BW/1e9, n.Link.Lat)
}

func (n *Node) effOf() float64 {
	if n.Cal != nil {
		return n.Cal.DecodeEff()
	}
	return n.DecodeEff
}

// OpCost is the fixed time of one operation on a rank of share ranks
// running at once on this host: measured on a calibrated node (more when
// the ranks' threads oversubscribe its cores: they wait for each other's
// time slices); not modelled (0) for a node known by its spec alone.
func (n *Node) OpCost(share int) float64 {
	if n.Cal == nil || len(n.Cal.Op) == 0 {
		return 0
	}
	t := max(n.Threads, 1)
	c := n.Cal.Op[min(t, len(n.Cal.Op))-1]
	if busy := t * max(share, 1); busy > n.Cal.Threads {
		c *= float64(busy) / float64(n.Cal.Threads)
	}
	return c
}
