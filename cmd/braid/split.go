package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"braid/internal/cluster"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/plan"
	"braid/internal/quant"
)

func init() {
	register("split", "write one shard file per rank (a worker loads its own from --models-dir)", runSplit)
}

func runSplit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("split", "-m MODEL (--ranks N | --workers N | --workers HOST:PORT,...) [--split tensor|layer|tensor=T,layer=L] [--tensor-split W,...] --out DIR", stderr)
	path := fs.String("m", "", "model file (GGUF), or ORG/NAME[:QUANT] from the Hugging Face hub cache")
	pull := pullFlag(fs)
	nRanks := fs.Int("ranks", 0, "number of ranks, this node included")
	workers := fs.String("workers", "", "number of workers (ranks = workers + 1), or their addresses in rank order")
	split := fs.String("split", "layer", "tensor | layer | tensor=T,layer=L")
	tsplit := fs.String("tensor-split", "", "weights per rank, in rank order, e.g. 3,1 (default: even)")
	out := fs.String("out", "", "directory for the shard files (created if needed)")
	layout := fs.String("layout", "auto", "auto (the layout this CPU's kernels take, for nodes like it) | plain (the model's: any node) | x8 (every type that has it)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *path == "" || *out == "" {
		return usagef("-m MODEL and --out DIR are required")
	}
	if _, err := resolveModel(path, *pull, stderr); err != nil {
		return err
	}
	n := *nRanks
	switch {
	case *workers != "" && n != 0:
		return usagef("give --ranks or --workers, not both")
	case *workers != "":
		if k, err := strconv.Atoi(*workers); err == nil {
			if k < 1 {
				return usagef("--workers %d: need at least one worker", k)
			}
			n = k + 1
		} else {
			n = len(strings.Split(*workers, ",")) + 1
		}
	case n < 2:
		return usagef("--ranks N (at least 2) or --workers is required")
	}
	mode, err := plan.ParseMode(*split, n)
	if err != nil {
		return usageError{err}
	}
	var weights []float64
	if *tsplit != "" {
		if weights, err = parseTensorSplit(*tsplit); err != nil {
			return err
		}
		if len(weights) != n {
			return usagef("--tensor-split has %d weights for %d ranks", len(weights), n)
		}
	}
	lay, only, err := splitLayout(*layout)
	if err != nil {
		return err
	}
	f, err := gguf.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := refuseShard(f); err != nil {
		return err
	}
	if len(f.Files) > 1 {
		return fmt.Errorf("%s is a model in %d parts: merge it first (braid split reads one file)", *path, len(f.Files))
	}
	c, err := model.ReadConfig(f)
	if err != nil {
		return err
	}
	ranks := make([]plan.Rank, n)
	for i := range ranks {
		ranks[i].Name = "rank" + strconv.Itoa(i)
	}
	p, err := plan.Make(f, plan.Request{Ranks: ranks, Mode: mode, Weights: weights, Ctx: min(c.Context, 4096)})
	var fe *plan.FitError
	if err != nil && !errors.As(err, &fe) {
		return err
	}
	fmt.Fprintf(stderr, "braid: hashing %s\n", *path)
	sha, _, err := cluster.ModelSHA256(*path)
	if err != nil {
		return err
	}
	shards := make([]model.Shard, n)
	for i := range shards {
		shards[i] = p.Ranks[i].Shard
	}
	paths, err := cluster.WriteShards(f, sha, shards, mode.String(), *out, lay, only, stderr)
	if err != nil {
		return err
	}
	for _, s := range paths {
		fmt.Fprintln(stdout, s)
	}
	fmt.Fprintf(stderr, "braid: give each worker its file's directory as --models-dir (copy with cp --sparse=always or rsync -S: the files are sparse)\n")
	return nil
}

// splitLayout reads --layout: the layout shard files hold their linear
// layers in, and which types.
func splitLayout(s string) (kernels.Layout, func(quant.Type) bool, error) {
	switch s {
	case "auto":
		// What this node's kernels take, type by type: a node like this
		// one binds the file as it is.
		return kernels.X8, func(t quant.Type) bool { return kernels.LayoutFor(t) == kernels.X8 }, nil
	case "plain":
		return kernels.Plain, nil, nil
	case "x8":
		return kernels.X8, nil, nil
	}
	return kernels.Plain, nil, usagef("--layout %q: want auto, plain or x8", s)
}
