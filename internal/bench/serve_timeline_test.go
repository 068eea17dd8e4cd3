package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRunServeTimeline: each request's start is its time since the run
// began (it was 0 for every request: the time since year 1 saturates a
// Duration), and --request-rate inf is written as "inf", not 0.
func TestRunServeTimeline(t *testing.T) {
	url := startBraid(t, 2)
	rep, err := RunServe(context.Background(), ServeConfig{URL: url, Model: "stories", NumPrompts: 6, InputLen: 16, OutputLen: 4,
		Concurrency: 2, RequestRate: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	prev := time.Duration(-1)
	for i, r := range rep.Results {
		if !r.OK || r.Start < prev || r.Start > rep.Duration {
			t.Errorf("request %d: start %v after %v (run %v), ok %v", i, r.Start, prev, rep.Duration, r.OK)
		}
		prev = r.Start
	}
	if last := rep.Results[len(rep.Results)-1].Start; last < 50*time.Millisecond {
		t.Errorf("the last of 6 requests at 20/s started %v into the run", last)
	}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Config   map[string]any   `json:"config"`
		Requests []map[string]any `json:"requests"`
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Config["request_rate"] != 20.0 || out.Requests[5]["start_ns"].(float64) <= 0 {
		t.Errorf("JSON config %v, last start %v", out.Config, out.Requests[5]["start_ns"])
	}
	rep.Config.RequestRate = math.Inf(1)
	b.Reset()
	rep.WriteJSON(&b)
	if !strings.Contains(b.String(), `"request_rate": "inf"`) {
		t.Errorf("--request-rate inf written as: %s", b.String()[:300])
	}
}

// TestInputLenHonoured: the mean prompt is --input-len tokens on both
// endpoints; on chat the template's tokens count (they were left out, so
// chat prompts came out longer).
func TestInputLenHonoured(t *testing.T) {
	url := startBraid(t, 4)
	for _, endpoint := range []string{"completions", "chat"} {
		var log bytes.Buffer
		rep, err := RunServe(context.Background(), ServeConfig{URL: url, Model: "stories", Endpoint: endpoint, NumPrompts: 16,
			InputLen: 60, OutputLen: 2, Concurrency: 4, Seed: 5, Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		mean := float64(rep.InputTokens) / float64(rep.Completed)
		t.Logf("%s: mean prompt %.1f tokens (%s)", endpoint, mean, strings.TrimSpace(log.String()))
		if math.Abs(mean-60) > 5 {
			t.Errorf("%s: mean prompt %.1f tokens for --input-len 60", endpoint, mean)
		}
	}
}
