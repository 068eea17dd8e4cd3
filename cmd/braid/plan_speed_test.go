package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/modelgen"
	"braid/internal/plan"
	"braid/internal/quant"
)

// braidEnv runs the binary with extra environment.
func braidEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(braidBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestPlanSpeed: braid plan --nodes predicts every split of 1..3 nodes
// (with speculation when asked), with each split's memory per rank equal
// to the planner's for the same ranks, and recommends one of them; a bad
// spec is refused naming the field; local needs a calibration, which
// --calibrate caches under the user's cache directory.
func TestPlanSpeed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "speed-Q8_0.gguf")
	if err := modelgen.WriteFile(path, modelgen.Config{Arch: "llama", Layers: 6, Embd: 192, FF: 384, Heads: 6, KVHeads: 3,
		Vocab: 600, Context: 256, Type: quant.Q8_0, Seed: 27}); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "HOME=" + dir, "BRAID_CALIBRATE_QUICK=1"}
	out, e, code := braidEnv(t, env, "plan", "-m", path, "--nodes", "3xcpu:1GiB,10GB/s,link=1GB/s@50us", "--spec-rates", "0.9,0.8", "-c", "128", "-t", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	var rep speedReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	base := map[string]float64{}
	for _, r := range rep.Rows {
		key := r.Split
		if r.Spec != nil {
			key += " spec"
		}
		seen[key] = true
		if !r.Feasible || r.Prefill <= 0 || len(r.PerStream) != 3 || r.PerStream[0] <= 0 || r.Aggregate[2] < r.Aggregate[0] {
			t.Errorf("%s: %+v", key, r)
			continue
		}
		if r.Spec == nil {
			base[r.Split] = r.PerStream[0]
		} else if r.PerStream[0] <= base[r.Split] {
			t.Errorf("%s: speculation at 0.9,0.8 predicts %.1f tok/s, without %.1f", r.Split, r.PerStream[0], base[r.Split])
		}
		ranks := make([]plan.Rank, r.Nodes)
		for i := range ranks {
			ranks[i] = plan.Rank{Name: "r", Mem: 1 << 30}
		}
		p, err := plan.Make(f, plan.Request{Ranks: ranks, Mode: plan.Mode{TP: r.TP, PP: r.PP}, Ctx: 128, Parallel: 8, MaxBatch: 512, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Ranks {
			if r.MemPerRank[i] != p.Ranks[i].Total() {
				t.Errorf("%s rank %d: %d bytes, the planner says %d", key, i, r.MemPerRank[i], p.Ranks[i].Total())
			}
		}
	}
	for _, k := range []string{"single", "tp 2", "pp 2", "tp 3", "pp 3", "tp 3 spec", "pp 3 spec"} {
		if !seen[k] {
			t.Errorf("no %s row in %v", k, seen)
		}
	}
	if !seen[rep.Recommended] || rep.Reason == "" {
		t.Errorf("recommended %q (%s), not a row", rep.Recommended, rep.Reason)
	}

	// The table form names the recommendation too.
	out, e, code = braidEnv(t, env, "plan", "-m", path, "--nodes", "2xcpu:1GiB,10GB/s", "-c", "128", "-t", "1")
	if code != 0 || !strings.Contains(out, "recommended: ") || !strings.Contains(out, "pp 2") {
		t.Errorf("table: exit %d\n%s%s", code, out, e)
	}

	for _, tc := range []struct{ spec, want string }{
		{"2xcpu:1GiB,10GX/s", "bandwidth"},
		{"cpu:1XiB,10GB/s", "memory"},
		{"cpu:1GiB,10GB/s,link=1GB/s", "link"},
		{"tpu:1GiB", "unknown preset"},
		{"0xgb10", "count"},
		{"local", "no calibration"},
	} {
		_, e, code := braidEnv(t, env, "plan", "-m", path, "--nodes", tc.spec, "-t", "1")
		if code != 2 || !strings.Contains(e, tc.want) {
			t.Errorf("--nodes %q: exit %d, %q (want one naming %q)", tc.spec, code, e, tc.want)
		}
	}

	// A model described by its hyperparameters, planned without its file:
	// gpt-oss-120b fits one GB10 and tp 2 is predicted faster for one
	// stream than one node (the bytes halve, 72 exchanges cost less).
	desc := filepath.Join("..", "..", "internal", "perfmodel", "testdata", "published.json")
	out, e, code = braidEnv(t, env, "plan", "-m", desc+"#gpt-oss-120b MXFP4", "--nodes", "2xgb10", "-c", "512", "--json")
	if code != 0 {
		t.Fatalf("described model: exit %d: %s", code, e)
	}
	rep = speedReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	dec := map[string]float64{}
	for _, r := range rep.Rows {
		if r.Feasible && r.Experts == "ff" {
			dec[r.Split] = r.PerStream[0]
		}
	}
	if !(dec["single"] > 0 && dec["tp 2"] > dec["single"]) || !strings.Contains(rep.Model, "gpt-oss-120b") {
		t.Errorf("described gpt-oss-120b on 2 GB10s: %v (%s)", dec, rep.Model)
	}
	if _, e, code = braidEnv(t, env, "plan", "-m", desc+"#no such model", "--nodes", "gb10"); code != 2 || !strings.Contains(e, "GLM-5.2") {
		t.Errorf("an unknown described model: exit %d, %s", code, e)
	}

	// Calibrate, then local is this node.
	out, e, code = braidEnv(t, env, "plan", "--calibrate", "-t", "1")
	if code != 0 || !strings.Contains(out, "Q4_K") {
		t.Fatalf("calibrate: exit %d\n%s%s", code, out, e)
	}
	if _, err := os.Stat(filepath.Join(dir, "cache", "braid", "plan-calibration.json")); err != nil {
		t.Errorf("no cached calibration: %v", err)
	}
	out, e, code = braidEnv(t, env, "plan", "-m", path, "--nodes", "local,gb10", "-t", "1", "--json")
	if code != 0 || !strings.Contains(out, `"local: `) {
		t.Errorf("local after calibrating: exit %d\n%s%s", code, out, e)
	}
	// Another thread count makes the cache stale.
	_, e, code = braidEnv(t, env, "plan", "-m", path, "--nodes", "local", "-t", "2")
	if code != 2 || !strings.Contains(e, "stale") {
		t.Errorf("stale calibration: exit %d, %s", code, e)
	}
}
