package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"braid/internal/engine"
	"braid/internal/hub"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

// specBenchRow is one row of `braid bench --spec`: a real greedy
// generation decoded with speculation (n-max > 0) or without (n-max 0, the
// baseline of the speed-up). The JSON names are part of the interface.
type specBenchRow struct {
	benchRow
	Spec       string    `json:"spec"`
	NMax       int       `json:"spec_n_max"`
	NMin       int       `json:"spec_n_min"`
	SynthRates []float64 `json:"spec_synth_rates,omitempty"`
	// Exact says whether verification used the one-token kernels
	// (--spec-exact, on every rank).
	Exact bool `json:"spec_exact"`
	// SpeedUp is the decode median over the n-max 0 row's (0: no such row).
	SpeedUp float64 `json:"speedup,omitempty"`
	// Drafted and Accepted count drafts per position (first draft first)
	// over the measured runs; Acceptance is their ratio.
	Drafted      []int64   `json:"drafted"`
	Accepted     []int64   `json:"accepted"`
	Acceptance   []float64 `json:"acceptance"`
	MeanAccepted float64   `json:"mean_accepted"` // drafts kept per verification step
	Steps        int64     `json:"verify_steps"`
	// Identical says whether the output equals the n-max 0 row's (greedy
	// output must; absent without such a row or with synthetic rates).
	Identical *bool `json:"identical_to_no_spec,omitempty"`
}

type benchSpecArgs struct {
	path   string
	hub    *hub.Model
	ts     []int
	ps, ns []int
	nps    []int
	depth  int
	reps   int
	json   bool
	kvF32  bool
	prompt string // --prompt-file's text, or ""
	load   string // --load-mode
	cpus   string // --cpus
}

// runBenchSpec is `braid bench --spec`: for each thread count, prompt and
// generation length, one row per --spec-n-max (0: without speculation),
// each the median and range of reps greedy generations after a warm-up.
func runBenchSpec(sf *specFlags, a benchSpecArgs, cf *clusterFlags, stdout, stderr io.Writer) error {
	if len(a.nps) != 1 || a.nps[0] != 1 {
		return usagef("--spec measures one sequence (-np 1); speculation across a batch is the server's")
	}
	if a.depth != 0 {
		return usagef("-d with --spec: give the context as the prompt (-p or --prompt-file)")
	}
	for _, n := range a.ns {
		if n < 2 {
			return usagef("-n %d with --spec: decode needs at least 2 generated tokens", n)
		}
	}
	sf.warnSynth(stderr)
	longest := 0
	for _, p := range a.ps {
		for _, n := range a.ns {
			longest = max(longest, max(p, 1)+n)
		}
	}
	var rows []specBenchRow
	for _, t := range a.ts {
		mf := modelFlags{path: a.path, hub: a.hub, threads: t, ctx: longest + engine.MaxDrafts + 1, kvF32: a.kvF32, batch: 512, loadMode: a.load, cpus: a.cpus, threadsSet: true}
		if err := sf.prepare(&mf, cf, stderr); err != nil {
			return err
		}
		l, err := loadBackend(&mf, cf, 1, stderr)
		if err != nil {
			return err
		}
		out, err := benchSpecThreads(sf, a, l, &mf, stderr)
		l.Close()
		if err != nil {
			return err
		}
		rows = append(rows, out...)
	}
	if a.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tthreads\tprompt\tgen\tspec\tn-max\tdecode tok/s (median [min-max])\tspeed-up\taccepted/step\tacceptance by position\tsame output\t")
	for _, r := range rows {
		spec, up, acc, same := r.Spec, "-", "-", "-"
		if r.NMax == 0 {
			spec = "none"
		} else {
			if r.NMin < r.NMax {
				spec += fmt.Sprintf(" (adaptive %d-%d)", r.NMin, r.NMax)
			}
			if !r.Exact {
				spec += " tiles"
			}
			acc = fmt.Sprintf("%.2f", r.MeanAccepted)
		}
		if r.SpeedUp > 0 && r.NMax > 0 {
			up = fmt.Sprintf("%.2fx", r.SpeedUp)
		}
		if r.Identical != nil {
			same = map[bool]string{true: "yes", false: "NO"}[*r.Identical]
		}
		var pos []string
		for _, x := range r.Acceptance {
			pos = append(pos, fmt.Sprintf("%.0f%%", 100*x))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Model, r.Threads, r.PromptTokens, r.GenTokens, spec, r.NMax,
			fmtRange(r.DecodeTPSMedian, r.DecodeTPSMin, r.DecodeTPSMax), up, acc, strings.Join(pos, " "), same)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sf.rates != nil {
		fmt.Fprintf(stdout, "*** SYNTHETIC ACCEPTANCE (--spec-synth-rates %s): benchmark only, the generated text is not the model's ***\n", sf.synth)
	}
	return nil
}

// benchSpecThreads runs every row of one loaded model.
func benchSpecThreads(sf *specFlags, a benchSpecArgs, l *loaded, mf *modelFlags, stderr io.Writer) ([]specBenchRow, error) {
	d, release, err := sf.drafter(l, mf, 1, stderr)
	if err != nil {
		return nil, err
	}
	defer release()
	V := l.backend.Vocab()
	var textIDs []int32
	if a.prompt != "" {
		tok, err := tokenizer.FromGGUF(l.file)
		if err != nil {
			return nil, err
		}
		textIDs = tok.Encode(a.prompt, true, false)
	}
	var rows []specBenchRow
	for _, p := range a.ps {
		prompt := textIDs
		if prompt == nil {
			// The same random prompt for every row of this length.
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			prompt = make([]int32, max(p, 1))
			for i := range prompt {
				prompt[i] = int32(rng.IntN(V))
			}
		}
		for _, n := range a.ns {
			if len(prompt)+n > l.ctx {
				return nil, fmt.Errorf("a prompt of %d tokens and %d generated do not fit the context of %d", len(prompt), n, l.ctx)
			}
			baseTPS, haveBase := 0.0, false
			var baseToks []int32
			for _, nmax := range sf.nmaxs {
				row := specBenchRow{benchRow: benchRow{Model: filepath.Base(a.path), Threads: mf.threads, PromptTokens: len(prompt), GenTokens: n, Parallel: 1, Runs: a.reps},
					Spec: sf.kind, NMax: nmax, NMin: min(sf.nmin, nmax), SynthRates: sf.rates, Exact: sf.exact && (l.pool != nil || l.cl != nil) && nmax > 0}
				st := &engine.SpecStats{}
				g := engine.NewGenerator(l.backend)
				if nmax > 0 {
					sp := sf.spec(l, d, nmax, st)
					if g, err = engine.NewSpecGenerator(l.backend, sp); err != nil {
						return nil, err
					}
				}
				var pp, tg []float64
				var toks []int32
				for r := -1; r < a.reps; r++ { // run -1 warms caches and the length control
					if r == 0 {
						*st = engine.SpecStats{}
					}
					params := sample.DefaultParams()
					params.Temperature = 0
					smp, err := sample.New(params, V)
					if err != nil {
						return nil, err
					}
					var got []int32
					res, err := g.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n, Context: l.ctx, Sampler: smp,
						Emit: func(id int32) error {
							if r == 0 {
								got = append(got, id)
							}
							return nil
						}})
					if err != nil {
						return nil, err
					}
					if r >= 0 {
						pp = append(pp, res.PrefillTPS())
						tg = append(tg, res.DecodeTPS())
					}
					if r == 0 {
						toks = got
					}
				}
				row.PrefillTPSMedian, row.PrefillTPSMin, row.PrefillTPSMax = medianRange(pp)
				row.DecodeTPSMedian, row.DecodeTPSMin, row.DecodeTPSMax = medianRange(tg)
				row.PeakRSSBytes = peakRSS()
				row.Drafted, row.Accepted, row.Acceptance = st.Drafted, st.Accepted, st.Acceptance()
				row.MeanAccepted, row.Steps = st.MeanAccepted(), st.Steps
				if nmax == 0 {
					baseTPS, haveBase, baseToks = row.DecodeTPSMedian, true, toks
				} else if haveBase {
					row.SpeedUp = row.DecodeTPSMedian / baseTPS
					if sf.rates == nil {
						same := slices.Equal(toks, baseToks)
						row.Identical = &same
					}
				}
				rows = append(rows, row)
				if !a.json {
					fmt.Fprintf(stderr, "done: t=%d p=%d n=%d spec n-max=%d\n", mf.threads, len(prompt), n, nmax)
				}
			}
		}
	}
	return rows, nil
}

// readPromptFile reads --prompt-file for bench (empty: none).
func readPromptFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	return string(b), err
}
