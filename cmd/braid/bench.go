package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"braid/internal/cluster"
	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/sysinfo"
)

func init() {
	register("bench", "measure prefill and decode speed (median and range over runs)", runBench)
}

// benchRow is one configuration's result; the JSON names are part of the
// command's interface.
type benchRow struct {
	Model        string `json:"model"`
	Threads      int    `json:"threads"`
	PromptTokens int    `json:"prompt_tokens"`
	GenTokens    int    `json:"gen_tokens"`
	// Parallel is how many sequences decode together; decode tok/s is
	// then their aggregate (prefill is always one sequence).
	Parallel int `json:"parallel"`
	// Depth is the context each decoding sequence starts with (-d).
	Depth            int     `json:"depth"`
	Runs             int     `json:"runs"`
	PrefillTPSMedian float64 `json:"prefill_tps_median"`
	PrefillTPSMin    float64 `json:"prefill_tps_min"`
	PrefillTPSMax    float64 `json:"prefill_tps_max"`
	DecodeTPSMedian  float64 `json:"decode_tps_median"`
	DecodeTPSMin     float64 `json:"decode_tps_min"`
	DecodeTPSMax     float64 `json:"decode_tps_max"`
	PeakRSSBytes     uint64  `json:"peak_rss_bytes"`
	// LoadMode is how this node held the weights (mmap, read, mlock) and
	// LoadReason why (--load-mode's, or auto's reason).
	LoadMode   string `json:"load_mode"`
	LoadReason string `json:"load_mode_reason"`
	// MajorFaults are the page faults of the timed runs that read from
	// disk (this process's majflt): weights the kernel reclaimed and this
	// process read again. Zero where /proc is not.
	MajorFaults uint64 `json:"major_faults"`
	// Profile is one more decode run timed per rank (--profile, with
	// --workers).
	Profile *cluster.Profile `json:"profile,omitempty"`
}

func parseInts(flagName, s string, min int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < min {
			return nil, usagef("-%s: %q is not a number >= %d", flagName, f, min)
		}
		out = append(out, v)
	}
	return out, nil
}

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "serve" {
		return runBenchServe(args[1:], stdout, stderr)
	}
	fs := newFlags("bench", "-m MODEL [-p 512] [-n 128] [-r 5] [-t THREADS] [--json] [--spec ngram|draft|mtp [--model-draft F] [--spec-n-max 0,1,2,4] [--spec-synth-rates P1,P2,...]]", stderr)
	path := fs.String("m", "", "model file, or ORG/NAME[:QUANT] from the Hugging Face hub cache")
	pull := pullFlag(fs)
	pFlag := fs.String("p", "512", "prompt lengths, comma-separated (0 = no prefill test)")
	nFlag := fs.String("n", "128", "generated lengths, comma-separated (0 = no decode test)")
	tFlag := fs.String("t", strconv.Itoa(defaultThreads()), "thread counts, comma-separated")
	dFlag := fs.String("d", "0", "context depths, comma-separated: the decode test starts after this many tokens of context in each sequence (evaluated untimed)")
	npFlag := fs.String("np", "1", "sequences decoding together in the decode test, comma-separated (decode tok/s is their aggregate)")
	reps := fs.Int("r", 5, "runs per configuration (after one warm-up run)")
	asJSON := fs.Bool("json", false, "print a JSON array, one object per row")
	kvF32 := fs.Bool("kv-f32", false, "float32 KV cache")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the runs to this file (go tool pprof)")
	profile := fs.Bool("profile", false, "with --workers: after the runs, one more decode run timed per rank (compute, all-reduce waits, idle; per layer), bytes sent, communication share, frames per step")
	noOverlap := fs.Bool("no-overlap", false, "with a layer split and -np > 1: run each decode step over all sequences (as micro-batches) instead of overlapping the steps of groups of them, one group per stage")
	var cf clusterFlags
	cf.register(fs)
	var sf specFlags
	sf.register(fs, true)
	promptFile := fs.String("prompt-file", "", "with --spec: generate from this text (tokenized) instead of -p random tokens")
	loadMode := fs.String("load-mode", "auto", plan.LoadModes)
	cpus := fs.String("cpus", "", cpusUsage)
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usagef("-m MODEL is required")
	}
	if err := sf.check(true); err != nil {
		return err
	}
	if *promptFile != "" && !sf.active() {
		return usagef("--prompt-file is for --spec runs")
	}
	hm, err := resolveModel(path, *pull, stderr)
	if err != nil {
		return err
	}
	if *reps < 1 {
		return usagef("-r %d: need at least one run", *reps)
	}
	lmode, lauto, err := plan.ParseLoadMode(*loadMode)
	if err != nil {
		return usageError{err}
	}
	ps, err := parseInts("p", *pFlag, 0)
	if err != nil {
		return err
	}
	ns, err := parseInts("n", *nFlag, 0)
	if err != nil {
		return err
	}
	ts, err := parseInts("t", *tFlag, 1)
	if err != nil {
		return err
	}
	tGiven := given(fs, "t", "threads")
	if *cpus != "" && !tGiven {
		list, err := sysinfo.ParseCPUList(*cpus)
		if err != nil {
			return usagef("--cpus: %v", err)
		}
		ts = []int{len(list)}
	}
	nps, err := parseInts("np", *npFlag, 1)
	if err != nil {
		return err
	}
	maxNP := 1
	for _, np := range nps {
		maxNP = max(maxNP, np)
	}
	file, err := gguf.Open(*path)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := refuseShard(file); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *profile && !cf.active() {
		return usagef("--profile needs --workers or --cluster (it times the ranks of a split)")
	}
	if cf.active() && len(ts) > 1 {
		return usagef("-t: give one thread count with --workers (this node's threads)")
	}
	ds, err := parseInts("d", *dFlag, 0)
	if err != nil {
		return err
	}
	longest := 1
	measured := false
	for _, p := range ps {
		for _, n := range ns {
			longest = max(longest, p+n, slices.Max(ds)+n)
			measured = measured || p > 0 || n > 0
		}
	}
	if !measured {
		return usagef("-p 0 -n 0: nothing to measure (-p is the prefill test's prompt length, -n the decode test's tokens)")
	}
	if !cf.active() && !sf.active() {
		// The most threads of any row decide the placement (a cluster's
		// and --spec's loads place themselves).
		most := slices.Max(ts)
		line, _, err := placeThreads(*cpus, &most, true)
		if err != nil {
			return err
		}
		if line != "" {
			fmt.Fprintln(stderr, line)
		}
	}
	var load plan.LoadChoice
	if !cf.active() && !sf.active() {
		est := estimateMemory(file, longest)
		if load, err = chooseLoad(file, est, lmode, lauto, maxNP); err != nil {
			return fmt.Errorf("%s %w", *path, err)
		}
		if err := file.SetMode(gguf.LoadOptions{Mode: load.Mode, Progress: loadProgress(*path, stderr)}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "braid: weights: %s\n", load)
	}
	if sf.active() {
		text, err := readPromptFile(*promptFile)
		if err != nil {
			return err
		}
		if len(ds) > 1 {
			return usagef("-d %s: give one depth with --spec", *dFlag)
		}
		return runBenchSpec(&sf, benchSpecArgs{path: *path, hub: hm, ts: ts, ps: ps, ns: ns, nps: nps, depth: ds[0], reps: *reps,
			json: *asJSON, kvF32: *kvF32, prompt: text, load: *loadMode, cpus: *cpus}, &cf, stdout, stderr)
	}
	var rows []benchRow
	for _, t := range ts {
		// The backend is the model on this node, or the cluster.
		var be engine.Backend
		var release func()
		var cl *cluster.Cluster
		if cf.active() {
			l, err := loadBackend(&modelFlags{path: *path, hub: hm, threads: t, ctx: longest, kvF32: *kvF32, batch: max(512, maxNP), loadMode: *loadMode, cpus: *cpus, threadsSet: true}, &cf, maxNP, stderr)
			if err != nil {
				return err
			}
			be, release, cl, load = l.backend, l.Close, l.cl, l.load
		} else {
			pool := kernels.NewPool(t)
			m, err := model.New(file, pool, model.Options{MaxBatch: max(512, maxNP)})
			if err != nil {
				pool.Close()
				return err
			}
			fmt.Fprintf(stderr, "braid: layout: %s\n", m.Repacked())
			// Each sequence fills whole blocks: round up per sequence.
			sh := m.Shard()
			bs := model.CacheConfig(&m.Cfg, &sh, model.CacheSize{Positions: 1, F32: *kvF32}).BlockSize
			cache, err := m.NewCache(model.CacheSize{Positions: maxNP * ((longest + bs - 1) / bs * bs), Ctx: (longest + bs - 1) / bs * bs, F32: *kvF32})
			if err != nil {
				pool.Close()
				return err
			}
			be, release = engine.NewLocal(m, cache), pool.Close
		}
		vocab := be.Vocab()
		rng := rand.New(rand.NewPCG(1, 2))
		logits := make([]float32, maxNP*vocab)
		var b model.Batch
		// Decode asks for the best candidate per rank (greedy), what a
		// generation needs; on one node the rows are full either way.
		greedy := engine.Output{TopK: 1}
		prefill := func(p int) (time.Duration, error) {
			be.Drop(0)
			b.Reset()
			for i := 0; i < p; i++ {
				b.Add(int32(rng.IntN(vocab)), int32(i), 0, i == p-1)
			}
			start := time.Now()
			err := be.Forward(&b, greedy, logits)
			return time.Since(start), err
		}
		// decode runs np sequences from position -d, one token each per
		// step, after filling each one's first d positions (untimed).
		decode := func(n, np, depth int) (time.Duration, error) {
			for s := range np {
				seq := kvcache.SeqID(s)
				be.Drop(seq)
				for lo := 0; lo < depth; lo += 512 {
					b.Reset()
					for i := lo; i < min(lo+512, depth); i++ {
						b.Add(int32(rng.IntN(vocab)), int32(i), seq, false)
					}
					if err := be.Forward(&b, greedy, logits); err != nil {
						return 0, err
					}
				}
			}
			if p := overlapPipe(be, np, *noOverlap); p != nil {
				return decodeOverlapped(p, np, n, depth, rng, vocab, logits)
			}
			start := time.Now()
			for i := depth; i < depth+n; i++ {
				b.Reset()
				for s := range np {
					b.Add(int32(rng.IntN(vocab)), int32(i), kvcache.SeqID(s), true)
				}
				if err := be.Forward(&b, greedy, logits); err != nil {
					return 0, err
				}
			}
			return time.Since(start), nil
		}
		for _, p := range ps {
			for _, n := range ns {
				for _, np := range nps {
					for _, d := range ds {
						if n == 0 && (np > 1 || d != ds[0]) {
							continue // parallel and depth only change the decode test
						}
						if p == 0 && n == 0 {
							continue // neither test: an empty row (-p 0,512 -n 0,128)
						}
						row := benchRow{Model: filepath.Base(*path), Threads: t, PromptTokens: p, GenTokens: n, Parallel: np, Depth: d, Runs: *reps,
							LoadMode: load.Mode.String(), LoadReason: load.Reason}
						var pp, tg []float64
						var faults uint64
						for r := -1; r < *reps; r++ { // run -1 warms caches and page-ins
							if r == 0 {
								faults = majorFaults()
							}
							var dp, dn time.Duration
							var err error
							if p > 0 {
								if dp, err = prefill(p); err != nil {
									release()
									return err
								}
							}
							if n > 0 {
								if dn, err = decode(n, np, d); err != nil {
									release()
									return err
								}
							}
							if r >= 0 {
								if p > 0 {
									pp = append(pp, float64(p)/dp.Seconds())
								}
								if n > 0 {
									tg = append(tg, float64(n*np)/dn.Seconds())
								}
							}
						}
						row.MajorFaults = majorFaults() - faults
						if *profile && n > 0 {
							if err := cl.StartProfile(); err != nil {
								release()
								return err
							}
							_, err := decode(n, np, d)
							if err == nil {
								row.Profile, err = cl.StopProfile()
							}
							if err != nil {
								release()
								return err
							}
						}
						row.PrefillTPSMedian, row.PrefillTPSMin, row.PrefillTPSMax = medianRange(pp)
						row.DecodeTPSMedian, row.DecodeTPSMin, row.DecodeTPSMax = medianRange(tg)
						row.PeakRSSBytes = peakRSS()
						rows = append(rows, row)
						if !*asJSON {
							fmt.Fprintf(stderr, "done: t=%d p=%d n=%d np=%d d=%d\n", t, p, n, np, d)
						}
					}
				}
			}
		}
		for s := range maxNP {
			be.Drop(kvcache.SeqID(s))
		}
		release()
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tthreads\tprompt\tgen\tparallel\tdepth\tprefill tok/s (median [min-max])\tdecode tok/s (median [min-max])\tpeak RSS\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", r.Model, r.Threads, r.PromptTokens, r.GenTokens, r.Parallel, r.Depth,
			fmtRange(r.PrefillTPSMedian, r.PrefillTPSMin, r.PrefillTPSMax), fmtRange(r.DecodeTPSMedian, r.DecodeTPSMin, r.DecodeTPSMax),
			formatMiB(r.PeakRSSBytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Profile != nil {
			fmt.Fprintf(stdout, "\nprofile: %d decode steps of %d sequence(s) (positions 0-%d)\n", r.Profile.Steps, r.Parallel, r.GenTokens-1)
			writeProfile(stdout, r.Profile)
		}
	}
	return nil
}

func fmtRange(med, lo, hi float64) string {
	if med == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", med, lo, hi)
}

func formatMiB(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// medianRange returns the median, minimum and maximum (zeros when empty).
func medianRange(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// majorFaults is the process's count of page faults that read from disk
// (field 12 of /proc/self/stat), 0 when unknown.
func majorFaults() uint64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ")".
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 10 {
		return 0
	}
	v, _ := strconv.ParseUint(f[9], 10, 64) // fields 3.. start at f[0]: majflt is field 12
	return v
}

// peakRSS reads the process's high-water resident set (VmHWM).
func peakRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				v, _ := strconv.ParseUint(f[0], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}
