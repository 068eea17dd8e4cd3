package main

import (
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchServeSmallContext: bench serve against braid serve on
// stories260K (a context of 128 tokens) with --input-len 16 --output-len
// 16: the calibration fits the server's context (it asks /props), every
// request succeeds, and the per-request start times in the JSON are
// non-decreasing in issue order and never after their own first token.
// A plot is written too. Lengths beyond the context are refused before
// the run, naming the numbers.
func TestBenchServeSmallContext(t *testing.T) {
	needShared(t, stories)
	_, addr, _ := startServe(t, "-m", stories, "--parallel", "2")
	// The server listens while it loads: wait until it is ready.
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("braid serve not ready within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/props")
	if err != nil {
		t.Fatal(err)
	}
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if json.Unmarshal(data, &props) != nil || props.Settings.NCtx != 128 {
		t.Fatalf("/props: want n_ctx 128 (stories260K's context): %s", data)
	}
	resp, err = http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if json.Unmarshal(data, &models) != nil || len(models.Data) == 0 {
		t.Fatalf("/v1/models: %s", data)
	}
	model := models.Data[0].ID
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "run.json"), filepath.Join(dir, "run.png")
	for _, endpoint := range []string{"completions", "chat"} {
		out, errOut, code := braid(t, "", "bench", "serve", "--url", "http://"+addr, "--model", model, "--endpoint", endpoint,
			"--input-len", "16", "--output-len", "16", "--num-prompts", "12", "--concurrency", "3", "--json", jsonPath, "--plot", plotPath)
		if code != 0 {
			t.Fatalf("%s: bench serve failed (%d):\n%s\n%s", endpoint, code, out, errOut)
		}
		if !strings.Contains(errOut, "calibration:") {
			t.Errorf("%s: no calibration line: %s", endpoint, errOut)
		}
		if warned := strings.Contains(errOut, "warning: every request takes"); warned != (endpoint == "chat") {
			t.Errorf("%s: warned %v that --input-len is below the fixed tokens: %s", endpoint, warned, errOut)
		}
		data, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Results []struct {
				OK           bool  `json:"ok"`
				PromptTokens int   `json:"prompt_tokens"`
				OutputTokens int   `json:"output_tokens"`
				Start        int64 `json:"start_ns"`
				TTFT         int64 `json:"ttft_ns"`
				E2E          int64 `json:"e2e_ns"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("%s: %v: %.300s", endpoint, err, data)
		}
		if len(rep.Results) != 12 {
			t.Fatalf("%s: %d results, want 12", endpoint, len(rep.Results))
		}
		prev := int64(-1)
		for i, r := range rep.Results {
			// On the chat endpoint the template's markers alone take
			// more than 16 tokens here: one word then (and a warning).
			lo, hi := 8, 24
			if endpoint == "chat" {
				lo, hi = 17, 60
			}
			if !r.OK || r.OutputTokens != 16 || r.PromptTokens < lo || r.PromptTokens > hi {
				t.Errorf("%s: request %d: ok %v, %d prompt tokens (want %d to %d), %d output tokens (want 16)", endpoint, i, r.OK, r.PromptTokens, lo, hi, r.OutputTokens)
			}
			if r.Start < prev {
				t.Errorf("%s: request %d starts at %dns, before request %d (%dns)", endpoint, i, r.Start, i-1, prev)
			}
			if r.TTFT <= 0 || r.E2E < r.TTFT {
				t.Errorf("%s: request %d: ttft %dns, e2e %dns", endpoint, i, r.TTFT, r.E2E)
			}
			prev = r.Start
		}
		f, err := os.Open(plotPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: the plot is not a PNG: %v", endpoint, err)
		}
		f.Close()
	}
	// Lengths the context cannot hold: refused before the run.
	_, errOut, code := braid(t, "", "bench", "serve", "--url", "http://"+addr, "--model", model, "--input-len", "100", "--output-len", "64", "--num-prompts", "2")
	if code == 0 || !strings.Contains(errOut, "164") || !strings.Contains(errOut, "128") {
		t.Errorf("--input-len 100 --output-len 64 on a context of 128: exit %d, %s", code, errOut)
	}
}
