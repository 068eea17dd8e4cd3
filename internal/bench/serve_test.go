package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/server"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
)

const storiesPath = "../../../shared/testdata/models/stories260K/stories260K-F32.gguf"

// startBraid serves stories260K on 127.0.0.1:0 with the real server.
func startBraid(t *testing.T, parallel int) string {
	t.Helper()
	f, err := gguf.Open(storiesPath)
	if err != nil {
		sharedtest.Missing(t, "shared test model absent (%v): skipping the load-generator test", err)
	}
	t.Cleanup(func() { f.Close() })
	pool := kernels.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	const ctxLen = 2048
	cache, err := m.NewCache(model.CacheSize{Positions: parallel * ctxLen, Ctx: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := engine.NewScheduler(engine.NewLocal(m, cache), engine.SchedulerConfig{Parallel: parallel, Context: ctxLen, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	schedDone := make(chan struct{})
	go func() { sched.Run(ctx); close(schedDone) }()
	srv := server.New(server.Config{Model: "stories"})
	srv.SetReady(&server.Backend{Sched: sched, Tok: tok, Vocab: m.Cfg.Vocab})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() { cancel(); <-served; <-schedDone })
	return "http://" + ln.Addr().String()
}

func TestRunServeAgainstBraid(t *testing.T) {
	url := startBraid(t, 4)
	for _, endpoint := range []string{"completions", "chat"} {
		var log bytes.Buffer
		rep, err := RunServe(context.Background(), ServeConfig{
			URL: url, Model: "stories", Endpoint: endpoint, NumPrompts: 12, InputLen: 48, OutputLen: 24,
			Concurrency: 4, RequestRate: math.Inf(1), Seed: 7, Log: &log,
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Completed != 12 || rep.Failed != 0 {
			t.Fatalf("%s: %d completed, %d failed: %v", endpoint, rep.Completed, rep.Failed, rep.FirstErrors)
		}
		// ignore_eos makes every request generate exactly output-len tokens.
		if rep.OutputTokens != 12*24 {
			t.Errorf("%s: %d output tokens, want %d", endpoint, rep.OutputTokens, 12*24)
		}
		for _, r := range rep.Results {
			if r.TTFT <= 0 || r.E2E < r.TTFT || len(r.ITL) == 0 {
				t.Fatalf("%s: implausible timings %+v", endpoint, r)
			}
		}
		if endpoint == "completions" {
			// Calibrated on the server's count: within a few tokens of 48
			// (random words tokenize unevenly).
			mean := float64(rep.InputTokens) / 12
			if mean < 30 || mean > 70 {
				t.Errorf("mean prompt %0.f tokens for --input-len 48 (%s)", mean, log.String())
			}
		}
		if rep.TTFT.N != 12 || rep.TTFT.Median <= 0 || rep.E2E.P99 < rep.E2E.Median || rep.OutputTPS <= 0 {
			t.Errorf("%s: bad summary %+v", endpoint, rep)
		}
	}
}

// TestRunServeConstrained: half the requests carry a JSON schema (and,
// in chat, forced tool calls): they are counted apart, the tool calls
// counted, and every reply still streams.
func TestRunServeConstrained(t *testing.T) {
	url := startBraid(t, 4)
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":99}},"required":["a"],"additionalProperties":false}`)
	for _, c := range []map[string]json.RawMessage{
		{"json_schema": schema},
		{"tools": json.RawMessage(`[{"type":"function","function":{"name":"f","parameters":` + string(schema) + `}}]`), "tool_choice": json.RawMessage(`"required"`), "parallel_tool_calls": json.RawMessage(`false`)},
	} {
		endpoint := "completions"
		if _, ok := c["tools"]; ok {
			endpoint = "chat"
		}
		rep, err := RunServe(context.Background(), ServeConfig{
			URL: url, Model: "stories", Endpoint: endpoint, NumPrompts: 8, InputLen: 16, OutputLen: 150,
			Concurrency: 4, RequestRate: math.Inf(1), Seed: 3, Constrain: c, ConstrainFraction: 0.5,
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Completed != 8 || rep.Constrained != 4 {
			t.Fatalf("%s: %d completed, %d constrained: %v", endpoint, rep.Completed, rep.Constrained, rep.FirstErrors)
		}
		if endpoint == "chat" && rep.ToolCalls != 4 {
			t.Errorf("%d tool calls from 4 forced requests", rep.ToolCalls)
		}
		if rep.TTFTCons == nil || rep.TTFTFree == nil || rep.TTFTCons.N != 4 {
			t.Errorf("%s: the halves are not summarised apart: %+v", endpoint, rep)
		}
		var buf bytes.Buffer
		rep.WriteTable(&buf)
		if !strings.Contains(buf.String(), "Constrained requests:") || !strings.Contains(buf.String(), "Median TPOT constrained") {
			t.Errorf("table:\n%s", buf.String())
		}
	}
	if _, err := RunServe(context.Background(), ServeConfig{URL: url, Model: "stories", NumPrompts: 1, InputLen: 4, OutputLen: 4, Constrain: map[string]json.RawMessage{"temperature": json.RawMessage("1")}}); err == nil {
		t.Error("a field that is not a constraint was accepted")
	}
}

func TestReportOutputs(t *testing.T) {
	url := startBraid(t, 2)
	dir := t.TempDir()
	ds := filepath.Join(dir, "prompts.jsonl")
	os.WriteFile(ds, []byte(`{"prompt":"Once upon a time","output_len":8}`+"\n"+`{"prompt":"The cat sat"}`+"\n"), 0o644)
	rep, err := RunServe(context.Background(), ServeConfig{URL: url, Model: "stories", NumPrompts: 5, OutputLen: 6, Concurrency: 2, RequestRate: 50, Dataset: ds})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 5 || rep.OutputTokens != 8+6+8+6+8 {
		t.Fatalf("dataset run: %d completed, %d tokens", rep.Completed, rep.OutputTokens)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"Successful requests:", "Median TTFT (ms):", "P99 ITL (ms):", "Output token throughput"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Completed int              `json:"completed"`
		TTFT      Dist             `json:"ttft"`
		Requests  []map[string]any `json:"requests"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Completed != 5 || len(back.Requests) != 5 || back.TTFT.N != 5 {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	// A server that refuses everything: failures counted, not hidden.
	rep, err = RunServe(context.Background(), ServeConfig{URL: url, Model: "nope", NumPrompts: 2, OutputLen: 4, Dataset: ds})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 2 || !strings.Contains(rep.FirstErrors[0], "404") {
		t.Errorf("unknown model: %d failed, errors %v", rep.Failed, rep.FirstErrors)
	}
	if _, err := RunServe(context.Background(), ServeConfig{URL: url, Model: "nope", NumPrompts: 2, InputLen: 8, OutputLen: 4}); err == nil || !strings.Contains(err.Error(), "calibration") {
		t.Errorf("random prompts against a refusing server: err = %v", err)
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ q, want float64 }{{0.5, 5.5}, {0.9, 9.1}, {0.99, 9.91}, {0, 1}, {1, 10}} {
		if got := quantile(v, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v (numpy linear)", tc.q, got, tc.want)
		}
	}
}
