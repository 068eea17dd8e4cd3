package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"braid/internal/cluster"
	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/sysinfo"
)

func init() {
	register("plan", "show which rank holds which slice of a model, and whether it fits", runPlan)
}

func filepathBase(p string) string { return p[strings.LastIndex(p, "/")+1:] }

func runPlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", "-m MODEL [--workers HOST:PORT,... | --cluster FILE | --ranks N] [--mem BYTES,...] [--split tensor|layer|tensor=T,layer=L] [--tensor-split W,...] [-c CTX] [--parallel N] [--spec mtp]", stderr)
	path := fs.String("m", "", "model file (GGUF; any part of a split model), or ORG/NAME[:QUANT] from the Hugging Face hub cache")
	pull := pullFlag(fs)
	var cf clusterFlags
	fs.StringVar(&cf.workers, "workers", "", "worker addresses, in rank order after this node (rank 0); each is asked for its memory and where it would take the model from")
	fs.StringVar(&cf.file, "cluster", "", "cluster file (TOML): ranks, model paths per node, split, secret (instead of --workers)")
	fs.StringVar(&cf.secretFile, "secret-file", "", "with --workers: file holding the cluster's shared secret (default: $BRAID_SECRET; none = loopback only)")
	fs.DurationVar(&cf.timeout, "net-timeout", 5*time.Second, "with --workers: how long to try to reach a worker, and to wait for its answer")
	nRanks := fs.Int("ranks", 0, "plan for N ranks without naming them (instead of --workers)")
	mems := fs.String("mem", "", "memory available per rank in rank order (one value for all), e.g. 64G,32G; default: this node's for rank 0, what each worker offers for the others")
	fs.StringVar(&cf.split, "split", "", "tensor | layer | tensor=T,layer=L (default layer)")
	fs.StringVar(&cf.tensorSplit, "tensor-split", "", "weights per rank, in rank order, e.g. 3,1 (default: by memory when known, else even)")
	ctx := fs.Int("c", 0, "context per sequence in tokens (default: the model's, at most 4096)")
	parallel := fs.Int("parallel", 1, "sequences the KV cache holds at once")
	batch := fs.Int("b", 512, "most tokens evaluated in one step")
	threads := fs.Int("t", defaultThreads(), "threads per rank")
	kvF32 := fs.Bool("kv-f32", false, "KV cache in float32 instead of float16")
	loadMode := fs.String("load-mode", "auto", "this node's (rank 0's) --load-mode, for its memory need: "+plan.LoadModes)
	specKind := fs.String("spec", "none", "the --spec of the run planned for: with mtp rank 0 also holds the model's MTP head whole (ngram, draft, none: nothing more on the ranks)")
	var sf speedFlags
	sf.register(fs)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if sf.calibrate {
		if *threads < 1 {
			return usagef("-t must be at least 1")
		}
		if err := runCalibrate(&sf, *threads, stdout); err != nil {
			return err
		}
		if sf.nodes == "" {
			return nil
		}
	}
	if *path == "" {
		return usagef("-m MODEL is required")
	}
	if sf.nodes != "" {
		if cf.active() || *nRanks != 0 || *mems != "" {
			return usagef("--nodes describes the ranks: give it instead of --workers, --cluster, --ranks and --mem")
		}
		f, name, done, err := openPlanModel(path, *pull, stderr)
		if err != nil {
			return err
		}
		defer done()
		return runPlanSpeed(&sf, f, name, *ctx, *parallel, *batch, *threads, stdout)
	}
	hm, err := resolveModel(path, *pull, stderr)
	if err != nil {
		return err
	}
	if cf.active() && *nRanks != 0 {
		return usagef("give --workers (or --cluster) or --ranks, not both")
	}
	if *parallel < 1 || *batch < 1 || *threads < 1 || *ctx < 0 {
		return usagef("--parallel, -b and -t must be at least 1 and -c not negative")
	}
	if cf.timeout <= 0 {
		return usagef("--net-timeout must be positive")
	}
	lmode, lauto, err := plan.ParseLoadMode(*loadMode)
	if err != nil {
		return usageError{err}
	}
	switch *specKind {
	case "none", "ngram", "draft", "mtp":
	default:
		return usagef("--spec %q: want ngram, draft, mtp or none", *specKind)
	}

	var ranks []plan.Rank
	var notes []string
	var weights []float64
	var ccfg cluster.Config
	split := cf.split
	switch {
	case cf.active():
		if ccfg, err = cf.config(*path); err != nil {
			return err
		}
		ranks = append(ranks, plan.Rank{Name: "local"})
		for _, n := range ccfg.Nodes {
			ranks = append(ranks, plan.Rank{Name: n.Addr})
		}
		split, weights = ccfg.Split, ccfg.TensorSplit
	case *nRanks > 0:
		// Rank 0 is this node (its memory is known), as with --workers.
		ranks = append(ranks, plan.Rank{Name: "local"})
		for i := 1; i < *nRanks; i++ {
			ranks = append(ranks, plan.Rank{Name: "rank" + strconv.Itoa(i)})
		}
	case *nRanks < 0:
		return usagef("--ranks %d: need at least one rank", *nRanks)
	default:
		ranks = []plan.Rank{{Name: "local"}}
	}
	if split == "" {
		split = "layer"
	}
	if len(ranks) == 1 && split == "layer" {
		split = "tensor" // one rank: nothing to split either way
	}
	mode, err := plan.ParseMode(split, len(ranks))
	if err != nil {
		return usageError{err}
	}
	if weights == nil && cf.tensorSplit != "" {
		if weights, err = parseTensorSplit(cf.tensorSplit); err != nil {
			return err
		}
	}
	if weights != nil && len(weights) != len(ranks) {
		return usagef("--tensor-split has %d weights for %d ranks", len(weights), len(ranks))
	}
	var memList []int64
	if *mems != "" {
		parts := strings.Split(*mems, ",")
		if len(parts) != 1 && len(parts) != len(ranks) {
			return usagef("--mem has %d values for %d ranks (give one per rank, or one for all)", len(parts), len(ranks))
		}
		for i := range ranks {
			v, err := parseBytes(parts[min(i, len(parts)-1)])
			if err != nil {
				return usagef("--mem: %v", err)
			}
			memList = append(memList, v)
		}
	}

	// Ask the workers for their memory and, once the plan is made, where
	// each would take its shard from.
	var survey *cluster.Survey
	if len(ccfg.Nodes) > 0 {
		ccfg.ConnectTimeout, ccfg.MaxBatch, ccfg.Progress, ccfg.Hub = cf.timeout, *batch, stderr, hubRef(hm)
		ccfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		survey = cluster.Ask(context.Background(), ccfg)
		defer survey.Close()
	}
	if memList != nil {
		for i := range ranks {
			ranks[i].Mem = memList[i]
		}
	} else {
		if ranks[0].Name == "local" {
			if mem, err := sysinfo.ReadMemory(); err == nil && mem.Usable() > 0 && mem.Usable() <= math.MaxInt64 {
				ranks[0].Mem = int64(mem.Usable())
			}
		}
		switch {
		case survey != nil:
			for _, n := range survey.Nodes {
				ranks[n.Rank].Mem = n.Mem
				if n.Err != nil {
					notes = append(notes, fmt.Sprintf("rank %d (%s) could not be asked: its memory is unknown", n.Rank, n.Addr))
				}
			}
		case len(ranks) > 1:
			which := "rank 1"
			if len(ranks) > 2 {
				which = fmt.Sprintf("ranks 1-%d", len(ranks)-1)
			}
			notes = append(notes, "the memory of "+which+" is unknown: pass --mem (one value per rank) to check the fit")
		}
	}
	if hm != nil && len(ranks) > 1 && survey == nil {
		notes = append(notes, fmt.Sprintf("%s (%s): a worker reads it at this node's path or from its own hub cache; without either it pulls %s from the hub itself (unless braid worker --no-pull), else receives its shard from this node",
			hm.Name(), sysinfo.FormatBytes(uint64(hm.Size())), sysinfo.FormatBytes(uint64(hm.Size()))))
	}

	f, err := gguf.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	if *ctx == 0 {
		c, err := model.ReadConfig(f)
		if err != nil {
			return err
		}
		*ctx = min(c.Context, 4096)
	}
	p, err := plan.Make(f, plan.Request{Ranks: ranks, Mode: mode, Weights: weights, Ctx: *ctx, Parallel: *parallel,
		MaxBatch: *batch, Threads: *threads, KVF32: *kvF32, MTP: *specKind == "mtp"})
	var fe *plan.FitError
	if err != nil && !errors.As(err, &fe) {
		return err
	}
	if ranks[0].Name == "local" {
		notes = append(notes, planLoad(p, f, *path, lmode, lauto)...)
		if err == nil && !p.Ranks[0].Fits() {
			err = &plan.FitError{Plan: p}
		}
	}
	p.Notes = append(p.Notes, notes...)
	fmt.Fprint(stdout, p.Table())
	if survey != nil {
		srcs, serr := survey.Sources(f, p)
		if serr != nil {
			return errors.Join(err, serr)
		}
		if uerr := writeSources(stdout, srcs); err == nil {
			err = uerr
		}
	}
	return err
}

// planLoad decides how this node, rank 0, would hold its weights: read
// mode holds a copy of the whole file, so the rank's weights become the
// file's size. It returns the notes that say so.
func planLoad(p *plan.Plan, f *gguf.Model, path string, mode gguf.LoadMode, auto bool) []string {
	r := &p.Ranks[0]
	lf := plan.LoadFacts{File: f.Bytes(), Weights: r.Weights, Other: r.KV + r.Scratch, Usable: r.Mem, InMemoryFS: sysinfo.InMemoryFS(path)}
	c := plan.ChooseLoad(mode, auto, lf)
	if c.Mode == gguf.LoadRead {
		r.Weights = lf.File
	}
	notes := []string{fmt.Sprintf("rank 0 (this node): weights held as %s", c)}
	if len(p.Ranks) > 1 {
		notes = append(notes, "each worker chooses its own --load-mode (auto: read when its shard is most of the file it reads from and fits its memory, else mmap)")
	}
	return notes
}

// writeSources prints where each rank takes its weights from at a load:
// it reads its shard from a file it has, pulls the model from the hub, or
// receives its shard from this node, and how many bytes that is; a worker
// that could not be asked says why. It returns an error naming those.
func writeSources(w io.Writer, srcs []cluster.Source) error {
	fmt.Fprintln(w, "\nweights at load (each worker asked):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  rank\taddress\taction\tbytes\tfrom")
	var read, pulled, streamed int64
	var failed []string
	for _, s := range srcs {
		if s.Err != nil {
			action := "unknown"
			if s.Unreachable {
				action = "unreachable"
			}
			msg := strings.TrimPrefix(s.Err.Error(), fmt.Sprintf("rank %d (%s): ", s.Rank, s.Addr))
			fmt.Fprintf(tw, "  %d\t%s\t%s\t-\t%s\n", s.Rank, s.Addr, action, msg)
			failed = append(failed, fmt.Sprintf("rank %d (%s)", s.Rank, s.Addr))
			continue
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", s.Rank, s.Addr, s.Action, plan.Bytes(s.Bytes), s.Where)
		switch s.Action {
		case cluster.SourceRead:
			read += s.Bytes
		case cluster.SourcePull:
			pulled += s.Bytes
			read += s.Shard
		case cluster.SourceReceive:
			streamed += s.Bytes
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "  in all: %s read from local files, %s pulled from the hub, %s streamed from this node\n",
		plan.Bytes(read), plan.Bytes(pulled), plan.Bytes(streamed))
	if len(failed) > 0 {
		return fmt.Errorf("%s could not say where its weights would come from (see above); a load would fail", strings.Join(failed, ", "))
	}
	return nil
}

// parseBytes reads a byte count: a plain number, or one with a unit: K, M,
// G, T (and KiB, MiB, ...) are powers of 1024, KB, MB, GB, TB powers of
// 1000.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a positive byte count (like 64G or 34359738368)", s)
	}
	mult := map[string]float64{"": 1, "B": 1,
		"K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30, "T": 1 << 40, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (K, M, G, T are powers of 1024; KB, MB, GB, TB of 1000)", s, unit)
	}
	if v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v * mult), nil
}
