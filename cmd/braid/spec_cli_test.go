package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/modelgen"
	"braid/internal/quant"
)

// TestRunSpec: braid run with every drafter prints what it prints without
// speculation (greedy), and a summary of the drafts.
func TestRunSpec(t *testing.T) {
	stories := filepath.Join(shared, "models", "stories260K", "stories260K-F32.gguf")
	draft := filepath.Join(shared, "models", "stories260K", "stories260K-Q8_0.gguf")
	glm := filepath.Join(shared, "models", "glm4moe", "tiny-glm4moe-Q8_0.gguf")
	qwen35 := filepath.Join(shared, "models", "qwen35", "tiny-qwen35-Q8_0.gguf")
	needShared(t, stories)
	needShared(t, glm)
	needShared(t, qwen35)
	for _, c := range []struct {
		model string
		args  []string
	}{
		{stories, []string{"--spec", "ngram"}},
		{stories, []string{"--spec", "ngram", "--spec-n-max", "3", "--spec-n-min", "3"}},
		{stories, []string{"--spec", "draft", "--model-draft", draft, "--spec-n-max", "4"}},
		{stories, []string{"--spec", "draft", "-md", draft, "--spec-n-min", "2"}},
		{glm, []string{"--spec", "mtp"}},
		{glm, []string{"--spec", "mtp", "--spec-n-max", "2", "--spec-n-min", "2"}},
		{qwen35, []string{"--spec", "ngram", "--spec-n-max", "3", "--spec-n-min", "3"}},
		{qwen35, []string{"--spec", "draft", "--model-draft", draft}},
		{qwen35, []string{"--spec", "mtp"}},
	} {
		name := filepath.Base(c.model) + " " + strings.Join(c.args, " ")
		base := []string{"run", "-m", c.model, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-t", "1"}
		want, errOut, code := braid(t, "", base...)
		if code != 0 {
			t.Fatalf("%s: plain run: exit %d: %s", name, code, errOut)
		}
		got, errOut, code := braid(t, "", append(base, c.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		if got != want {
			t.Errorf("%s: output differs from the run without --spec:\n got %q\nwant %q", name, got, want)
		}
		if !strings.Contains(errOut, "speculative decoding (") {
			t.Errorf("%s: no summary on stderr: %s", name, errOut)
		}
	}
}

// TestSpecRefusals: what speculation cannot do is refused at the start,
// with the reason.
func TestSpecRefusals(t *testing.T) {
	stories := filepath.Join(shared, "models", "stories260K", "stories260K-F32.gguf")
	needShared(t, stories)
	other := filepath.Join(t.TempDir(), "other.gguf")
	if err := modelgen.WriteFile(other, modelgen.Config{Arch: "llama", Layers: 1, Embd: 64, FF: 96, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.F32}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-m", stories, "--spec", "mtp"}, 1, "has no MTP head"},
		{[]string{"-m", stories, "--spec", "draft"}, 2, "--spec draft needs --model-draft"},
		{[]string{"-m", stories, "--spec", "draft", "--model-draft", other}, 1, "must share the target's vocabulary"},
		{[]string{"-m", stories, "--spec", "ngram", "--spec-n-max", "99"}, 2, "--spec-n-max 99: must be in [1, 32]"},
		{[]string{"-m", stories, "--spec", "ngram", "--spec-n-max", "2", "--spec-n-min", "3"}, 2, "must not exceed --spec-n-max"},
		{[]string{"-m", stories, "--spec", "beam"}, 2, "want ngram, draft, mtp or none"},
		{[]string{"-m", stories, "--spec-n-max", "3"}, 2, "need --spec"},
		{[]string{"-m", stories, "--spec", "ngram", "--spec-synth-rates", "0.9,1.2"}, 2, "not a probability"},
	} {
		_, errOut, code := braid(t, "", append([]string{"run", "-p", "Once", "-n", "4"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// TestBenchSpec: the A/B rows of braid bench --spec, as JSON, and the
// loud marking of synthetic acceptance.
func TestBenchSpec(t *testing.T) {
	model := filepath.Join(shared, "models", "tiny-llama", "tiny-llama-Q4_K_M.gguf")
	needShared(t, model)
	out, errOut, code := braid(t, "", "bench", "-m", model, "-p", "16", "-n", "48", "-r", "2", "-t", "1", "--spec", "ngram", "--spec-n-max", "0,2,4", "--json")
	if code != 0 {
		t.Fatalf("bench --spec: exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench --spec --json: %v\n%s", err, out)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %s", len(rows), out)
	}
	for i, r := range rows {
		for _, k := range []string{"model", "decode_tps_median", "spec", "spec_n_max", "drafted", "accepted", "acceptance", "mean_accepted", "verify_steps"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %d lacks %q", i, k)
			}
		}
		if i > 0 {
			if r["spec_exact"] != true {
				t.Errorf("row %d: verification not exact: %v", i, r)
			}
			if r["identical_to_no_spec"] != true {
				t.Errorf("row %d: output not identical to the row without speculation: %v", i, r)
			}
			if r["speedup"] == nil || r["speedup"].(float64) <= 0 {
				t.Errorf("row %d: no speed-up: %v", i, r)
			}
			if len(r["acceptance"].([]any)) == 0 {
				t.Errorf("row %d: no acceptance by position: %v", i, r)
			}
		}
	}
	out, errOut, code = braid(t, "", "bench", "-m", model, "-p", "8", "-n", "24", "-r", "1", "-t", "1", "--spec", "ngram", "--spec-n-max", "0,3", "--spec-n-min", "3", "--spec-synth-rates", "0.9,0.8,0.7")
	if code != 0 {
		t.Fatalf("bench --spec-synth-rates: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "BENCHMARK ONLY") || !strings.Contains(out, "SYNTHETIC ACCEPTANCE") {
		t.Errorf("synthetic rates not marked:\nstdout %s\nstderr %s", out, errOut)
	}
	if !strings.Contains(out, "speed-up") || !strings.Contains(out, "acceptance by position") {
		t.Errorf("bench table lacks the spec columns:\n%s", out)
	}
}

// TestRunSpecWorkers: over real worker processes (a tensor split over
// three ranks, a layer split over two and an uneven one over three), the
// n-gram and draft-model drafters give what the same split gives without
// --spec, one Step frame per worker verifying all of a step's drafts. The
// targets are Q4_K_M and Q5_K_M, whose kernel tiles have rounded
// differently from the one-token dot (Q5_K's still do): the equality rests
// on the workers verifying exactly as the coordinator asks in each Step
// frame (internal/cluster's TestExactVerifyOnWorkers checks the bits).
func TestRunSpecWorkers(t *testing.T) {
	q4 := filepath.Join(shared, "models", "tiny-llama", "tiny-llama-Q4_K_M.gguf")
	q5 := filepath.Join(shared, "models", "tiny-llama", "tiny-llama-Q5_K_M.gguf")
	draft := filepath.Join(shared, "models", "stories260K", "stories260K-Q8_0.gguf")
	needShared(t, q4)
	needShared(t, q5)
	needShared(t, draft)
	w1, w2 := startWorker(t, nil), startWorker(t, nil)
	for _, c := range []struct {
		model string
		split []string
	}{
		{q4, []string{"--workers", w1 + "," + w2, "--split", "tensor"}},
		{q4, []string{"--workers", w1, "--split", "layer"}},
		{q4, []string{"--workers", w1 + "," + w2, "--split", "layer", "--tensor-split", "1,3,2"}},
		{q5, []string{"--workers", w1 + "," + w2, "--split", "tensor"}},
	} {
		split := append([]string{filepath.Base(c.model)}, c.split...)
		base := append([]string{"run", "-m", c.model, "-p", "Once upon a time", "-n", "40", "--temp", "0", "-t", "1"}, c.split...)
		want, errOut, code := braid(t, "", base...)
		if code != 0 {
			t.Fatalf("%v: plain run: exit %d: %s", split, code, errOut)
		}
		for _, spec := range [][]string{{"--spec", "ngram", "--spec-n-max", "4", "--spec-n-min", "4"}, {"--spec", "draft", "--model-draft", draft, "--spec-n-max", "3"}} {
			got, errOut, code := braid(t, "", append(base, spec...)...)
			if code != 0 {
				t.Fatalf("%v %v: exit %d: %s", split, spec, code, errOut)
			}
			if got != want {
				t.Errorf("%v %v: output differs from the split without --spec:\n got %q\nwant %q", split, spec, got, want)
			}
			if !strings.Contains(errOut, "speculative decoding (") {
				t.Errorf("%v %v: no summary: %s", split, spec, errOut)
			}
		}
	}
}

// TestRunSpecMTPWorkers: braid run --spec mtp over real worker processes,
// the head on the coordinator fed by the hidden states the trunk's last
// stage returns, gives what the same split gives without --spec, with
// drafts accepted, on glm4moe and the recurrent qwen35: tensor, layer and
// both, two to four ranks, even and uneven.
func TestRunSpecMTPWorkers(t *testing.T) {
	glm := filepath.Join(shared, "models", "glm4moe", "tiny-glm4moe-Q8_0.gguf")
	glmK := filepath.Join(shared, "models", "glm4moe", "tiny-glm4moe-Q4_K_M.gguf")
	qwen := filepath.Join(shared, "models", "qwen35", "tiny-qwen35-Q8_0.gguf")
	needShared(t, glm)
	needShared(t, glmK)
	needShared(t, qwen)
	w1, w2, w3 := startWorker(t, nil), startWorker(t, nil), startWorker(t, nil)
	cases := []struct {
		model string
		args  []string
	}{
		{glm, []string{"--workers", w1, "--split", "tensor"}},
		{glmK, []string{"--workers", w1, "--split", "layer"}},
		{qwen, []string{"--workers", w1 + "," + w2, "--split", "layer", "--tensor-split", "1,2,1"}},
		{glm, []string{"--workers", w1 + "," + w2, "--split", "tensor", "--tensor-split", "1,2,3"}},
		{qwen, []string{"--workers", w1, "--split", "tensor"}},
		{glm, []string{"--workers", w1 + "," + w2 + "," + w3, "--split", "tensor=2,layer=2"}},
	}
	if testing.Short() {
		cases = cases[:3]
	}
	for _, c := range cases {
		name := filepath.Base(c.model) + " " + strings.Join(c.args[2:], " ")
		// The prompt's greedy text is far from ties on every layout of
		// the weights (with "Once upon a time, once upon a time" the 6th
		// token of the Q4_K_M model is at a near-tie: llama.cpp and the
		// plain layout pick one token, the repacked one another, and the
		// text then has no repeat for the head to predict).
		base := append([]string{"run", "-m", c.model, "-p", "Once upon a time", "-n", "32", "--temp", "0", "-t", "1"}, c.args...)
		want, errOut, code := braid(t, "", base...)
		if code != 0 {
			t.Fatalf("%s: plain run: exit %d: %s", name, code, errOut)
		}
		got, errOut, code := braid(t, "", append(base, "--spec", "mtp")...)
		if code != 0 {
			t.Fatalf("%s --spec mtp: exit %d: %s", name, code, errOut)
		}
		if got != want {
			t.Errorf("%s --spec mtp: output differs from the split without --spec:\n got %q\nwant %q", name, got, want)
		}
		if !strings.Contains(errOut, "speculative decoding (mtp)") {
			t.Errorf("%s --spec mtp: no summary: %s", name, errOut)
		}
		// glm4moe's shaped head predicts repeats, which its greedy text
		// has; qwen35's never repeats a token at once (its README).
		if c.model != qwen && strings.Contains(errOut, "accepted 0 (") {
			t.Errorf("%s --spec mtp: no draft accepted: %s", name, errOut)
		}
	}
}

// TestBenchSpecMTPWorkers: braid bench --spec mtp over a worker reports
// the MTP rows, exact and identical to the row without speculation.
func TestBenchSpecMTPWorkers(t *testing.T) {
	glm := filepath.Join(shared, "models", "glm4moe", "tiny-glm4moe-Q8_0.gguf")
	needShared(t, glm)
	w1 := startWorker(t, nil)
	out, errOut, code := braid(t, "", "bench", "-m", glm, "-p", "16", "-n", "24", "-r", "1", "-t", "1", "--workers", w1, "--split", "tensor",
		"--spec", "mtp", "--spec-n-max", "0,2", "--json")
	if code != 0 {
		t.Fatalf("bench --spec mtp --workers: exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	if r := rows[1]; r["spec"] != "mtp" || r["spec_exact"] != true || r["identical_to_no_spec"] != true {
		t.Errorf("the MTP row: %v", r)
	}
}

// TestServeSpec: braid serve with --spec answers concurrent greedy
// completions with the text it gives without speculation, and /metrics
// carries the drafts by position.
func TestServeSpec(t *testing.T) {
	draft := filepath.Join(shared, "models", "stories260K", "stories260K-Q8_0.gguf")
	needShared(t, stories)
	needShared(t, draft)
	prompts := []string{"Once upon a time", "The cat", "Lily and Tom went to the park", "One day", "Ben had a big red ball. He", "The sun"}
	texts := func(addr string) []string {
		out := make([]string, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Go(func() {
				body, _ := json.Marshal(map[string]any{"model": "stories260K-F32", "prompt": p, "max_tokens": 40, "temperature": 0})
				resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var r struct {
					Choices []struct {
						Text string `json:"text"`
					} `json:"choices"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 {
					t.Errorf("prompt %d: %v %v", i, err, r)
					return
				}
				out[i] = r.Choices[0].Text
			})
		}
		wg.Wait()
		return out
	}
	serve := func(args ...string) string {
		_, addr, lines := startServe(t, append([]string{"-m", stories, "-c", "256", "--parallel", "3", "-t", "1"}, args...)...)
		waitLine(t, lines, "ready:", 30*time.Second)
		return addr
	}
	want := texts(serve())
	for _, args := range [][]string{{"--spec", "ngram"}, {"--spec", "draft", "--model-draft", draft, "--spec-n-max", "4"}} {
		addr := serve(args...)
		got := texts(addr)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%v, prompt %q: %q, without --spec %q", args, prompts[i], got[i], want[i])
			}
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, k := range []string{`braid_spec_drafted_total{position="1"}`, `braid_spec_accepted_total{position="1"}`, "braid_spec_acceptance_ratio", "braid_spec_accepted_per_step"} {
			if !strings.Contains(string(m), k) {
				t.Errorf("%v: /metrics lacks %s", args, k)
			}
		}
		if strings.Contains(string(m), "braid_spec_accepted_total{position=\"1\"} 0\n") {
			t.Errorf("%v: no first draft accepted:\n%s", args, m)
		}
	}
}

// TestServeSpecMTP: braid serve --spec mtp drafts with the model's own
// head inside the batches and answers what it answers without, on glm4moe
// and on the recurrent qwen35 (rejected drafts rolled back to the state
// snapshots).
func TestServeSpecMTP(t *testing.T) {
	for _, name := range []string{"glm4moe/tiny-glm4moe-Q8_0", "qwen35/tiny-qwen35-Q8_0"} {
		t.Run(name, func(t *testing.T) { serveSpecMTP(t, filepath.Join(shared, "models", name+".gguf"), nil) })
	}
}

// TestServeSpecMTPWorkers: the same over a tensor split with a worker,
// the MTP head on the server's node.
func TestServeSpecMTPWorkers(t *testing.T) {
	path := filepath.Join(shared, "models", "glm4moe", "tiny-glm4moe-Q8_0.gguf")
	needShared(t, path)
	// A worker serves one coordinator: one each for the two servers.
	serveSpecMTP(t, path, func() []string { return []string{"--workers", startWorker(t, nil), "--split", "tensor"} })
}

// serveSpecMTP compares a server with --spec mtp and one without; extra,
// when set, gives each server's further flags.
func serveSpecMTP(t *testing.T, path string, extra func() []string) {
	needShared(t, path)
	serve := func(args ...string) string {
		var more []string
		if extra != nil {
			more = extra()
		}
		_, addr, lines := startServe(t, append(append([]string{"-m", path, "-c", "256", "--parallel", "3", "-t", "1"}, more...), args...)...)
		waitLine(t, lines, "ready:", 30*time.Second)
		return addr
	}
	complete := func(addr, p string) string {
		body, _ := json.Marshal(map[string]any{"model": strings.TrimSuffix(filepath.Base(path), ".gguf"), "prompt": p, "max_tokens": 32, "temperature": 0})
		resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("%v %v", err, r)
		}
		return r.Choices[0].Text
	}
	plain, mtp := serve(), serve("--spec", "mtp")
	for _, p := range []string{"Once upon a time", "The dog ran and ran and ran"} {
		if got, want := complete(mtp, p), complete(plain, p); got != want {
			t.Errorf("%q: %q with --spec mtp, %q without", p, got, want)
		}
	}
	resp, err := http.Get("http://" + mtp + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `braid_spec_drafted_total{position="1"}`) || strings.Contains(string(m), "braid_spec_drafted_total{position=\"1\"} 0\n") {
		t.Errorf("no MTP drafts in /metrics:\n%s", m)
	}
}

// TestPlanSpecMTP: braid plan --spec mtp counts the MTP head in rank 0's
// row and says so; a model without a head and an unknown drafter are
// refused.
func TestPlanSpecMTP(t *testing.T) {
	glm := filepath.Join(shared, "models", "glm4moe", "tiny-glm4moe-Q8_0.gguf")
	needShared(t, glm)
	needShared(t, stories)
	rank0 := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "0 ") {
				return l
			}
		}
		t.Fatalf("no rank 0 row:\n%s", out)
		return ""
	}
	base := []string{"plan", "-m", glm, "--ranks", "2", "--split", "layer", "--mem", "1G"}
	plain, errOut, code := braid(t, "", base...)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	mtp, errOut, code := braid(t, "", append(base, "--spec", "mtp")...)
	if code != 0 {
		t.Fatalf("plan --spec mtp: exit %d: %s", code, errOut)
	}
	if !strings.Contains(mtp, "rank 0 also holds the MTP head") || strings.Contains(plain, "MTP head") {
		t.Errorf("the MTP head's note: with --spec mtp\n%s\nwithout\n%s", mtp, plain)
	}
	if rank0(mtp) == rank0(plain) {
		t.Errorf("rank 0's row does not change with the MTP head: %q", rank0(mtp))
	}
	if _, errOut, code := braid(t, "", "plan", "-m", stories, "--ranks", "2", "--spec", "mtp"); code != 1 || !strings.Contains(errOut, "has no MTP head") {
		t.Errorf("plan --spec mtp of a model without a head: exit %d, %s", code, errOut)
	}
	if _, errOut, code := braid(t, "", append(base, "--spec", "beam")...); code != 2 || !strings.Contains(errOut, "want ngram, draft, mtp or none") {
		t.Errorf("plan --spec beam: exit %d, %s", code, errOut)
	}
}
