package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"braid/internal/bench"
	"braid/internal/bench/benchplot"
)

// runBenchServe is `braid bench serve`: a load generator for any
// OpenAI-compatible server (braid, llama-server, vLLM).
func runBenchServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench serve", "--url URL --model NAME [--num-prompts 200] [--input-len 128] [--output-len 128] [--concurrency 8] [--request-rate inf|R] [--seed S] [--dataset FILE.jsonl] [--json FILE] [--plot FILE.png]", stderr)
	var c bench.ServeConfig
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&c.Model, "model", "", "model name to request")
	fs.StringVar(&c.Endpoint, "endpoint", "completions", "completions (/v1/completions) or chat (/v1/chat/completions)")
	fs.IntVar(&c.NumPrompts, "num-prompts", 200, "requests to send")
	fs.IntVar(&c.InputLen, "input-len", 128, "prompt tokens per random prompt")
	fs.IntVar(&c.OutputLen, "output-len", 128, "tokens to generate per request (sent with ignore_eos)")
	fs.IntVar(&c.Concurrency, "concurrency", 8, "most requests in flight (0 = no bound)")
	rate := fs.String("request-rate", "inf", "requests per second (Poisson arrivals), or inf to send at once")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the random prompts and arrivals")
	fs.StringVar(&c.Dataset, "dataset", "", "JSONL file of {\"prompt\": ..., \"output_len\": N} instead of random prompts")
	keyFile := fs.String("api-key-file", "", "file whose first line is the API key (OPENAI_API_KEY is used otherwise)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "per-request timeout")
	fs.DurationVar(&c.Duration, "duration", 0, "stop sending new requests after this long (soak runs); 0 = send all --num-prompts")
	responseFormat := fs.String("response-format", "", "send this response_format (JSON, or @FILE) with the constrained requests")
	jsonSchema := fs.String("json-schema", "", "send this json_schema (a JSON Schema, or @FILE) with the constrained requests")
	gbnf := fs.String("grammar", "", "send this GBNF grammar (text, or @FILE) with the constrained requests")
	tools := fs.String("tools", "", "send these tools (a JSON array, or @FILE) with the constrained requests (--endpoint chat)")
	toolChoice := fs.String("tool-choice", "", "tool_choice of the constrained requests: auto, required, none, or a function name")
	fs.Float64Var(&c.ConstrainFraction, "constrained-fraction", 1, "share of the requests that carry the constraint flags, spread evenly")
	jsonOut := fs.String("json", "", "write the summary and per-request timings as JSON to FILE")
	plotOut := fs.String("plot", "", "write latency distributions and throughput as a PNG to FILE")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if c.Model == "" {
		return usagef("--model NAME is required (the name the server serves)")
	}
	if *rate == "inf" {
		c.RequestRate = math.Inf(1)
	} else {
		r, err := strconv.ParseFloat(*rate, 64)
		if err != nil || r <= 0 {
			return usagef("--request-rate %q: want inf or a positive number", *rate)
		}
		c.RequestRate = r
	}
	if err := constraintFields(&c, *responseFormat, *jsonSchema, *gbnf, *tools, *toolChoice); err != nil {
		return err
	}
	c.APIKey = os.Getenv("OPENAI_API_KEY")
	if *keyFile != "" {
		data, err := os.ReadFile(*keyFile)
		if err != nil {
			return fmt.Errorf("reading --api-key-file: %w", err)
		}
		c.APIKey = strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
	}
	c.Log = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.RunServe(ctx, c)
	if rep == nil {
		return err
	}
	rep.WriteTable(stdout)
	if *jsonOut != "" {
		f, ferr := os.Create(*jsonOut)
		if ferr != nil {
			return ferr
		}
		if werr := rep.WriteJSON(f); werr != nil {
			f.Close()
			return werr
		}
		if cerr := f.Close(); cerr != nil {
			return cerr
		}
	}
	if *plotOut != "" {
		if perr := benchplot.Write(rep, *plotOut); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d of %d requests failed", rep.Failed, len(rep.Results))
	}
	return nil
}

// constraintFields reads the constraint flags of bench serve into the
// request fields the constrained requests carry.
func constraintFields(c *bench.ServeConfig, responseFormat, jsonSchema, gbnf, tools, toolChoice string) error {
	read := func(flag, v string) ([]byte, error) {
		if name, ok := strings.CutPrefix(v, "@"); ok {
			data, err := os.ReadFile(name)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", flag, err)
			}
			return data, nil
		}
		return []byte(v), nil
	}
	c.Constrain = map[string]json.RawMessage{}
	for _, f := range []struct{ flag, field, v string }{{"response-format", "response_format", responseFormat}, {"json-schema", "json_schema", jsonSchema}, {"tools", "tools", tools}} {
		if f.v == "" {
			continue
		}
		data, err := read(f.flag, f.v)
		if err != nil {
			return err
		}
		if !json.Valid(data) {
			return usagef("--%s: not valid JSON", f.flag)
		}
		c.Constrain[f.field] = data
	}
	if gbnf != "" {
		data, err := read("grammar", gbnf)
		if err != nil {
			return err
		}
		q, _ := json.Marshal(string(data))
		c.Constrain["grammar"] = q
	}
	switch toolChoice {
	case "":
	case "auto", "required", "none":
		c.Constrain["tool_choice"], _ = json.Marshal(toolChoice)
	default:
		c.Constrain["tool_choice"], _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": toolChoice}})
	}
	if len(c.Constrain) == 0 {
		c.Constrain = nil
	}
	return nil
}
