package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"braid/internal/modelgen"
	"braid/internal/quant"
)

func init() {
	register("demo", "show this node (doctor), generate a small model and inspect it", runDemo)
}

// runDemo is the README's first command: it needs no model download, so a
// fresh machine can see braid work end to end in seconds.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "[--keep DIR]", stderr)
	keep := fs.String("keep", "", "write the generated model into DIR and keep it (default: a temporary directory, removed)")
	typ := fs.String("type", "Q4_K", "weight format of the generated model")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	t, err := quant.ParseType(*typ)
	if err != nil {
		return usagef("--type: %v", err)
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "braid-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	fmt.Fprintln(stdout, "== braid doctor")
	writeDoctor(stdout)

	path := filepath.Join(dir, "demo-llama-"+t.String()+".gguf")
	cfg := modelgen.Config{Arch: "llama", Name: "braid demo (random weights)", Layers: 4, Embd: 256, FF: 768,
		Heads: 8, KVHeads: 4, Vocab: 1024, Context: 2048, Type: t, EmbedType: quant.Q8_0, Seed: 1}
	fmt.Fprintf(stdout, "\n== generating a random-weight llama model: %s\n", path)
	if err := modelgen.WriteFile(path, cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n== braid inspect %s\n", path)
	return runInspect([]string{path}, stdout, stderr)
}
