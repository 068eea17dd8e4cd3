package dist

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"braid/internal/dist/wire"
)

func testCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// nodeTLS writes a node's TLS directory signed by ca and loads it.
func nodeTLS(t testing.TB, ca *CA, name string, validFor time.Duration) *TLS {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	cert, key, err := ca.Issue(name, []string{"127.0.0.1", name}, validFor)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteNodeDir(dir, cert, key); err != nil {
		t.Fatal(err)
	}
	tl, err := LoadTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestTLSMeshAllReduces(t *testing.T) {
	ca := testCA(t, "test cluster")
	for _, secret := range []string{"", "and-a-secret-inside"} {
		t.Run("secret="+secret, func(t *testing.T) {
			tls := []*TLS{nodeTLS(t, ca, "n0", time.Hour), nodeTLS(t, ca, "n1", time.Hour), nodeTLS(t, ca, "n2", time.Hour)}
			ts, errs := connectAll(t, 3, MeshConfig{Secret: []byte(secret), Stripes: 2}, func(r int, c *MeshConfig) { c.TLS = tls[r] })
			noErrors(t, errs)
			errs = onAll(3, func(r int) error {
				c := NewComm(ts[r])
				x := make([]float32, 3000) // past one TLS record
				for i := range x {
					x[i] = float32(r + i)
				}
				if err := c.AllReduceSum(x); err != nil {
					return err
				}
				for i, v := range x {
					if want := float32(3*i + 3); v != want {
						t.Errorf("rank %d: x[%d] = %v, want %v", r, i, v, want)
						break
					}
				}
				return nil
			})
			noErrors(t, errs)
			if d, err := ts[0].Ping(2); err != nil || d <= 0 {
				t.Fatalf("ping over TLS: %v, %v", d, err)
			}
		})
	}
}

func TestTLSRefusals(t *testing.T) {
	ca, other := testCA(t, "cluster A"), testCA(t, "cluster B")
	good, foreign := nodeTLS(t, ca, "n0", time.Hour), nodeTLS(t, other, "n1", time.Hour)
	base := MeshConfig{ConnectTimeout: 1500 * time.Millisecond, Timeout: 2 * time.Second}
	for _, tc := range []struct {
		name  string
		tls   [2]*TLS
		wants []string // one of them in every rank's error
	}{
		{"wrong CA", [2]*TLS{good, foreign}, []string{"not signed by this cluster's CA", "bad certificate", "unknown certificate authority"}},
		{"plain dialer, TLS listener", [2]*TLS{nil, good}, []string{"requires TLS"}},
		{"TLS dialer, plain listener", [2]*TLS{good, nil}, []string{"without --tls-dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, errs := connectAll(t, 2, base, func(r int, c *MeshConfig) { c.TLS = tc.tls[r] })
			failedAll(t, ts, errs, "", tc.wants...)
		})
	}
}

// TestTLSAcceptsNonLoopbackWithoutSecret: the CA authenticates, so the
// loopback-only rule of a node without a secret does not apply; what a
// plain peer then gets is the TLS refusal, readable as a braid frame.
func TestTLSAcceptsNonLoopbackWithoutSecret(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	got := make(chan string, 1)
	go func() {
		b.Write([]byte("B")) // a braid frame's first byte (net.Pipe: a whole frame would block)
		var hdr [wire.HeaderSize]byte
		h, p, err := wire.ReadFrame(b, hdr[:], nil, wire.DefaultLimits)
		if err != nil || h.Type != wire.TypeError {
			got <- "no error frame"
			return
		}
		got <- string(p)
	}()
	tr := &TCP{rank: 1, size: 2, cfg: MeshConfig{Logger: quiet, Timeout: 2 * time.Second, TLS: nodeTLS(t, testCA(t, "c"), "n1", time.Hour)}}
	_, err := tr.accept(fakeAddrConn{a}, tr.hsConfig())
	if err == nil || !strings.Contains(err.Error(), "speaks plain TCP") || strings.Contains(err.Error(), "loopback") {
		t.Fatalf("got %v, want the plain-TCP refusal, not the loopback one", err)
	}
	if msg := <-got; !strings.Contains(msg, "--tls-dir") {
		t.Fatalf("the peer read %q, want the reason naming --tls-dir", msg)
	}
}

func TestLoadTLSErrors(t *testing.T) {
	ca, other := testCA(t, "cluster A"), testCA(t, "cluster B")
	write := func(t *testing.T, files map[string][]byte) string {
		dir := t.TempDir()
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	cert, key, err := ca.Issue("n0", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, key2, _ := ca.Issue("n1", nil, time.Hour)
	ocert, okey, _ := other.Issue("n2", nil, time.Hour)
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"empty dir", map[string][]byte{}, "ca.crt"},
		{"CA not PEM", map[string][]byte{TLSCAFile: []byte("hello"), TLSCertFile: cert, TLSKeyFile: key}, "no PEM CERTIFICATE"},
		{"CA is a node cert", map[string][]byte{TLSCAFile: cert, TLSCertFile: cert, TLSKeyFile: key}, "not a CA certificate"},
		{"no node cert", map[string][]byte{TLSCAFile: ca.CertPEM, TLSKeyFile: key}, "node.crt"},
		{"key of another cert", map[string][]byte{TLSCAFile: ca.CertPEM, TLSCertFile: cert, TLSKeyFile: key2}, "private key does not match"},
		{"cert of another CA", map[string][]byte{TLSCAFile: ca.CertPEM, TLSCertFile: ocert, TLSKeyFile: okey}, "not signed by this cluster's CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadTLS(write(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			t.Log(err)
		})
	}
	t.Run("expired", func(t *testing.T) {
		tl := nodeTLS(t, ca, "n3", time.Hour)
		tl.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		err := tl.verify(tl.Leaf, nil)
		if err == nil || !strings.Contains(err.Error(), "not now") {
			t.Fatalf("got %v, want the validity period named", err)
		}
	})
}

func TestCAFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t, "c")
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(dir); err == nil || !strings.Contains(err.Error(), "not overwritten") {
		t.Fatalf("second WriteCA: %v, want a refusal to overwrite", err)
	}
	back, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Cert.Equal(ca.Cert) {
		t.Fatal("LoadCA read another certificate")
	}
	if fi, err := os.Stat(filepath.Join(dir, TLSCAKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v %v, want mode 0600", fi.Mode(), err)
	}
	// A certificate the reloaded CA signs is one the original's nodes trust.
	a, b := nodeTLS(t, ca, "a", time.Hour), nodeTLS(t, back, "b", time.Hour)
	ts, errs := connectAll(t, 2, MeshConfig{}, func(r int, c *MeshConfig) { c.TLS = []*TLS{a, b}[r] })
	noErrors(t, errs)
	if _, err := ts[0].Ping(1); err != nil {
		t.Fatal(err)
	}
}
