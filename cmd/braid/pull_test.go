package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/hub/hubtest"
)

// hubEnv runs braid against the test hub h with its own Hugging Face home.
func hubEnv(h *hubtest.Hub, home string, args ...string) *exec.Cmd {
	cmd := exec.Command(braidBin, args...)
	env := []string{"HF_ENDPOINT=" + h.URL, "HF_HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "xdg")}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "HF_") && !strings.HasPrefix(e, "HUGGINGFACE_") && !strings.HasPrefix(e, "XDG_CACHE_HOME=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	return cmd
}

func runHub(t *testing.T, h *hubtest.Hub, home string, args ...string) (string, string, int) {
	t.Helper()
	cmd := hubEnv(h, home, args...)
	var o, e bytes.Buffer
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

// TestPullAndRunByName: `braid pull` fetches a model from the hub into the
// Hugging Face cache; run, inspect, tokenize, bench and plan open it as
// ORG/NAME:QUANT; a model not in the cache is fetched only with --pull;
// ls lists and rm removes.
func TestPullAndRunByName(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny-Q8_0.gguf")
	if _, e, code := braid(t, "", "genmodel", "--preset", "tiny", "--type", "Q8_0", "--out", model); code != 0 {
		t.Fatalf("genmodel: %s", e)
	}
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(
		hubtest.Repo{Name: "test/Tiny-GGUF", Files: []hubtest.File{{Path: "tiny-Q8_0.gguf", Data: data}, {Path: "README.md", Data: []byte("hi"), NoLFS: true}}},
		hubtest.Repo{Name: "test/Other-GGUF", Files: []hubtest.File{{Path: "other-Q8_0.gguf", Data: data}}},
	)
	defer h.Close()
	home := filepath.Join(dir, "hf")

	out, e, code := runHub(t, h, home, "pull", "test/Tiny-GGUF:Q8_0")
	if code != 0 {
		t.Fatalf("pull: exit %d: %s", code, e)
	}
	path := strings.TrimSpace(out)
	if !strings.HasPrefix(path, filepath.Join(home, "hub", "models--test--Tiny-GGUF", "snapshots")) || !strings.Contains(e, "test/Tiny-GGUF:Q8_0") {
		t.Errorf("pull printed %q, stderr %q", path, e)
	}
	if _, e, code := runHub(t, h, home, "pull", "test/Tiny-GGUF:Q8_0"); code != 0 || !strings.Contains(e, "already in the cache") {
		t.Errorf("second pull: exit %d: %s", code, e)
	}

	ref, _, code := braid(t, "", "run", "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", "0")
	if code != 0 {
		t.Fatal("run by path failed")
	}
	got, e, code := runHub(t, h, home, "run", "-m", "test/Tiny-GGUF:q8_0", "-p", "Once upon a time", "-n", "8", "--temp", "0")
	if code != 0 || got != ref {
		t.Errorf("run by name: exit %d, %q, want %q\n%s", code, got, ref, e)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "test/Tiny-GGUF:Q8_0"}, "llama"},
		{[]string{"plan", "-m", "test/Tiny-GGUF", "--ranks", "2"}, "pulls"},
		{[]string{"bench", "-m", "test/Tiny-GGUF:Q8_0", "-p", "8", "-n", "4", "-r", "1"}, "tiny-Q8_0.gguf"},
	} {
		if out, e, code := runHub(t, h, home, c.args...); code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output lacks %q:\n%s%s", c.args, code, c.want, out, e)
		}
	}
	if out, e, code := runHub(t, h, home, "tokenize", "-m", "test/Tiny-GGUF:Q8_0"); code == 0 || !strings.Contains(e, "JSON array") {
		t.Errorf("tokenize without input: %d %s %s", code, out, e) // it found the model, then read stdin
	}

	// Not in the cache: an error saying how to get it, and nothing fetched.
	served := h.Served.Load()
	_, e, code = runHub(t, h, home, "run", "-m", "test/Other-GGUF:Q8_0", "-p", "x", "-n", "1")
	if code == 0 || !strings.Contains(e, "braid pull test/Other-GGUF:Q8_0") || !strings.Contains(e, "--pull") || h.Served.Load() != served {
		t.Errorf("run of an uncached model: exit %d: %s", code, e)
	}
	got, e, code = runHub(t, h, home, "run", "-m", "test/Other-GGUF:Q8_0", "--pull", "-p", "Once upon a time", "-n", "8", "--temp", "0")
	if code != 0 || got != ref || h.Served.Load() != served+int64(len(data)) {
		t.Errorf("run --pull: exit %d, %q: %s", code, got, e)
	}

	out, e, code = runHub(t, h, home, "ls")
	if code != 0 || !strings.Contains(out, "test/Other-GGUF") || !strings.Contains(out, "test/Tiny-GGUF") || !strings.Contains(out, "llama") || !strings.Contains(out, "Q8_0") {
		t.Errorf("ls: exit %d:\n%s%s", code, out, e)
	}
	if _, e, code := runHub(t, h, home, "rm", "test/Other-GGUF:Q8_0"); code != 0 || !strings.Contains(e, "freed") {
		t.Errorf("rm: exit %d: %s", code, e)
	}
	if out, _, _ := runHub(t, h, home, "ls"); strings.Contains(out, "Other") {
		t.Errorf("ls after rm:\n%s", out)
	}

	// Bad input: exit non-zero with a clear message.
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"pull", "test/Tiny-GGUF:Q5_K_M"}, 1, "quantizations there: Q8_0"},
		{[]string{"pull", "test/Missing"}, 1, "repository test/Missing not found"},
		{[]string{"pull", "test/Tiny-GGUF", "--revision", "nope"}, 1, `revision "nope" not found`},
		{[]string{"pull", "not a repo"}, 2, "not ORG/NAME"},
		{[]string{"pull"}, 2, "want one model"},
		{[]string{"rm", "test/Never"}, 1, "not in the cache"},
	} {
		if _, e, code := runHub(t, h, home, c.args...); code != c.code || !strings.Contains(e, c.msg) {
			t.Errorf("%v: exit %d, want %d with %q: %s", c.args, code, c.code, c.msg, e)
		}
	}
}

// TestServeByName: /v1/models lists the model under the name it was asked
// for.
func TestServeByName(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny-Q8_0.gguf")
	if _, e, code := braid(t, "", "genmodel", "--preset", "tiny", "--type", "Q8_0", "--out", model); code != 0 {
		t.Fatalf("genmodel: %s", e)
	}
	data, _ := os.ReadFile(model)
	h := hubtest.New(hubtest.Repo{Name: "test/Tiny-GGUF", Files: []hubtest.File{{Path: "tiny-Q8_0.gguf", Data: data}}})
	defer h.Close()
	home := filepath.Join(dir, "hf")
	cmd := hubEnv(h, home, "serve", "-m", "test/Tiny-GGUF:Q8_0", "--pull", "--listen", "127.0.0.1:0", "--parallel", "1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	url := ""
	for url == "" && sc.Scan() {
		if l := sc.Text(); strings.Contains(l, "listening on http://") {
			url = strings.Fields(l[strings.Index(l, "listening on ")+len("listening on "):])[0]
		}
	}
	go io.Copy(io.Discard, stderr)
	if url == "" {
		t.Fatal("serve printed no address")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/models")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), `"id":"test/Tiny-GGUF:Q8_0"`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/v1/models: %s", b)
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPullProcesses: a `braid pull` killed mid-download resumes from where
// it stopped; two pulls of the same model at once download it once and
// both end with the verified file.
func TestPullProcesses(t *testing.T) {
	data := make([]byte, 40<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	h := hubtest.New(hubtest.Repo{Name: "test/Big-GGUF", Files: []hubtest.File{{Path: "big-Q4_K_M.gguf", Data: data}}})
	defer h.Close()
	h.Delay.Store(int64(3 * time.Millisecond)) // ~1 s per 8 MiB chunk
	home := t.TempDir()
	blobs := filepath.Join(home, "hub", "models--test--Big-GGUF", "blobs")

	cmd := hubEnv(h, home, "pull", "test/Big-GGUF")
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := filepath.Glob(filepath.Join(blobs, "*.braidpart.state"))
		if len(st) == 1 {
			if b, _ := os.ReadFile(st[0]); bytes.Contains(b[bytes.IndexByte(b, '\n')+1:], []byte("1")) {
				break // a chunk is on disk
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no chunk finished: %s", e.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill() // no chance to clean up
	cmd.Wait()
	first := h.Served.Load()
	if first >= int64(len(data)) {
		t.Fatalf("the whole file went out before the kill")
	}
	h.Delay.Store(0)
	out, errOut, code := runHub(t, h, home, "pull", "test/Big-GGUF")
	if code != 0 {
		t.Fatalf("resumed pull: exit %d: %s", code, errOut)
	}
	if total := h.Served.Load(); total >= first+int64(len(data)) {
		t.Errorf("the resumed pull fetched %d bytes after %d: it started over", total-first, first)
	}
	got, err := os.ReadFile(strings.TrimSpace(out))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("resumed file differs (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(blobs, "*.braidpart*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	// Two at once, into a fresh cache.
	home = t.TempDir()
	h.Delay.Store(int64(200 * time.Microsecond))
	served := h.Served.Load()
	var cmds [2]*exec.Cmd
	var outs, errs [2]bytes.Buffer
	for i := range cmds {
		cmds[i] = hubEnv(h, home, "pull", "test/Big-GGUF:Q4_K_M")
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &errs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cmds {
		if err := cmds[i].Wait(); err != nil {
			t.Fatalf("pull %d: %v: %s", i, err, errs[i].String())
		}
	}
	if outs[0].String() != outs[1].String() {
		t.Errorf("the two pulls name different files: %q %q", outs[0].String(), outs[1].String())
	}
	got, err = os.ReadFile(strings.TrimSpace(outs[0].String()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file differs (%v)", err)
	}
	if n := h.Served.Load() - served; n != int64(len(data)) {
		t.Errorf("two pulls at once fetched %d bytes, want the file once (%d)", n, len(data))
	}
	if !strings.Contains(errs[0].String()+errs[1].String(), "waiting for another download") {
		t.Errorf("neither pull waited for the other:\n%s\n%s", errs[0].String(), errs[1].String())
	}
}
