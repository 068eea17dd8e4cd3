package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"braid/internal/hub/hubtest"
	"braid/internal/modelgen"
	"braid/internal/plan"
	"braid/internal/quant"
)

// startWorker runs `braid worker` on a free loopback port with env (the
// test's own environment without its HF_ and XDG_CACHE_HOME variables)
// and returns its address; the worker is killed when the test ends.
func startWorker(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(braidBin, append([]string{"worker", "--listen", "127.0.0.1:0", "-t", "1"}, args...)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "HF_") && !strings.HasPrefix(e, "HUGGINGFACE_") && !strings.HasPrefix(e, "XDG_CACHE_HOME=") && !strings.HasPrefix(e, "BRAID_SECRET=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
		for sc.Scan() {
		}
	}()
	select {
	case l := <-line:
		f := strings.Fields(l)
		if len(f) < 5 || f[2] != "listening" {
			t.Fatalf("worker printed %q", l)
		}
		return f[4]
	case <-time.After(20 * time.Second):
		t.Fatal("the worker printed no address")
	}
	return ""
}

// TestPlanSources: `braid plan` with a hub model asks each worker where
// its weights would come from and prints, per rank and address, read,
// pull or receive with the bytes: a worker with its own copy of the file
// reads its shard, one with the model in its hub cache reads it there, one
// with an empty cache pulls the whole model from the (fake) hub, one
// started with --no-pull receives its shard from this node. Nothing is
// downloaded. A worker that cannot be reached is listed as unreachable and
// the plan exits non-zero.
func TestPlanSources(t *testing.T) {
	dir := t.TempDir()
	// Every dimension divides by 5, so an even tensor split over five ranks
	// gives each the same bytes.
	model := filepath.Join(dir, "plan-Q8_0.gguf")
	if err := modelgen.WriteFile(model, modelgen.Config{Arch: "llama", Layers: 2, Embd: 160, FF: 320, Heads: 5, KVHeads: 5,
		Vocab: 640, Context: 128, Type: quant.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(hubtest.Repo{Name: "test/Plan-GGUF", Files: []hubtest.File{{Path: "plan-Q8_0.gguf", Data: data}}})
	defer h.Close()
	home := filepath.Join(dir, "coordinator")
	if _, e, code := runHub(t, h, home, "pull", "test/Plan-GGUF:Q8_0"); code != 0 {
		t.Fatalf("pull: %s", e)
	}
	cachedHome := filepath.Join(dir, "cached")
	if _, e, code := runHub(t, h, cachedHome, "pull", "test/Plan-GGUF:Q8_0"); code != 0 {
		t.Fatalf("pull: %s", e)
	}
	env := func(home string) []string {
		return []string{"HF_ENDPOINT=" + h.URL, "HF_HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "xdg")}
	}
	wRead := startWorker(t, env(filepath.Join(dir, "read")))
	wCache := startWorker(t, env(cachedHome))
	pullHome := filepath.Join(dir, "pull")
	wPull := startWorker(t, env(pullHome))
	wRecv := startWorker(t, env(filepath.Join(dir, "receive")), "--no-pull")

	// A cluster file: the coordinator's path does not exist on the
	// workers' "nodes", except for the one given its own copy.
	cf := filepath.Join(dir, "cluster.toml")
	nowhere := "/nonexistent/braid/plan-Q8_0.gguf"
	src := fmt.Sprintf("split = \"tensor\"\ntensor-split = [1, 1, 1, 1, 1]\n[[rank]]\n"+
		"[[rank]]\naddr = %q\nmodel = %q\n[[rank]]\naddr = %q\nmodel = %q\n[[rank]]\naddr = %q\nmodel = %q\n[[rank]]\naddr = %q\nmodel = %q\n",
		wRead, model, wCache, nowhere, wPull, nowhere, wRecv, nowhere)
	if err := os.WriteFile(cf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	served := h.Served.Load()
	out, e, code := runHub(t, h, home, "plan", "-m", "test/Plan-GGUF:Q8_0", "--cluster", cf, "-c", "64")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, e)
	}
	t.Logf("braid plan --cluster:\n%s", out)
	rows := sourceRows(t, out)
	if len(rows) != 5 {
		t.Fatalf("plan lists %d ranks' sources, want 5:\n%s", len(rows), out)
	}
	shard := rows[0].bytes
	for i, want := range []struct{ addr, action, bytes, from string }{
		{"local", "read", shard, "its shard of " + filepath.Join(home, "hub")},
		{wRead, "read", shard, "its copy at " + model},
		{wCache, "read", shard, "its hub cache " + filepath.Join(cachedHome, "hub")},
		{wPull, "pull", plan.Bytes(int64(len(data))), "from the hub " + h.URL + " into its hub cache " + filepath.Join(pullHome, "hub") + ", then reads its shard (" + shard + ")"},
		{wRecv, "receive", shard, "its shard streamed from this node: no copy at " + nowhere + "; test/Plan-GGUF:Q8_0 is not in its hub cache"},
	} {
		r := rows[i]
		if r.rank != fmt.Sprint(i) || r.addr != want.addr || r.action != want.action || r.bytes != want.bytes || !strings.HasPrefix(r.from, want.from) {
			t.Errorf("rank %d: %+v, want %+v", i, r, want)
		}
	}
	if !strings.Contains(rows[4].from, "(--no-pull)") {
		t.Errorf("the --no-pull worker's row does not say why: %q", rows[4].from)
	}
	if shard == "0 B" || shard == plan.Bytes(int64(len(data))) {
		t.Errorf("rank 0 reads %s of a %d-byte model", shard, len(data))
	}
	if !strings.Contains(out, plan.Bytes(int64(len(data)))+" pulled from the hub, "+shard+" streamed from this node") {
		t.Errorf("no totals line:\n%s", out)
	}
	if strings.Contains(out, "memory is unknown") || strings.Contains(out, "  ?") {
		t.Errorf("the workers' memory is not in the plan:\n%s", out)
	}
	if got := h.Served.Load() - served; got != 0 {
		t.Errorf("braid plan downloaded %d bytes", got)
	}
	if m, _ := filepath.Glob(filepath.Join(pullHome, "hub", "models--*", "blobs", "*")); len(m) != 0 {
		t.Errorf("braid plan left files in the pulling worker's cache: %v", m)
	}

	// A worker that is not there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	out, e, code = runHub(t, h, home, "plan", "-m", "test/Plan-GGUF:Q8_0", "--workers", wRead+","+gone, "--split", "tensor", "--net-timeout", "1s", "-c", "64")
	rows = sourceRows(t, out)
	if code != 1 || len(rows) != 3 || rows[2].addr != gone || rows[2].action != "unreachable" || !strings.Contains(rows[2].from, "not reachable") ||
		!strings.Contains(e, "rank 2 ("+gone+")") || !strings.Contains(out, "rank 2 ("+gone+") could not be asked: its memory is unknown") {
		t.Fatalf("plan with an unreachable worker: exit %d, rows %+v\n%s%s", code, rows, out, e)
	}
	// Its copy at this node's path (--workers names no other).
	if rows[1].action != "read" || !strings.HasPrefix(rows[1].from, "its copy at "+filepath.Join(home, "hub")) {
		t.Errorf("a worker with the file at this node's path: %+v", rows[1])
	}
}

type sourceRow struct{ rank, addr, action, bytes, from string }

// sourceRows reads the rows of plan's "weights at load" table.
func sourceRows(t *testing.T, out string) []sourceRow {
	t.Helper()
	_, tail, ok := strings.Cut(out, "weights at load")
	if !ok {
		return nil
	}
	var rows []sourceRow
	for _, l := range strings.Split(tail, "\n")[2:] {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] == "in" {
			continue
		}
		r := sourceRow{rank: f[0], addr: f[1], action: f[2]}
		rest := f[3:]
		if rest[0] == "-" {
			r.bytes, rest = "-", rest[1:]
		} else if len(rest) >= 2 {
			r.bytes, rest = rest[0]+" "+rest[1], rest[2:]
		}
		r.from = strings.Join(rest, " ")
		rows = append(rows, r)
	}
	return rows
}
