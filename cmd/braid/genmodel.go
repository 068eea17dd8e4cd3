package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"braid/internal/modelgen"
)

func init() {
	register("genmodel", "write a random-weight model of a real shape (for benchmarks)", runGenModel)
}

func runGenModel(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("genmodel", "--preset NAME --type Q4_K_M|Q8_0|F16|... --out FILE.gguf [--seed S]", stderr)
	preset := fs.String("preset", "llama-1b", "model shape: "+strings.Join(modelgen.PresetNames(), ", "))
	typ := fs.String("type", "Q4_K_M", "weight format or mix")
	out := fs.String("out", "", "output file")
	seed := fs.Uint64("seed", 1, "random seed")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("--out FILE is required")
	}
	cfg, ok := modelgen.Presets[*preset]
	if !ok {
		return usagef("--preset %q: known presets are %s", *preset, strings.Join(modelgen.PresetNames(), ", "))
	}
	t, rule, err := modelgen.Mix(*typ)
	if err != nil {
		return usagef("--type: %v", err)
	}
	cfg.Type, cfg.TypeFor, cfg.Seed = t, rule, *seed
	cfg.Name = fmt.Sprintf("braid-random %s %s", *preset, *typ)
	start := time.Now()
	if err := modelgen.WriteFile(*out, cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s) in %.1fs\n", *out, *preset, *typ, time.Since(start).Seconds())
	return nil
}
