package discover

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"braid/internal/discover/dnstest"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestLWS: the leader's environment gives the workers' pod names in
// worker-index order; wrong values are errors naming the variable and value.
func TestLWS(t *testing.T) {
	l, ok, err := ReadLWS(env(map[string]string{EnvLeader: "braid-0.braid.default", EnvSize: "3", EnvIndex: "0"}))
	if err != nil || !ok {
		t.Fatalf("ReadLWS: %v %v", ok, err)
	}
	got, err := l.Workers(7000)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"braid-0-1.braid.default:7000", "braid-0-2.braid.default:7000"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("workers %v, want %v", got, want)
	}
	if err := l.CheckWorker(); err == nil || !strings.Contains(err.Error(), "LWS_WORKER_INDEX=0") {
		t.Errorf("a worker at index 0: %v", err)
	}
	// A single-label leader address (a bare pod name) works too.
	l, _, _ = ReadLWS(env(map[string]string{EnvLeader: "lead", EnvSize: "2"}))
	if got, err := l.Workers(9); err != nil || fmt.Sprint(got) != "[lead-1:9]" {
		t.Errorf("bare leader: %v %v", got, err)
	}
	if _, ok, err := ReadLWS(env(map[string]string{})); ok || err != nil {
		t.Errorf("no LWS environment: %v %v", ok, err)
	}
	w, _, err := ReadLWS(env(map[string]string{EnvLeader: "a-0.b", EnvSize: "4", EnvIndex: "2"}))
	if err != nil || w.CheckWorker() != nil {
		t.Errorf("worker 2 of 4: %v %v", err, w.CheckWorker())
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvSize: "x"}, `LWS_GROUP_SIZE="x"`},
		{map[string]string{EnvSize: "0"}, `LWS_GROUP_SIZE="0"`},
		{map[string]string{EnvSize: "3", EnvLeader: "a.b", EnvIndex: "-1"}, `LWS_WORKER_INDEX="-1"`},
		{map[string]string{EnvSize: "3", EnvLeader: "a.b", EnvIndex: "3"}, "LWS_WORKER_INDEX=3 is not below LWS_GROUP_SIZE=3"},
		{map[string]string{EnvSize: "3"}, "LWS_LEADER_ADDRESS is not set"},
		{map[string]string{EnvSize: "3", EnvLeader: "a..b"}, `LWS_LEADER_ADDRESS="a..b"`},
		{map[string]string{EnvSize: "3", EnvLeader: "a b"}, `LWS_LEADER_ADDRESS="a b"`},
	} {
		if _, _, err := ReadLWS(env(c.env)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.env, err, c.want)
		}
	}
	// The coordinator in a worker pod.
	l, _, _ = ReadLWS(env(map[string]string{EnvLeader: "braid-0.braid", EnvSize: "3", EnvIndex: "2"}))
	if _, err := l.Workers(7000); err == nil || !strings.Contains(err.Error(), "LWS_WORKER_INDEX=2") || !strings.Contains(err.Error(), "not the leader") {
		t.Errorf("leader at index 2: %v", err)
	}
	l, _, _ = ReadLWS(env(map[string]string{EnvLeader: "braid-0.braid", EnvSize: "3"}))
	if _, err := l.Workers(0); err == nil || !strings.Contains(err.Error(), "port 0") {
		t.Errorf("port 0: %v", err)
	}
}

func TestOrdinal(t *testing.T) {
	for _, c := range []struct {
		name string
		set  string
		n    int
		err  string
	}{
		{"braid-worker-2.braid.default.svc.cluster.local.", "braid-worker", 2, ""},
		{"w-0", "w", 0, ""},
		{"w-17.x", "w", 17, ""},
		{"worker.braid", "", 0, `first label "worker" does not end in -N`},
		{"worker-.braid", "", 0, "does not end in -N"},
		{"-3.braid", "", 0, "does not end in -N"},
		{"w-1a.braid", "", 0, "does not end in -N"},
		{"w-01", "", 0, "no leading zeros"},
		{"w-12345678", "", 0, "at most 999999"},
		{"", "", 0, "does not end in -N"},
	} {
		set, n, err := Ordinal(c.name)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.name)) {
				t.Errorf("Ordinal(%q): %v, want an error naming it and containing %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || set != c.set || n != c.n {
			t.Errorf("Ordinal(%q) = %q %d %v, want %q %d", c.name, set, n, err, c.set, c.n)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]string{"lws": "lws", "none": "none", "dns:braid.default.svc": "dns:braid.default.svc", "dns:a.b.": "dns:a.b"} {
		m, err := ParseMode(in)
		if err != nil || m.String() != want {
			t.Errorf("ParseMode(%q) = %v %v, want %s", in, m, err, want)
		}
	}
	for _, in := range []string{"", "dns:", "dns:a..b", "k8s", "dns:a/b"} {
		if _, err := ParseMode(in); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseMode(%q): %v, want an error naming it", in, err)
		}
	}
	if _, err := NewResolver("nohost"); err == nil {
		t.Error("NewResolver without a port")
	}
	if _, _, err := ResolverFromEnv(env(map[string]string{EnvDNSServer: "1.2.3.4:x"})); err == nil || !strings.Contains(err.Error(), EnvDNSServer) {
		t.Errorf("a bad BRAID_DNS_SERVER: %v", err)
	}
	if r, _, err := ResolverFromEnv(env(map[string]string{})); r != nil || err != nil {
		t.Errorf("no BRAID_DNS_SERVER: %v %v", r, err)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func rec(target string, port uint16) dnstest.SRV { return dnstest.SRV{Target: target, Port: port} }

func startDNS(t *testing.T) (*dnstest.Server, Resolver) {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r, err := NewResolver(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

func addrs(ws []Worker) string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%d=%s", w.Rank, w.Addr))
	}
	return strings.Join(out, " ")
}

// TestDNSSRV: SRV records listed out of order give the workers in ordinal
// order, each at its target and port.
func TestDNSSRV(t *testing.T) {
	s, r := startDNS(t)
	s.SetSRV("_braid._tcp.braid.test",
		dnstest.SRV{Target: "bw-2.braid.test", Port: 7002},
		dnstest.SRV{Target: "bw-0.braid.test", Port: 7000},
		dnstest.SRV{Target: "bw-1.braid.test", Port: 7001})
	ws, err := Wait(context.Background(), r, "braid.test", 3, 7000, 5*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := addrs(ws), "1=bw-0.braid.test:7000 2=bw-1.braid.test:7001 3=bw-2.braid.test:7002"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestDNSHost: without SRV records, the A/AAAA records of the name and the
// PTR name of each address give the ranks, at --worker-port.
func TestDNSHost(t *testing.T) {
	s, r := startDNS(t)
	s.SetHost("braid.test", "10.0.0.9", "fd00::7", "10.0.0.5")
	s.SetPTR("10.0.0.5", "bw-0.braid.test")
	s.SetPTR("10.0.0.9", "bw-2.braid.test")
	s.SetPTR("fd00::7", "bw-1.braid.test")
	ws, err := Wait(context.Background(), r, "braid.test", 3, 7100, 5*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := addrs(ws), "1=10.0.0.5:7100 2=[fd00::7]:7100 3=10.0.0.9:7100"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestDNSErrors: records that waiting cannot fix end the wait at once with
// an error naming the record and the value.
func TestDNSErrors(t *testing.T) {
	for _, c := range []struct {
		srv  []dnstest.SRV
		want string
	}{
		{[]dnstest.SRV{rec("bw-0.t", 1), rec("worker.t", 2)}, `SRV target "worker.t" has no StatefulSet ordinal`},
		{[]dnstest.SRV{rec("bw-0.t", 1), rec("bw-0.u", 2)}, "lists ordinal 0 twice: bw-0.t and bw-0.u"},
		{[]dnstest.SRV{rec("bw-0.t", 1), rec("xw-1.t", 2)}, `two StatefulSets, "bw" (bw-0.t) and "xw" (xw-1.t)`},
		{[]dnstest.SRV{rec("bw-0.t", 1), rec("bw-5.t", 2)}, "lists bw-5.t, ordinal 5, but --ranks 3 expects workers with ordinals 0..1"},
	} {
		s, r := startDNS(t)
		s.SetSRV("_braid._tcp.braid.test", c.srv...)
		start := time.Now()
		_, err := Wait(context.Background(), r, "braid.test", 2, 7000, time.Minute, quiet)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.srv, err, c.want)
		}
		if time.Since(start) > 30*time.Second {
			t.Errorf("%v: the error took %v: it must not wait", c.srv, time.Since(start))
		}
	}
	s, r := startDNS(t)
	s.SetHost("braid.test", "10.0.0.5")
	s.SetPTR("10.0.0.5", "node.braid.test")
	if _, err := Wait(context.Background(), r, "braid.test", 1, 7000, time.Minute, quiet); err == nil || !strings.Contains(err.Error(), `address 10.0.0.5: PTR name "node.braid.test" has no StatefulSet ordinal`) {
		t.Errorf("a PTR name without an ordinal: %v", err)
	}
	if _, err := Wait(context.Background(), r, "braid.test", 0, 7000, time.Minute, quiet); err == nil || !strings.Contains(err.Error(), "--ranks") {
		t.Errorf("no workers expected: %v", err)
	}
}

// TestDNSWait: a Service whose pods appear one by one is waited for; one
// whose ordinal never appears ends the wait with an error naming it.
func TestDNSWait(t *testing.T) {
	s, r := startDNS(t)
	name := "_braid._tcp.braid.test"
	s.SetSRV(name, dnstest.SRV{Target: "bw-1.braid.test", Port: 7001})
	done := make(chan struct{})
	var ws []Worker
	var err error
	go func() {
		defer close(done)
		ws, err = Wait(context.Background(), r, "braid.test", 2, 7000, time.Minute, quiet)
	}()
	// Let it see the partial listing at least once, then complete it.
	for s.Queries() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	s.SetSRV(name, dnstest.SRV{Target: "bw-1.braid.test", Port: 7001}, dnstest.SRV{Target: "bw-0.braid.test", Port: 7000})
	<-done
	if err != nil || addrs(ws) != "1=bw-0.braid.test:7000 2=bw-1.braid.test:7001" {
		t.Errorf("after the wait: %s %v", addrs(ws), err)
	}

	s.SetSRV(name, dnstest.SRV{Target: "bw-1.braid.test", Port: 7001})
	_, err = Wait(context.Background(), r, "braid.test", 2, 7000, 600*time.Millisecond, quiet)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 workers listed") || !strings.Contains(err.Error(), "missing ordinal 0 (rank 1)") ||
		!strings.Contains(err.Error(), "bw-1.braid.test (ordinal 1)") {
		t.Errorf("a missing ordinal: %v", err)
	}
	// No records at all: the lookup's own error is kept.
	s.SetSRV(name)
	_, err = Wait(context.Background(), r, "braid.test", 2, 7000, 600*time.Millisecond, quiet)
	if err == nil || !strings.Contains(err.Error(), "no workers listed after") || !strings.Contains(err.Error(), "no addresses") {
		t.Errorf("nothing listed: %v", err)
	}
}
