package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"braid/internal/gguf"
	"braid/internal/tokenizer"
)

func init() {
	register("tokenize", "tokenize a JSON array of strings read on stdin", runTokenize)
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", "-m MODEL [--no-special] [--parse-special] < strings.json", stderr)
	path := fs.String("m", "", "model file (a vocabulary-only GGUF will do), or ORG/NAME[:QUANT] from the Hugging Face hub cache")
	pull := pullFlag(fs)
	noSpecial := fs.Bool("no-special", false, "do not add BOS/EOS")
	parseSpecial := fs.Bool("parse-special", false, "turn special-token text (e.g. <|im_start|>) into its token")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usagef("-m MODEL is required")
	}
	if _, err := resolveModel(path, *pull, stderr); err != nil {
		return err
	}
	var texts []string
	dec := json.NewDecoder(io.LimitReader(os.Stdin, 1<<30))
	if err := dec.Decode(&texts); err != nil {
		return fmt.Errorf("stdin: want a JSON array of strings: %w", err)
	}
	m, err := gguf.Open(*path)
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(m)
	if err != nil {
		return err
	}
	out := make([][]int32, len(texts))
	for i, s := range texts {
		out[i] = tok.Encode(s, !*noSpecial, *parseSpecial)
		if out[i] == nil {
			out[i] = []int32{}
		}
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(out)
}
