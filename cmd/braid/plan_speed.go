package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/perfmodel"
	"braid/internal/plan"
	"braid/internal/sysinfo"
)

// speedFlags are braid plan's performance-model flags.
type speedFlags struct {
	calibrate bool
	nodes     string
	specRates string
	netbench  string
	streams   string
	prompt    int
	asJSON    bool
}

func (s *speedFlags) register(fs interface {
	BoolVar(*bool, string, bool, string)
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
}) {
	fs.BoolVar(&s.calibrate, "calibrate", false, "measure this node's kernels (bytes/s per format at 1..-t threads) and memory bandwidth (under 30 s) and cache them for --nodes local")
	fs.StringVar(&s.nodes, "nodes", "", `predict speed on these nodes: groups like 3xgb10 or 2x"cpu:64GiB,40GB/s,link=1.2GB/s@60us" (presets gb10, cpu, local), ';' or ',' between groups`)
	fs.StringVar(&s.specRates, "spec-rates", "", "with --nodes: also predict speculative decoding at these draft acceptance rates, e.g. 0.87,0.76,0.6")
	fs.StringVar(&s.netbench, "netbench", "", "with --calibrate: a `braid netbench --json` report whose p50 latency and bandwidth are this node's link")
	fs.StringVar(&s.streams, "streams", "1,4,8", "with --nodes: concurrent streams to predict decode at")
	fs.IntVar(&s.prompt, "prompt", 512, "with --nodes: prompt tokens of the prefill prediction")
	fs.BoolVar(&s.asJSON, "json", false, "with --nodes: print the predictions as JSON")
}

func (s *speedFlags) active() bool { return s.calibrate || s.nodes != "" }

// localCalibration returns this node's cached calibration at threads, or
// nil with the reason when there is none or it is stale.
func localCalibration(threads int) (*perfmodel.Calibration, string) {
	path, err := perfmodel.CachePath()
	if err != nil {
		return nil, err.Error()
	}
	c, err := perfmodel.Load(path, sysinfo.ReadBuild().Digest(), threads)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "no calibration (run braid plan --calibrate)"
		}
		return nil, err.Error()
	}
	return c, ""
}

func runCalibrate(s *speedFlags, threads int, stdout io.Writer) error {
	path, err := perfmodel.CachePath()
	if err != nil {
		return err
	}
	start := time.Now()
	mib, per := 64, 120*time.Millisecond
	if os.Getenv("BRAID_CALIBRATE_QUICK") == "1" {
		// For tests: the same measurement, too small and short to mean
		// anything.
		mib, per = 4, 5*time.Millisecond
	}
	c, err := perfmodel.Calibrate(threads, perfmodel.CalFormats, mib, per)
	if err != nil {
		return err
	}
	if s.netbench != "" {
		b, err := os.ReadFile(s.netbench)
		if err != nil {
			return err
		}
		l, err := perfmodel.ParseNetbench(b)
		if err != nil {
			return fmt.Errorf("--netbench %s: %w", s.netbench, err)
		}
		c.Link = &l
	}
	if err := c.Save(path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "calibrated in %s (load %s), %d threads, cached in %s\n", time.Since(start).Round(100*time.Millisecond), c.Load, threads, path)
	fmt.Fprintf(stdout, "memory read: %.1f GB/s; batched Q4_K: %.1f GFLOP/s; an operation's fixed cost: %s us by threads\n",
		c.MemBW/1e9, c.FLOPS/1e9, joinRates(c.Op, 1e-6))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "  format\tdecode GB/s by threads\tof memory read\tbatched GFLOP/s by threads\n")
	for _, t := range perfmodel.CalFormats {
		st, fl := c.Stream[t.String()], c.Flops[t.String()]
		fmt.Fprintf(tw, "  %s\t%s\t%.2f\t%s\n", t, joinRates(st, 1e9), st[len(st)-1]/c.MemBW, joinRates(fl, 1e9))
	}
	tw.Flush()
	if c.Link != nil {
		fmt.Fprintf(stdout, "link (netbench): %.2f GB/s at %s one way, a small all-reduce %s\n", c.Link.BW/1e9, c.Link.Lat, c.Link.AR)
	}
	return nil
}

func joinRates(r []float64, unit float64) string {
	s := make([]string, len(r))
	for i, x := range r {
		s[i] = strconv.FormatFloat(x/unit, 'f', 1, 64)
	}
	return strings.Join(s, " ")
}

// speedRow is one split's prediction; the JSON names are part of the
// command's interface.
type speedRow struct {
	Split      string    `json:"split"`
	TP         int       `json:"tp"`
	PP         int       `json:"pp"`
	Nodes      int       `json:"nodes"`
	Experts    string    `json:"experts,omitempty"` // "ff" (cut along FF, built) or "whole" (expert parallel, predicted only)
	Spec       []float64 `json:"spec_rates,omitempty"`
	Feasible   bool      `json:"feasible"`
	Why        string    `json:"why,omitempty"`
	Prefill    float64   `json:"prefill_tps"`
	Streams    []int     `json:"streams"`
	PerStream  []float64 `json:"decode_tps_per_stream"`
	Aggregate  []float64 `json:"decode_tps_aggregate"`
	MemPerRank []int64   `json:"mem_per_rank"`
	Built      bool      `json:"built"`
}

type speedReport struct {
	Model       string     `json:"model"`
	Nodes       []string   `json:"nodes"`
	Ctx         int        `json:"ctx"`
	Rows        []speedRow `json:"splits"`
	Recommended string     `json:"recommended"`
	Reason      string     `json:"reason"`
	Notes       []string   `json:"notes,omitempty"`
}

// layoutOf turns the planner's shards into the cost model's shares.
func layoutOf(p *plan.Plan, c *model.Config, nodes []perfmodel.Node) *perfmodel.Layout {
	frac := func(lo, hi, n int) float64 {
		if n <= 0 {
			return 1
		}
		return float64(hi-lo) / float64(n)
	}
	l := &perfmodel.Layout{TP: p.Mode.TP, PP: p.Mode.PP}
	for i := range p.Ranks {
		sh := &p.Ranks[i].Shard
		r := perfmodel.RankShare{Node: &nodes[i], First: sh.First, Last: sh.Last, Heads: frac(sh.HeadLo, sh.HeadHi, c.Heads),
			KV: frac(sh.KVLo, sh.KVHi, c.KVHeads), FF: frac(sh.FFLo, sh.FFHi, c.FF), ExpFF: frac(sh.ExpFFLo, sh.ExpFFHi, c.ExpertFF),
			Vocab: frac(sh.VocabLo, sh.VocabHi, c.Vocab), Last0: sh.LastStage(c), MTP: i == 0}
		l.Ranks = append(l.Ranks, r)
	}
	return l
}

// openPlanModel opens -m for --nodes: a GGUF (or hub reference), or a
// model described by its hyperparameters, FILE.json[#NAME] (the format
// of internal/perfmodel/testdata/published.json; NAME picks one of
// several), laid out as a sparse shape file in a temporary directory.
func openPlanModel(path *string, pull bool, stderr io.Writer) (*gguf.Model, string, func(), error) {
	file, pick, _ := strings.Cut(*path, "#")
	if strings.HasSuffix(file, ".json") {
		ds, err := perfmodel.ReadDescribed(file)
		if err != nil {
			return nil, "", nil, err
		}
		var d *perfmodel.Described
		var names []string
		for i := range ds {
			names = append(names, ds[i].Name)
			if ds[i].Name == pick || (pick == "" && len(ds) == 1) {
				d = &ds[i]
			}
		}
		if d == nil {
			return nil, "", nil, usagef("-m %s: name one model with #NAME: %s", file, strings.Join(names, ", "))
		}
		dir, err := os.MkdirTemp("", "braid-plan-")
		if err != nil {
			return nil, "", nil, err
		}
		f, _, err := d.Open(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, "", nil, err
		}
		return f, d.Name + " (described: " + file + ")", func() { f.Close(); os.RemoveAll(dir) }, nil
	}
	if _, err := resolveModel(path, pull, stderr); err != nil {
		return nil, "", nil, err
	}
	f, err := gguf.Open(*path)
	if err != nil {
		return nil, "", nil, err
	}
	return f, filepathBase(*path), func() { f.Close() }, nil
}

func runPlanSpeed(s *speedFlags, f *gguf.Model, name string, ctx, parallel, batch, threads int, stdout io.Writer) error {
	c, err := model.ReadConfig(f)
	if err != nil {
		return err
	}
	if ctx == 0 {
		ctx = min(c.Context, 4096)
	}
	var notes []string
	cal, why := localCalibration(threads)
	var local *perfmodel.Node
	if cal != nil {
		n := cal.Node(0, threads)
		if mem, err := sysinfo.ReadMemory(); err == nil && mem.Usable() > 0 && mem.Usable() <= math.MaxInt64 {
			n.Mem = int64(mem.Usable())
		}
		local = &n
		cpu := perfmodel.Presets["cpu"]
		cpu.Cal = cal
		perfmodel.Presets["cpu"] = cpu
		defer func() { cpu.Cal = nil; perfmodel.Presets["cpu"] = cpu }()
	} else {
		notes = append(notes, "this node: "+why+"; the cpu preset uses its stated factors")
	}
	nodes, err := perfmodel.ParseNodes(s.nodes, local, why)
	if err != nil {
		return usageError{err}
	}
	var rates []float64
	if s.specRates != "" {
		for _, x := range strings.Split(s.specRates, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil || !(v >= 0 && v <= 1) {
				return usagef("--spec-rates: %q is not an acceptance rate in [0, 1]", x)
			}
			rates = append(rates, v)
		}
	}
	streams, err := parseInts("-streams", s.streams, 1)
	if err != nil {
		return err
	}
	if s.prompt < 1 {
		return usagef("--prompt %d: need at least one token", s.prompt)
	}
	m, err := perfmodel.FromGGUF(f, c)
	if err != nil {
		return err
	}
	rep := speedReport{Model: name, Ctx: ctx, Notes: notes}
	for _, n := range nodes {
		rep.Nodes = append(rep.Nodes, n.String())
	}
	blk := model.ColumnBlocks(f, c)
	for n := 1; n <= len(nodes); n++ {
		for tp := 1; tp <= n; tp++ {
			if n%tp != 0 {
				continue
			}
			pp := n / tp
			ranks := make([]plan.Rank, n)
			for i := range ranks {
				ranks[i] = plan.Rank{Name: fmt.Sprintf("%s#%d", nodes[i].Name, i), Mem: nodes[i].Mem}
			}
			p, perr := plan.Compute(c, blk, func(sh *model.Shard) (int64, error) { return model.WeightBytes(f, c, sh) }, nil,
				plan.Request{Ranks: ranks, Mode: plan.Mode{TP: tp, PP: pp}, Ctx: ctx, Parallel: max(parallel, slicesMax(streams)), MaxBatch: batch, Threads: threads})
			base := speedRow{TP: tp, PP: pp, Nodes: n, Streams: streams, Built: true}
			var fe *plan.FitError
			switch {
			case perr != nil && !errors.As(perr, &fe):
				base.Split, base.Why = (&perfmodel.Layout{TP: tp, PP: pp}).Name(), perr.Error()
				rep.Rows = append(rep.Rows, base)
				continue
			case perr != nil:
				base.Why = "does not fit"
			default:
				base.Feasible = true
			}
			for i := range p.Ranks {
				base.MemPerRank = append(base.MemPerRank, p.Ranks[i].Total())
			}
			l := layoutOf(p, c, nodes[:n])
			variants := []*perfmodel.Layout{l}
			if tp > 1 && c.Experts > 0 {
				ep := *l
				ep.EP = true
				ep.Ranks = append([]perfmodel.RankShare(nil), l.Ranks...)
				for i := range ep.Ranks {
					ep.Ranks[i].ExpFF, ep.Ranks[i].Experts = 1, 1/float64(tp)
				}
				variants = append(variants, &ep)
			}
			for _, v := range variants {
				specs := [][]float64{nil}
				if rates != nil {
					specs = append(specs, rates)
				}
				for _, sp := range specs {
					row := base
					row.Split = v.Name()
					if c.Experts > 0 {
						row.Experts = "ff"
						if v.EP {
							row.Experts, row.Built = "whole", false
						}
					}
					row.Spec = sp
					row.Prefill = v.Prefill(m, s.prompt, batch)
					row.PerStream, row.Aggregate = nil, nil
					for _, st := range streams {
						var agg, per float64
						if sp != nil {
							agg, per = v.Speculate(m, st, ctx, sp)
						} else {
							agg, per = v.Decode(m, st, ctx)
						}
						row.PerStream = append(row.PerStream, per)
						row.Aggregate = append(row.Aggregate, agg)
					}
					rep.Rows = append(rep.Rows, row)
				}
			}
		}
	}
	recommend(&rep)
	if s.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeSpeed(stdout, &rep)
	return nil
}

func slicesMax(x []int) int {
	m := 0
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// recommend picks the built, feasible split (without speculation, which
// depends on the text) with the fastest single stream; a split within 5 %
// of it on fewer nodes wins (the other nodes stay free), and the reason
// names the runner-up and the best aggregate.
func recommend(rep *speedReport) {
	best := -1
	for i, r := range rep.Rows {
		if !r.Feasible || !r.Built || r.Spec != nil {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := rep.Rows[best]
		switch {
		case r.PerStream[0] > 1.05*b.PerStream[0]:
			best = i
		case r.PerStream[0] > b.PerStream[0] && r.Nodes <= b.Nodes:
			best = i
		}
	}
	if best < 0 {
		rep.Recommended, rep.Reason = "none", "no split fits these nodes"
		return
	}
	b := rep.Rows[best]
	rep.Recommended = b.Split
	rep.Reason = fmt.Sprintf("fastest single stream among the splits that fit: %.1f tok/s decode, %.0f tok/s prefill", b.PerStream[0], b.Prefill)
	aggBest, ai := 0.0, -1
	last := len(b.Streams) - 1
	for i, r := range rep.Rows {
		if r.Feasible && r.Built && r.Spec == nil && r.Aggregate[last] > aggBest {
			aggBest, ai = r.Aggregate[last], i
		}
	}
	if ai >= 0 && ai != best && aggBest > 1.1*b.Aggregate[last] {
		rep.Reason += fmt.Sprintf("; for throughput at %d streams %s gives %.1f tok/s in all (against %.1f)", b.Streams[last], rep.Rows[ai].Split, aggBest, b.Aggregate[last])
	}
	for _, r := range rep.Rows {
		if r.Spec != nil && r.Split == b.Split && r.Experts == b.Experts && r.PerStream[0] > b.PerStream[0] {
			rep.Reason += fmt.Sprintf("; speculation at %v would make it %.1f tok/s", r.Spec, r.PerStream[0])
		}
	}
}

func writeSpeed(w io.Writer, rep *speedReport) {
	fmt.Fprintf(w, "model: %s, context %d\nnodes:\n", rep.Model, rep.Ctx)
	for i, n := range rep.Nodes {
		fmt.Fprintf(w, "  %d %s\n", i, n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := "\nsplit\texperts\tspec\tprefill tok/s"
	if len(rep.Rows) > 0 {
		for _, s := range rep.Rows[0].Streams {
			hdr += fmt.Sprintf("\tdecode x%d (per stream / all)", s)
		}
	}
	fmt.Fprintln(tw, hdr+"\tmemory per rank\tstatus")
	for _, r := range rep.Rows {
		spec := "-"
		if r.Spec != nil {
			spec = fmt.Sprint(r.Spec)
		}
		ex := r.Experts
		if ex == "" {
			ex = "-"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t", r.Split, ex, spec)
		if r.PerStream == nil {
			fmt.Fprintln(tw, line+"-\t"+strings.Repeat("-\t", len(r.Streams))+"-\t"+r.Why)
			continue
		}
		line += fmt.Sprintf("%.1f", r.Prefill)
		for i := range r.Streams {
			line += fmt.Sprintf("\t%.1f / %.1f", r.PerStream[i], r.Aggregate[i])
		}
		mem := make([]string, len(r.MemPerRank))
		for i, x := range r.MemPerRank {
			mem[i] = plan.Bytes(x)
		}
		status := "ok"
		switch {
		case !r.Feasible:
			status = r.Why
		case !r.Built:
			status = "predicted only (not built)"
		}
		fmt.Fprintln(tw, line+"\t"+strings.Join(mem, ", ")+"\t"+status)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrecommended: %s: %s\n", rep.Recommended, rep.Reason)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
