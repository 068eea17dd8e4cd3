package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"braid/internal/engine"
)

// TestShardFileRefused: a shard written by braid split is not a model; run,
// bench and serve say which rank it is and where it goes.
func TestShardFileRefused(t *testing.T) {
	needShared(t, stories)
	dir := t.TempDir()
	if _, e, code := braid(t, "", "split", "-m", stories, "--ranks", "2", "--out", dir); code != 0 {
		t.Fatalf("split: exit %d: %s", code, e)
	}
	shard := filepath.Join(dir, "stories260K-F32.rank1of2.gguf")
	for _, args := range [][]string{
		{"run", "-m", shard, "-p", "Once", "-n", "4"},
		{"bench", "-m", shard, "-p", "8", "-n", "4", "-r", "1"},
		{"serve", "-m", shard, "--listen", "127.0.0.1:0"},
		{"split", "-m", shard, "--ranks", "2", "--out", dir},
	} {
		o, e, code := braid(t, "", args...)
		if code != 1 || !strings.Contains(e, "is a shard file (rank 1 of 2, written by braid split)") || !strings.Contains(e, "give it to a worker") || o != "" {
			t.Errorf("%s on a shard: exit %d, stdout %q:\n%s", args[0], code, o, e)
		}
		if strings.Contains(e, "listening") {
			t.Errorf("%s: listened before refusing:\n%s", args[0], e)
		}
	}
}

// TestServeLoadErrorFirst: a model that cannot load is the first and only
// thing serve says, not after "listening" and "shutting down".
func TestServeLoadErrorFirst(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("not a model at all"), 0o644)
	for _, m := range []string{bad, filepath.Join(t.TempDir(), "missing.gguf")} {
		_, e, code := braid(t, "", "serve", "-m", m, "--listen", "127.0.0.1:0")
		lines := strings.Split(strings.TrimSpace(e), "\n")
		if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "braid serve: gguf:") {
			t.Errorf("serve -m %s: exit %d:\n%s", m, code, e)
		}
	}
}

// startServe starts braid serve on a free port and returns its address and
// a reader of its stderr lines.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string, chan string) {
	t.Helper()
	cmd := exec.Command(braidBin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	re := regexp.MustCompile(`listening on http://(\S+)`)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before listening")
			}
			if m := re.FindStringSubmatch(l); m != nil {
				return cmd, m[1], lines
			}
		case <-deadline:
			t.Fatal("serve never listened")
		}
	}
}

func waitLine(t *testing.T, lines chan string, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stderr ended before %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within %v", want, d)
		}
	}
}

// TestServeSecondInterrupt: the first Ctrl-C starts a graceful shutdown,
// which waits for running requests; a second one ends serve at once.
func TestServeSecondInterrupt(t *testing.T) {
	needShared(t, stories)
	cmd, addr, lines := startServe(t, "-m", stories, "-c", "64", "--parallel", "1", "--grace", "60s")
	waitLine(t, lines, "ready:", 30*time.Second)
	// A request whose body never ends keeps the server busy.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"prompt\":")
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	waitLine(t, lines, "send it again to quit at once", 10*time.Second)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
		t.Fatal("serve exited after one interrupt although a request was running (grace 60s)")
	case <-time.After(500 * time.Millisecond):
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the second interrupt took %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running after a second interrupt")
	}
}

// TestServeAccessLogJSON: --log-format json writes every line as JSON, one
// access line per request with its tokens.
func TestServeAccessLogJSON(t *testing.T) {
	needShared(t, stories)
	if _, e, code := braid(t, "", "serve", "-m", stories, "--log-format", "xml"); code != 2 || !strings.Contains(e, `--log-format "xml"`) {
		t.Errorf("--log-format xml: %d %s", code, e)
	}
	_, addr, lines := startServe(t, "-m", stories, "-c", "64", "--parallel", "1", "--log-format", "json")
	waitLine(t, lines, "ready:", 30*time.Second)
	resp, err := httpPost("http://"+addr+"/v1/completions", `{"model":"stories260K-F32","prompt":"Once","max_tokens":3,"temperature":0}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp != 200 {
		t.Fatalf("status %d", resp)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l := <-lines:
			if !strings.HasPrefix(l, "{") {
				t.Fatalf("a line that is not JSON: %q", l)
			}
			if strings.Contains(l, `"path":"/v1/completions"`) {
				for _, want := range []string{`"status":200`, `"completion_tokens":3`, `"prompt_tokens":2`, `"method":"POST"`, `"duration_ms":`} {
					if !strings.Contains(l, want) {
						t.Errorf("access line lacks %s: %s", want, l)
					}
				}
				return
			}
		case <-deadline:
			t.Fatal("no access line")
		}
	}
}

func httpPost(url, body string) (int, error) {
	resp, err := httpClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestInterruptedRate: a run that ended early reports the rate of the
// tokens it made, not 0.
func TestInterruptedRate(t *testing.T) {
	var tm tokenTimes
	base := time.Now()
	for i := 0; i < 11; i++ {
		tm.n++
		if i == 0 {
			tm.first = base
		}
		tm.last = base.Add(time.Duration(i) * 100 * time.Millisecond)
	}
	// the engine's figure for an interrupted run: tokens, no decode time
	st := engine.Stats{GenTokens: 11}
	if r := tm.rate(st); r < 9.99 || r > 10.01 {
		t.Errorf("rate %g, want 10 tok/s", r)
	}
	if r := (&tokenTimes{}).rate(engine.Stats{GenTokens: 11, Decode: time.Second}); r != 10 {
		t.Errorf("a finished run's rate %g, want the engine's 10", r)
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// TestSmallDefects: each a defect found by trying braid as a new user.
func TestSmallDefects(t *testing.T) {
	needShared(t, stories)
	// BRAID_KERNELS with a value it does not know was ignored silently.
	cmd := exec.Command(braidBin, "doctor")
	cmd.Env = append(os.Environ(), "BRAID_KERNELS=bogus")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `BRAID_KERNELS="bogus": the only setting is generic`) {
		t.Errorf("BRAID_KERNELS=bogus: %v: %s", err, out)
	}
	// A worker address without a port waited 10 s before failing.
	start := time.Now()
	_, e, code := braid(t, "", "run", "-m", stories, "-p", "x", "--workers", "127.0.0.1")
	if code != 2 || !strings.Contains(e, `--workers: item 0 "127.0.0.1": no port`) || time.Since(start) > 3*time.Second {
		t.Errorf("--workers without a port: exit %d after %v: %s", code, time.Since(start), e)
	}
	if _, e, code := braid(t, "", "run", "-m", stories, "-p", "x", "--workers", "127.0.0.1:70000"); code != 2 || !strings.Contains(e, `port "70000"`) {
		t.Errorf("--workers port 70000: exit %d: %s", code, e)
	}
	// inspect said a model of an unsupported architecture "fits".
	vocab := shared + "/vocab/ggml-vocab-falcon.gguf"
	if o, e, code := braid(t, "", "inspect", vocab); code != 0 || strings.Contains(o, ": fits") || !strings.Contains(o, `braid cannot run it: model: architecture "falcon" is not supported`) {
		t.Errorf("inspect falcon: exit %d:\n%s%s", code, o, e)
	}
	// plan showed rank 0's memory as unknown with --ranks.
	if o, e, code := braid(t, "", "plan", "-m", stories, "--ranks", "2"); code != 0 || !regexp.MustCompile(`(?m)^0\s+local\s.*GiB\s+yes$`).MatchString(o) ||
		!strings.Contains(o, "the memory of rank 1 is unknown") {
		t.Errorf("plan --ranks 2: exit %d:\n%s%s", code, o, e)
	}
	// bench -p 0 -n 0 printed an empty row.
	if o, e, code := braid(t, "", "bench", "-m", stories, "-p", "0", "-n", "0", "-r", "1"); code != 2 || o != "" || !strings.Contains(e, "-p 0 -n 0: nothing to measure") {
		t.Errorf("bench -p 0 -n 0: exit %d: %q %s", code, o, e)
	}
	o, e, code := braid(t, "", "bench", "-m", stories, "-p", "0,8", "-n", "0,4", "-r", "1", "--json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(o), &rows) != nil || len(rows) != 3 {
		t.Errorf("bench -p 0,8 -n 0,4: exit %d, %d rows: %s %s", code, len(rows), o, e)
	}
}
