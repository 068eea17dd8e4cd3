package dist

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/dist/wire"
)

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("BRAID_SECRET", "")
	os.Unsetenv("BRAID_SECRET")
	if s, err := LoadSecret(""); s != nil || err != nil {
		t.Fatalf("no file, no env: got %q, %v; want no secret", s, err)
	}
	if s, err := LoadSecret(write("ok", "  correct horse battery\n")); err != nil || string(s) != "correct horse battery" {
		t.Fatalf("file: got %q, %v", s, err)
	}
	t.Setenv("BRAID_SECRET", "from-the-environment")
	if s, err := LoadSecret(""); err != nil || string(s) != "from-the-environment" {
		t.Fatalf("env: got %q, %v", s, err)
	}
	if s, err := LoadSecret(write("ok2", "file-wins-over-env")); err != nil || string(s) != "file-wins-over-env" {
		t.Fatalf("file and env: got %q, %v", s, err)
	}
	for _, tc := range []struct{ path, want string }{
		{write("empty", "\n\n"), "is empty"},
		{write("short", "abc"), "is 3 bytes; use at least 8"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		_, err := LoadSecret(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: got %v, want %q", tc.path, err, tc.want)
		}
		if strings.Contains(err.Error(), "abc\n") {
			t.Fatalf("error reveals the secret: %v", err)
		}
	}
	t.Setenv("BRAID_SECRET", " ")
	if _, err := LoadSecret(""); err == nil || !strings.Contains(err.Error(), "set but empty") {
		t.Fatalf("blank env: got %v", err)
	}
}

// failedAll expects every rank's Connect to fail, each error containing
// one of wants, and none revealing secret.
func failedAll(t *testing.T, ts []*TCP, errs []error, secret string, wants ...string) {
	t.Helper()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d connected, want a refusal", r)
		}
		ok := false
		for _, w := range wants {
			ok = ok || strings.Contains(err.Error(), w)
		}
		if !ok {
			t.Fatalf("rank %d: got %v, want one of %q", r, err, wants)
		}
		if secret != "" && strings.Contains(err.Error(), secret) {
			t.Fatalf("rank %d: error reveals the secret: %v", r, err)
		}
		t.Logf("rank %d: %v", r, err)
	}
}

func TestWrongSecretRefused(t *testing.T) {
	base := MeshConfig{ConnectTimeout: time.Second, Timeout: 2 * time.Second}
	ts, errs := connectAll(t, 2, base, func(r int, c *MeshConfig) {
		c.Secret = []byte([]string{"the-right-secret", "a-wrong-secret!!"}[r])
	})
	_ = ts
	// The dialer learns it from the listener's refusal; the listener logs
	// the refusal and reports it when the mesh does not form in time.
	failedAll(t, ts, errs, "secret!!", "shared secret", "secrets differ")
}

func TestSecretOnOneSideOnly(t *testing.T) {
	base := MeshConfig{ConnectTimeout: time.Second, Timeout: 2 * time.Second}
	ts, errs := connectAll(t, 2, base, func(r int, c *MeshConfig) {
		if r == 1 {
			c.Secret = []byte("only-rank-one-has-it")
		}
	})
	failedAll(t, ts, errs, "only-rank-one", "has none")
}

func TestDigestMismatchRefused(t *testing.T) {
	base := MeshConfig{ConnectTimeout: time.Second, Timeout: 2 * time.Second}
	ts, errs := connectAll(t, 2, base, func(r int, c *MeshConfig) {
		c.Build = []string{"braid@v1 aaaa go1.26", "braid@v1 bbbb go1.26"}[r]
	})
	failedAll(t, ts, errs, "", "build digest mismatch")
	for r, err := range errs {
		if !strings.Contains(err.Error(), "aaaa") || !strings.Contains(err.Error(), "bbbb") {
			t.Fatalf("rank %d: %v: want both digests", r, err)
		}
	}
}

func TestSameSecretConnects(t *testing.T) {
	ts, errs := connectAll(t, 3, MeshConfig{Secret: []byte("shared-by-all-three")}, nil)
	noErrors(t, errs)
	info := ts[0].Peer(2)
	if !info.Dialed || info.Kind != "tcp" || info.Facts == nil || info.Facts.Cores < 1 || info.Build != BuildDigest() {
		t.Fatalf("peer info: %+v", info)
	}
	if ts[2].Peer(0).Dialed {
		t.Fatal("rank 2 claims to have dialed rank 0: the lower rank dials")
	}
	if d, err := ts[1].Ping(2); err != nil || d <= 0 {
		t.Fatalf("ping: %v, %v", d, err)
	}
}

func TestUnreachablePeer(t *testing.T) {
	// Rank 1's address has nobody listening: rank 0 gives up at the connect
	// deadline, naming rank 1 and the address.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err := Connect(context.Background(), MeshConfig{Rank: 0, Addrs: []string{"", addr}, ConnectTimeout: 500 * time.Millisecond, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "rank 1 ("+addr+")") {
		t.Fatalf("got %v, want an error naming rank 1 at %s", err, addr)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v for a 500ms connect deadline", el)
	}
	// And a listener nobody dials reports whom it waited for.
	_, err = Connect(context.Background(), MeshConfig{Rank: 1, Addrs: []string{"", ""}, Listen: "127.0.0.1:0", ConnectTimeout: 300 * time.Millisecond, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "no connection with [rank 0") {
		t.Fatalf("listener: got %v", err)
	}
}

func TestConnectConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  MeshConfig
		want string
	}{
		{MeshConfig{}, "mesh of 0 ranks"},
		{MeshConfig{Rank: 2, Addrs: []string{"a", "b"}}, "rank 2 is not in a mesh of 2"},
		{MeshConfig{Rank: 0, Addrs: []string{"", ""}}, "no address to dial rank 1"},
		{MeshConfig{Rank: 1, Addrs: []string{"", ""}}, "needs a listen address"},
		{MeshConfig{Rank: 0, Addrs: []string{"", "x:1"}, Stripes: 17}, "17 connections per pair"},
	} {
		if _, err := Connect(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// fakeAddrConn is a connection that claims a non-loopback peer.
type fakeAddrConn struct{ net.Conn }

func (fakeAddrConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 4242}
}

func TestNoSecretLoopbackOnly(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { // the refusal is written to the peer before closing
		var hdr [wire.HeaderSize]byte
		wire.ReadFrame(b, hdr[:], nil, wire.DefaultLimits)
	}()
	tr := &TCP{rank: 1, size: 2, cfg: MeshConfig{Logger: quiet}}
	_, err := tr.accept(fakeAddrConn{a}, tr.hsConfig())
	if err == nil || !strings.Contains(err.Error(), "only loopback peers") || !strings.Contains(err.Error(), "10.9.8.7") {
		t.Fatalf("got %v, want a loopback-only refusal naming 10.9.8.7", err)
	}
}

// fakeRank0 does rank 0's half of the handshake with rank 1 by hand, so the
// test can then send anything on an established connection.
func fakeRank0(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hc := &handshakeConfig{rank: 0, size: 2, stripes: 1, build: BuildDigest(), timeout: 2 * time.Second, limits: wire.DefaultLimits}
	if _, err := handshake(conn, hc, true, 1, 0); err != nil {
		t.Fatal(err)
	}
	// Offer no shared memory, as a rank that cannot, and read the answer.
	if err := shmFrame(conn, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	var hdr [wire.HeaderSize]byte
	if _, _, err := wire.ReadFrame(conn, hdr[:], nil, wire.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestGarbageOnConnection: after a good handshake, the peer sends garbage or
// a frame with a huge length; rank 1 closes that connection with a clear
// error and keeps running.
func TestGarbageOnConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
		want string
	}{
		{"random bytes", []byte("\x13\x37 this is not a braid frame, just noise ....."), "bad magic"},
		{"huge length", func() []byte {
			b := wire.Append(nil, wire.Header{Type: wire.TypeData, Tag: wire.Tag{Op: wire.OpAllReduce1}}, nil)
			b[24], b[25], b[26], b[27] = 0xff, 0xff, 0xff, 0xff
			return b
		}(), "data frame of 4294967295 bytes exceeds the limit"},
		{"huge control", func() []byte {
			b := wire.Append(nil, wire.Header{Type: wire.TypeControl}, nil)
			b[27] = 0x40 // 1 GiB
			return b
		}(), "control frame of 1073741824 bytes exceeds the limit of 67108864"},
		{"hello again", wire.Append(nil, wire.Header{Type: wire.TypeHello}, []byte("{}")), "hello frame after the handshake"},
		{"truncated payload", wire.Append(nil, wire.Header{Type: wire.TypeData, Tag: wire.Tag{Op: wire.OpAllReduce1}}, make([]byte, 400))[:100], "reading 400-byte payload of data frame step=0 seq=0 op=allreduce-oneshot: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lns, addrs := listeners(t, 2)
			done := make(chan struct{})
			var tr *TCP
			var cerr error
			go func() {
				defer close(done)
				tr, cerr = Connect(context.Background(), MeshConfig{Rank: 1, Addrs: addrs, Listener: lns[1], Timeout: 2 * time.Second, ConnectTimeout: 3 * time.Second, Logger: quiet})
			}()
			conn := fakeRank0(t, addrs[1])
			defer conn.Close()
			<-done
			if cerr != nil {
				t.Fatal(cerr)
			}
			defer tr.Close()
			conn.Write(tc.send)
			if tc.name == "truncated payload" {
				conn.Close()
			}
			_, err := tr.Recv(0, wire.Tag{Op: wire.OpAllReduce1})
			var pe *PeerError
			if err == nil || !errors.As(err, &pe) || pe.Rank != 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error from rank 0 containing %q", err, tc.want)
			}
			t.Log(err)
			if tc.name != "truncated payload" && !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("%v does not wrap wire.ErrMalformed", err)
			}
		})
	}
}

// TestGarbageWhileForming: a stranger connecting to a rank's port and
// sending noise (or nothing) while the mesh forms is refused and logged; the
// mesh still forms.
func TestGarbageWhileForming(t *testing.T) {
	lns, addrs := listeners(t, 2)
	silent, err := net.Dial("tcp", addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	noisy, err := net.Dial("tcp", addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer noisy.Close()
	noisy.Write([]byte("GET / HTTP/1.0\r\n\r\n................................"))
	errs := onAll(2, func(r int) error {
		tr, err := Connect(context.Background(), MeshConfig{Rank: r, Addrs: addrs, Listener: lns[r], ConnectTimeout: 5 * time.Second, Logger: quiet})
		if err == nil {
			defer tr.Close()
			c := NewComm(tr)
			x := []float32{float32(r + 1)}
			if err := c.AllReduceSum(x); err != nil {
				return err
			}
			if x[0] != 3 {
				t.Errorf("rank %d: sum %v, want 3", r, x[0])
			}
		}
		return err
	})
	noErrors(t, errs)
}

func TestStripedTCP(t *testing.T) {
	ts := tcpGroup(t, 3, MeshConfig{Stripes: 3, StripeMin: 1000, Timeout: 5 * time.Second})
	comms := make([]*Comm, 3)
	for r := range 3 {
		comms[r] = NewComm(ts[r])
	}
	for _, length := range []int{10, 250, 251, 4099, 100003} {
		for _, algo := range Algos() {
			xs := inputs(3, length, uint64(length))
			ref := reference(xs)
			noErrors(t, onAll(3, func(r int) error { return comms[r].AllReduce(xs[r], algo) }))
			for i := range length {
				if math.Float32bits(xs[1][i]) != math.Float32bits(xs[0][i]) || math.Abs(float64(xs[0][i])-ref[i]) > 1e-4*(1+math.Abs(ref[i])) {
					t.Fatalf("%s len %d [%d]: %v %v, reference %v", algo, length, i, xs[0][i], xs[1][i], ref[i])
				}
			}
		}
	}
	// Large messages really went over several connections.
	st := ts[0].Stats()
	if st.Peers[1].FramesSent <= st.Peers[1].FramesRecv/4 || ts[0].Peer(1).Conns != 3 {
		t.Fatalf("stats %+v, conns %d", st.Peers[1], ts[0].Peer(1).Conns)
	}
}

func TestControlLane(t *testing.T) {
	for _, kind := range []string{"inproc", "tcp"} {
		ts := group(t, kind, 2, 2*time.Second)
		errs := onAll(2, func(r int) error {
			if r == 0 {
				for i := range 2 {
					if err := ts[0].SendControl(1, wire.Tag{Step: uint64(i), Op: wire.OpStep}, []byte("step")); err != nil {
						return err
					}
				}
				// Data flows while control frames wait unread.
				if err := ts[0].Send(1, wire.Tag{Op: wire.OpSendRecv}, []byte("hidden")); err != nil {
					return err
				}
				tag, b, err := ts[0].RecvControl(1)
				if err != nil || tag.Op != wire.OpResult || string(b) != "result" {
					t.Errorf("%s: result %v %q %v", kind, tag, b, err)
				}
				return nil
			}
			b, err := ts[1].Recv(0, wire.Tag{Op: wire.OpSendRecv})
			if err != nil || string(b) != "hidden" {
				t.Errorf("%s: data %q %v", kind, b, err)
			}
			for i := range 2 {
				tag, b, err := ts[1].RecvControl(0)
				if err != nil || tag.Step != uint64(i) || string(b) != "step" {
					t.Errorf("%s: control %d: %v %q %v", kind, i, tag, b, err)
				}
			}
			return ts[1].SendControl(0, wire.Tag{Op: wire.OpResult}, []byte("result"))
		})
		noErrors(t, errs)
		st := ts[1].Stats()
		if st.Kind != kind || st.Peers[0].FramesRecv != 3 || st.Peers[0].FramesSent != 1 || st.Peers[0].BytesRecv != 14 {
			t.Fatalf("%s stats: %+v", kind, st)
		}
	}
}

// FuzzParseHello: the handshake's JSON parser never panics and bounds what
// it accepts.
func FuzzParseHello(f *testing.F) {
	good, _ := json.Marshal(hello{Proto: 1, Build: "b", Nonce: make([]byte, nonceLen), Facts: NodeFacts{Cores: 2}})
	f.Add(good)
	f.Add([]byte(`{"proto":1,"nonce":"AAAA"}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHello(b)
		if err == nil && (len(h.Nonce) != nonceLen || len(h.Build) > 1024) {
			t.Fatalf("accepted %+v", h)
		}
	})
}
