package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"braid/internal/discover/dnstest"
)

// serveProc is a running `braid serve` whose standard error is kept.
type serveProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	errb strings.Builder
	done chan struct{}
}

// startServe runs `braid serve args...` with env and waits for the address
// it logs (it listens before the model is loaded).
func startServe(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	s := &serveProc{t: t, done: make(chan struct{})}
	s.cmd = exec.Command(braidBin, append([]string{"serve"}, args...)...)
	s.cmd.Env = append(os.Environ(), env...)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			l := sc.Text()
			s.mu.Lock()
			s.errb.WriteString(l + "\n")
			s.mu.Unlock()
			if i := strings.Index(l, "listening on http://"); i >= 0 {
				select {
				case urls <- strings.Fields(l[i+len("listening on "):])[0]:
				default:
				}
			}
		}
	}()
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	})
	select {
	case s.url = <-urls:
	case <-s.done:
		t.Fatalf("serve exited before listening:\n%s", s.stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen within 30 s:\n%s", s.stderr())
	}
	return s
}

func (s *serveProc) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errb.String()
}

// until polls cond every 20 ms for at most limit (a bound on a hung
// process, not a timing assertion).
func until(t *testing.T, limit time.Duration, what string, cond func() bool, logs ...func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, l := range logs {
				b.WriteString(l())
				b.WriteString("\n---\n")
			}
			t.Fatalf("%s: not within %v\n%s", what, limit, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePortOn finds a port free on every one of hosts.
func freePortOn(t *testing.T, hosts ...string) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Skipf("cannot listen on %s (needs 127.0.0.0/8 on loopback): %v", hosts[0], err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ok := true
		var held []net.Listener
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		ln.Close()
		for _, l := range held {
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatal("no port free on every host")
	return 0
}

// streamed is a streamed completion being read.
type streamed struct {
	resp   *http.Response
	events chan string // each data: payload
}

func startStream(t *testing.T, url, body string) *streamed {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	s := &streamed{resp: resp, events: make(chan string, 4096)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				s.events <- d
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next waits for the stream's next event; "" when it ended.
func (s *streamed) next(t *testing.T) string {
	t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-time.After(60 * time.Second):
		t.Fatal("no stream event within 60 s")
		return ""
	}
}

// TestLeaderWorkerSet forms a real cluster of `braid worker` processes on
// loopback the way it forms under a LeaderWorkerSet: from LWS_* variables
// alone, the workers' pod names resolving through an in-process DNS
// server (BRAID_DNS_SERVER) to 127.0.0.2 and 127.0.0.3 on one port.
//
//   - worker 1 starts before the leader and joins when it appears;
//   - the leader starts before worker 2, waits for it (retrying, logged)
//     and forms the cluster when it comes; meanwhile /health is 200
//     (loading) and /ready 503; /ready is 200 once every rank has loaded;
//   - SIGTERM to worker 2 in the middle of a stream ends that request at
//     once with an error naming rank 2 and saying it left; the worker
//     exits 0; /ready turns 503; the cluster re-forms by itself when the
//     worker is back, and serves again;
//   - SIGTERM to the leader drains: /ready 503 and new requests 503 while
//     the running stream goes on; then it exits 0.
func TestLeaderWorkerSet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a multi-process cluster test")
	}
	path := sharedModel(t, "stories260K/stories260K-F32.gguf")
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	for name, ip := range map[string]string{"braid-0-1.braid.test": "127.0.0.2", "braid-0-2.braid.test": "127.0.0.3"} {
		if err := dns.SetHost(name, ip); err != nil {
			t.Fatal(err)
		}
	}
	port := freePortOn(t, "127.0.0.2", "127.0.0.3")
	lws := func(index int) []string {
		return append(workerEnv(t), "BRAID_DNS_SERVER="+dns.Addr(), "LWS_LEADER_ADDRESS=braid-0.braid.test", "LWS_GROUP_SIZE=3",
			"LWS_WORKER_INDEX="+strconv.Itoa(index))
	}
	get := func(url string) (int, map[string]any) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}

	w1 := startWorker(t, "127.0.0.2:"+strconv.Itoa(port), lws(1), "--health-listen", "127.0.0.2:0")
	if code, v := get(w1.health + "/health"); code != 200 || v["status"] != "ok" || v["session"] != false {
		t.Fatalf("worker 1 /health before the leader: %d %v", code, v)
	}
	if code, _ := get(w1.health + "/ready"); code != 200 {
		t.Errorf("worker 1 /ready: %d", code)
	}
	until(t, 10*time.Second, "worker 1 logs what LWS says", func() bool {
		return strings.Contains(w1.stderr(), "worker: LeaderWorkerSet") && strings.Contains(w1.stderr(), "rank=1")
	}, w1.stderr)

	srv := startServe(t, lws(0), "-m", path, "--listen", "127.0.0.1:0", "--split", "tensor", "-t", "1", "-c", "2048",
		"--parallel", "2", "--worker-port", strconv.Itoa(port), "--net-timeout", "10s")
	// The leader waits for worker 2, which is not there yet.
	until(t, 30*time.Second, "the leader retries worker 2", func() bool {
		return strings.Contains(srv.stderr(), "worker not reachable yet; retrying") && strings.Contains(srv.stderr(), "braid-0-2.braid.test:"+strconv.Itoa(port))
	}, srv.stderr)
	if code, v := get(srv.url + "/ready"); code != 503 || !strings.Contains(fmt.Sprint(v["reason"]), "loading") {
		t.Errorf("/ready before every rank loaded: %d %v, want 503 loading", code, v)
	}
	if code, v := get(srv.url + "/health"); code != 200 || v["status"] != "loading" {
		t.Errorf("/health while loading: %d %v, want 200 loading", code, v)
	}
	for _, want := range []string{"discover: LeaderWorkerSet", "rank=1 addr=braid-0-1.braid.test:", "rank=2 addr=braid-0-2.braid.test:"} {
		if !strings.Contains(srv.stderr(), want) {
			t.Errorf("the leader's log lacks %q:\n%s", want, srv.stderr())
		}
	}
	w2 := startWorker(t, "127.0.0.3:"+strconv.Itoa(port), lws(2), "--health-listen", "127.0.0.3:0")
	until(t, 60*time.Second, "/ready once every rank loaded", func() bool { code, _ := get(srv.url + "/ready"); return code == 200 },
		srv.stderr, w1.stderr, w2.stderr)
	if code, v := get(w2.health + "/health"); code != 200 || v["session"] != true || v["rank"] != 2.0 || !strings.HasSuffix(fmt.Sprint(v["model"]), "stories260K-F32.gguf") {
		t.Errorf("worker 2 /health in the cluster: %d %v", code, v)
	}

	// SIGTERM to worker 2 while a stream runs.
	const long = `{"model":"stories260K-F32","prompt":"Once upon a time","max_tokens":1900,"stream":true,"temperature":0,"ignore_eos":true}`
	st := startStream(t, srv.url, long)
	if e := st.next(t); !strings.Contains(e, `"text"`) {
		t.Fatalf("first event: %s", e)
	}
	w2.cmd.Process.Signal(syscall.SIGTERM)
	var last string
	for e := st.next(t); e != "" && e != "[DONE]"; e = st.next(t) {
		last = e
	}
	if !strings.Contains(last, `"error"`) || !strings.Contains(last, "rank 2 (braid-0-2.braid.test:") || !strings.Contains(last, "left the cluster") ||
		!strings.Contains(last, "SIGTERM") {
		t.Errorf("the stream's last event: %s\nwant an error naming rank 2 and saying it left on SIGTERM\nworker 2:\n%s", last, w2.stderr())
	}
	t.Logf("the stream's end when worker 2 left: %s", last)
	<-w2.done
	if code := w2.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("worker 2 exited %d after SIGTERM, want 0:\n%s", code, w2.stderr())
	}
	if !strings.Contains(w2.stderr(), "worker: leaving the cluster") {
		t.Errorf("worker 2 did not log its leaving:\n%s", w2.stderr())
	}
	until(t, 30*time.Second, "/ready 503 with rank 2 gone", func() bool {
		code, v := get(srv.url + "/ready")
		return code == 503 && strings.Contains(fmt.Sprint(v["reason"]), "rank 2")
	}, srv.stderr)
	if code, v := get(srv.url + "/health"); code != 200 || v["status"] != "degraded" {
		t.Errorf("/health with rank 2 gone: %d %v, want 200 degraded", code, v)
	}
	w2.restart()
	until(t, 60*time.Second, "/ready once worker 2 is back", func() bool { code, _ := get(srv.url + "/ready"); return code == 200 },
		srv.stderr, w2.stderr)
	resp, err := http.Post(srv.url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"stories260K-F32","prompt":"Once upon a time","max_tokens":8,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text"`) {
		t.Errorf("a request after the re-form: %d %s", resp.StatusCode, b)
	}

	// SIGTERM to the leader while a stream runs: it drains.
	st = startStream(t, srv.url, long)
	st.next(t)
	srv.cmd.Process.Signal(syscall.SIGTERM)
	until(t, 10*time.Second, "/ready 503 draining", func() bool {
		code, v := get(srv.url + "/ready")
		return code == 503 && strings.Contains(fmt.Sprint(v["reason"]), "draining")
	}, srv.stderr)
	resp, err = http.Post(srv.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"stories260K-F32","prompt":"x","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "draining") {
		t.Errorf("a new request while draining: %d %s", resp.StatusCode, b)
	}
	if e := st.next(t); !strings.Contains(e, `"text"`) {
		t.Errorf("the running stream after SIGTERM: %q, want more text", e)
	}
	st.resp.Body.Close() // the client goes: nothing runs, the drain ends
	select {
	case <-srv.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after its drain:\n%s", srv.stderr())
	}
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exited %d after SIGTERM, want 0:\n%s", code, srv.stderr())
	}
	if testing.Verbose() {
		t.Logf("the leader's log:\n%s", srv.stderr())
	}
}

// TestDiscoverDNS: `braid run --discover dns:NAME --ranks 3` finds its
// workers in the SRV records of the test's DNS server, ranked by the
// StatefulSet ordinal of each target (not the order DNS lists them in),
// and prints what one node prints.
func TestDiscoverDNS(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	// The workers dial each other's data planes by the names the
	// coordinator found: they resolve them through the same server.
	env := append(workerEnv(t), "BRAID_DNS_SERVER="+dns.Addr())
	w0, w1 := startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)
	srv := func(name string, p *proc) dnstest.SRV {
		_, port, _ := net.SplitHostPort(p.addr)
		n, _ := strconv.Atoi(port)
		dns.SetHost(name, "127.0.0.1")
		return dnstest.SRV{Target: name, Port: uint16(n)}
	}
	dns.SetSRV("_braid._tcp.braid.test", srv("bw-1.braid.test", w1), srv("bw-0.braid.test", w0))
	base := []string{"run", "-m", path, "-p", "Once upon a time", "-n", "12", "--temp", "0", "-t", "1"}
	want, errOut, code := braid(t, base...)
	if code != 0 {
		t.Fatalf("single node: exit %d: %s", code, errOut)
	}
	cmd := exec.Command(braidBin, append(base, "--discover", "dns:braid.test", "--ranks", "3", "--split", "layer")...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("run --discover: %v\n%s", err, e.String())
	}
	if o.String() != want {
		t.Errorf("over discovered workers: %q, one node %q", o.String(), want)
	}
	_, p0, _ := net.SplitHostPort(w0.addr)
	_, p1, _ := net.SplitHostPort(w1.addr)
	for _, l := range []string{"rank=1 addr=bw-0.braid.test:" + p0, "rank=2 addr=bw-1.braid.test:" + p1} {
		if !strings.Contains(e.String(), l) {
			t.Errorf("the log lacks %q:\n%s", l, e.String())
		}
	}
	// Without the count, and with an ordinal DNS does not list.
	_, errOut, code = braid(t, append(base, "--discover", "dns:braid.test", "--workers", w0.addr)...)
	if code != 2 || !strings.Contains(errOut, "give it, --workers or --cluster, not two") {
		t.Errorf("--discover with --workers: exit %d %s", code, errOut)
	}
	_, errOut, code = braid(t, append(base, "--discover", "dns:braid.test")...)
	if code != 2 || !strings.Contains(errOut, "needs --ranks N") {
		t.Errorf("--discover dns without --ranks: exit %d %s", code, errOut)
	}
	cmd = exec.Command(braidBin, append(base, "--discover", "dns:braid.test", "--ranks", "4", "--wait-workers", "1s")...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "missing ordinal 2 (rank 3)") {
		t.Errorf("a third worker never listed: %v\n%s", err, out)
	}
}

// TestDiscoverFlagErrors: wrong discovery settings are refused before
// anything is dialled, naming the flag or variable and the value.
func TestDiscoverFlagErrors(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	for _, c := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{nil, []string{"--discover", "k8s"}, 2, `--discover "k8s": want lws, dns:NAME or none`},
		{nil, []string{"--discover", "dns:a..b", "--ranks", "2"}, 2, `--discover "dns:a..b"`},
		{nil, []string{"--ranks", "3"}, 2, "--ranks needs --discover"},
		{nil, []string{"--workers", "127.0.0.1:1", "--wait-workers", "-1s"}, 2, "--wait-workers -1s: must not be negative"},
		{nil, []string{"--discover", "lws"}, 2, "LWS_GROUP_SIZE is not set"},
		{[]string{"LWS_GROUP_SIZE=3", "LWS_WORKER_INDEX=2", "LWS_LEADER_ADDRESS=braid-0.braid"}, nil, 2, "LWS_WORKER_INDEX=2: this pod is worker 2 of its group, not the leader"},
		{[]string{"LWS_GROUP_SIZE=three"}, nil, 2, `LWS_GROUP_SIZE="three"`},
		{[]string{"LWS_GROUP_SIZE=3", "LWS_LEADER_ADDRESS=braid-0.braid"}, []string{"--ranks", "4"}, 2, "--ranks 4 but LWS_GROUP_SIZE=3"},
		{[]string{"LWS_GROUP_SIZE=3", "LWS_LEADER_ADDRESS=braid-0.braid", "BRAID_DNS_SERVER=nowhere"}, nil, 1, `BRAID_DNS_SERVER: DNS server "nowhere": want HOST:PORT`},
	} {
		cmd := exec.Command(braidBin, append([]string{"run", "-m", path, "-p", "Once", "-n", "2"}, c.args...)...)
		cmd.Env = append(append(os.Environ(), workerEnv(t)...), c.env...)
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if code != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("%v %v: exit %d, %s\nwant exit %d with %q", c.env, c.args, code, out, c.code, c.want)
		}
	}
	// LWS_GROUP_SIZE=3 picks lws by itself; --discover none turns it off.
	cmd := exec.Command(braidBin, "run", "-m", path, "-p", "Once", "-n", "2", "--discover", "none")
	cmd.Env = append(append(os.Environ(), workerEnv(t)...), "LWS_GROUP_SIZE=3", "LWS_WORKER_INDEX=2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("--discover none under LWS: %v\n%s", err, out)
	}
}
