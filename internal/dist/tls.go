package dist

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files of a TLS directory (--tls-dir): the cluster's certificate
// authority and this node's certificate and key, all PEM. braid certs
// writes such a directory for each node.
const (
	TLSCAFile   = "ca.crt"
	TLSCertFile = "node.crt"
	TLSKeyFile  = "node.key"
)

// TLS is mutual TLS between nodes: every connection of the mesh is TLS 1.3,
// both ends present a certificate, and each accepts the other's only when
// the cluster's CA signed it. The CA is the cluster's identity; host names
// are not checked, because nodes reach each other by address on direct
// links (a triangle of cables has one subnet per cable) and the same node
// has several. The shared secret's handshake (handshake.go) still runs,
// inside the TLS session, when a secret is set.
type TLS struct {
	Dir     string
	CA      *x509.Certificate // the first certificate of ca.crt
	Leaf    *x509.Certificate // this node's certificate
	pool    *x509.CertPool
	keyPair tls.Certificate
	now     func() time.Time // tests move the clock
}

// LoadTLS reads a TLS directory. Every problem is named with its file: a
// missing file, a file that is not PEM, a key that does not match its
// certificate, a node certificate its CA did not sign or one out of its
// validity period.
func LoadTLS(dir string) (*TLS, error) {
	if dir == "" {
		return nil, errors.New("dist: --tls-dir is empty")
	}
	caPath, certPath, keyPath := filepath.Join(dir, TLSCAFile), filepath.Join(dir, TLSCertFile), filepath.Join(dir, TLSKeyFile)
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("dist: TLS: reading the cluster CA: %w (braid certs writes one)", err)
	}
	pool := x509.NewCertPool()
	var ca *x509.Certificate
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("dist: TLS: %s: %w", caPath, err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("dist: TLS: %s: %q is not a CA certificate (basic constraints CA:false)", caPath, c.Subject.String())
		}
		if ca == nil {
			ca = c
		}
		pool.AddCert(c)
	}
	if ca == nil {
		return nil, fmt.Errorf("dist: TLS: %s holds no PEM CERTIFICATE block", caPath)
	}
	kp, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("dist: TLS: loading %s with %s: %w", certPath, keyPath, err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("dist: TLS: %s: %w", certPath, err)
	}
	kp.Leaf = leaf
	t := &TLS{Dir: dir, CA: ca, Leaf: leaf, pool: pool, keyPair: kp, now: time.Now}
	if err := t.verify(leaf, kp.Certificate[1:]); err != nil {
		return nil, fmt.Errorf("dist: TLS: %s is not usable with %s: %w", certPath, caPath, err)
	}
	return t, nil
}

// verify checks a node certificate against the cluster CA, for either
// role: a node both dials and accepts.
func (t *TLS) verify(leaf *x509.Certificate, chain [][]byte) error {
	inter := x509.NewCertPool()
	for _, der := range chain {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	now := time.Now()
	if t.now != nil {
		now = t.now()
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: t.pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		var ua x509.UnknownAuthorityError
		if errors.As(err, &ua) {
			// Two clusters' CAs may share a name: the key's fingerprint
			// tells them apart.
			return fmt.Errorf("certificate %q (issuer %q, key %s) is not signed by this cluster's CA %q (key %s)", leaf.Subject.String(), leaf.Issuer.String(),
				keyID(leaf.AuthorityKeyId), t.CA.Subject.String(), keyID(t.CA.SubjectKeyId))
		}
		var ce x509.CertificateInvalidError
		if errors.As(err, &ce) && ce.Reason == x509.Expired {
			return fmt.Errorf("certificate %q is valid from %s to %s, not now (%s)", leaf.Subject.String(),
				leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("certificate %q: %w", leaf.Subject.String(), err)
	}
	return nil
}

// verifyPeer is both ends' check of the other's certificate.
func (t *TLS) verifyPeer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate (mutual TLS: every node needs its own from braid certs)")
	}
	var chain [][]byte
	for _, c := range cs.PeerCertificates[1:] {
		chain = append(chain, c.Raw)
	}
	return t.verify(cs.PeerCertificates[0], chain)
}

func (t *TLS) config() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{t.keyPair},
		// Both ends verify in VerifyConnection instead of the library's
		// host-name check (see TLS); the server still asks for and
		// requires a client certificate.
		InsecureSkipVerify: true,
		ClientAuth:         tls.RequireAnyClientCert,
		VerifyConnection:   t.verifyPeer,
	}
}

// Describe is the one line doctor and the logs print.
func (t *TLS) Describe() string {
	if t == nil {
		return "plain TCP (no --tls-dir); the shared secret, when set, authenticates peers but nothing is encrypted"
	}
	return fmt.Sprintf("mutual TLS 1.3 (%s): CA %q, this node %q valid until %s", t.Dir, t.CA.Subject.String(),
		t.Leaf.Subject.String(), t.Leaf.NotAfter.UTC().Format("2006-01-02"))
}

// tlsRecordHandshake is the first byte of every TLS connection (a
// handshake record); a braid frame starts with 'B'.
const tlsRecordHandshake = 0x16

// sniffConn gives back the byte read to tell TLS from plain TCP.
type sniffConn struct {
	net.Conn
	first []byte
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn is what socketFD unwraps to find the socket.
func (c *sniffConn) NetConn() net.Conn { return c.Conn }

// sniff reads the first byte a peer sent, within timeout, and returns the
// connection with that byte put back, and whether it starts TLS.
func sniff(conn net.Conn, timeout time.Duration) (net.Conn, bool, error) {
	var b [1]byte
	conn.SetReadDeadline(time.Now().Add(timeout))
	_, err := conn.Read(b[:])
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, false, fmt.Errorf("reading the first byte: %w", err)
	}
	return &sniffConn{Conn: conn, first: b[:]}, b[0] == tlsRecordHandshake, nil
}

// ServerTLS turns an accepted connection into this node's side of a TLS
// session. A peer that speaks plain TCP is told why it is refused, in a
// braid error frame it can read, and the error says so.
func ServerTLS(conn net.Conn, t *TLS, timeout time.Duration) (net.Conn, error) {
	c, isTLS, err := sniff(conn, timeout)
	if err != nil {
		return nil, err
	}
	if !isTLS {
		c.SetWriteDeadline(time.Now().Add(timeout))
		refuse(c, "this node requires TLS between nodes: start the connecting node with --tls-dir (a certificate of the same cluster CA)")
		return nil, fmt.Errorf("connection from %s refused: it speaks plain TCP, and this node requires TLS (--tls-dir %s)", conn.RemoteAddr(), t.Dir)
	}
	tc := tls.Server(c, t.config())
	tc.SetDeadline(time.Now().Add(timeout))
	err = tc.Handshake()
	tc.SetDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", conn.RemoteAddr(), err)
	}
	return tc, nil
}

// clientTLS is the dialing side.
func clientTLS(conn net.Conn, t *TLS, timeout time.Duration) (net.Conn, error) {
	tc := tls.Client(conn, t.config())
	tc.SetDeadline(time.Now().Add(timeout))
	err := tc.Handshake()
	tc.SetDeadline(time.Time{})
	if err != nil {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			msg := "it answered in plain TCP: start it with --tls-dir too"
			if strings.HasPrefix(string(rh.RecordHeader[:]), "BRD") {
				msg = "it answered with a braid frame, not TLS: it runs without --tls-dir; start it with --tls-dir too"
			}
			return nil, fmt.Errorf("TLS handshake: %s", msg)
		}
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// EnvTLSDir is the environment variable --tls-dir defaults to.
const EnvTLSDir = "BRAID_TLS_DIR"

// LoadTLSDir is what --tls-dir means: dir, else $BRAID_TLS_DIR, else no
// TLS (nil, nil: plain TCP).
func LoadTLSDir(dir string) (*TLS, error) {
	if dir == "" {
		if v, ok := os.LookupEnv(EnvTLSDir); ok {
			if dir = strings.TrimSpace(v); dir == "" {
				return nil, fmt.Errorf("dist: %s is set but empty (unset it for plain TCP)", EnvTLSDir)
			}
		}
	}
	if dir == "" {
		return nil, nil
	}
	return LoadTLS(dir)
}

// keyID prints a certificate's key identifier (as x509 sets it: a hash of
// the public key) the way openssl x509 -text does, shortened.
func keyID(id []byte) string {
	if len(id) == 0 {
		return "unknown"
	}
	if len(id) > 8 {
		id = id[:8]
	}
	var b strings.Builder
	for i, c := range id {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", c)
	}
	return b.String()
}
