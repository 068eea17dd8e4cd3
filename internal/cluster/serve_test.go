package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeOnWorkers runs `braid serve --workers` over a real worker
// process: a greedy completion equals `braid run` on one node; with the
// worker killed the request gets 503 naming the rank and the server stays
// up; with the worker back the same request succeeds again.
func TestServeOnWorkers(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-F32.gguf")
	env := workerEnv(t)
	w := startWorker(t, "127.0.0.1:0", env)
	want, errOut, code := braid(t, "run", "-m", path, "-p", "Once upon a time", "-n", "12", "--temp", "0", "-t", "1")
	if code != 0 {
		t.Fatalf("single node: exit %d: %s", code, errOut)
	}

	cmd := exec.Command(braidBin, "serve", "-m", path, "--workers", w.addr, "--split", "tensor", "-t", "1",
		"--listen", "127.0.0.1:0", "-c", "128", "--parallel", "2", "--net-timeout", "5s")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	// The server logs its address first and "ready" once loaded.
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url string
	deadline := time.After(60 * time.Second)
	for url == "" || !strings.Contains(url, "ready") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before it was ready")
			}
			if i := strings.Index(l, "listening on http://"); i >= 0 && url == "" {
				url = strings.Fields(l[i+len("listening on "):])[0]
			}
			if strings.Contains(l, "ready:") {
				url += " ready"
			}
		case <-deadline:
			t.Fatal("serve was not ready within 60s")
		}
	}
	url = strings.TrimSuffix(url, " ready")
	go io.Copy(io.Discard, chanReader(lines))

	complete := func() (int, string) {
		body := `{"model":"stories260K-F32","prompt":"Once upon a time","max_tokens":12,"temperature":0}`
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Choices []struct{ Text string }  `json:"choices"`
			Error   struct{ Message string } `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, r.Error.Message
		}
		return resp.StatusCode, r.Choices[0].Text
	}
	if code, text := complete(); code != http.StatusOK || strings.TrimSpace(text) != strings.TrimSpace(want) {
		t.Fatalf("over the cluster: %d %q; one node printed %q", code, text, want)
	}
	// /metrics has each rank's step and all-reduce time (a tensor split
	// all-reduces in every layer, so both ranks waited some) and the link.
	metrics := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	m := metrics()
	for _, series := range []string{
		`braid_rank_steps_total{rank="0",addr="local"}`, `braid_rank_steps_total{rank="1",addr="` + w.addr + `"}`,
		`braid_rank_step_seconds_total{rank="1",addr="` + w.addr + `"}`,
		`braid_rank_allreduce_seconds_total{rank="0",addr="local"}`, `braid_rank_allreduce_seconds_total{rank="1",addr="` + w.addr + `"}`,
	} {
		v, ok := metricValue(m, series)
		if !ok || v <= 0 {
			t.Errorf("/metrics: %s = %v (present %v), want > 0", series, v, ok)
		}
	}
	if !strings.Contains(m, `braid_cluster_link_info{rank="0",peer="1",addr="`) || !strings.Contains(m, `transport="`+sameHostTransport()+`"} 1`) {
		t.Errorf("/metrics lacks the data-plane link:\n%s", m)
	}
	w.kill()
	code, msg := complete()
	t.Logf("with the worker dead: %d %s", code, msg)
	if code, body := probe(t, url+"/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "rank 1") {
		t.Errorf("/ready after a failed step: %d %s, want 503 naming rank 1", code, body)
	}
	if code, body := probe(t, url+"/health"); code != http.StatusOK || !strings.Contains(body, `"status":"degraded"`) {
		t.Errorf("/health after a failed step: %d %s, want 200, degraded", code, body)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(msg, "rank 1") {
		t.Fatalf("with the worker dead: %d %q, want 503 naming rank 1", code, msg)
	}
	w.restart()
	var text string
	for i := 0; i < 20; i++ { // the cluster re-forms on the next step
		if code, text = complete(); code == http.StatusOK {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code != http.StatusOK || strings.TrimSpace(text) != strings.TrimSpace(want) {
		t.Fatalf("after the worker came back: %d %q", code, text)
	}
	t.Logf("after the worker came back: %q", text)
	if code, body := probe(t, url+"/ready"); code != http.StatusOK {
		t.Errorf("/ready after recovery: %d %s, want 200", code, body)
	}
}

// probe GETs a probe endpoint and returns its status and body.
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue finds one series' value in a Prometheus text page.
func metricValue(page, series string) (float64, bool) {
	for _, l := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// chanReader drains a channel of lines as a reader.
func chanReader(c <-chan string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		for l := range c {
			fmt.Fprintln(pw, l)
		}
		pw.Close()
	}()
	return pr
}
