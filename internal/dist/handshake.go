package dist

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"braid/internal/dist/wire"
	"braid/internal/kernels"
	"braid/internal/sysinfo"
)

// ProtocolVersion is the version of the rank-to-rank protocol: handshake,
// frame semantics and collectives. Peers must match exactly.
const ProtocolVersion = 1

// BuildDigest is what peers compare in the handshake: the module version and
// VCS revision of this binary, and a hash of the frame and op table.
func BuildDigest() string {
	return sysinfo.ReadBuild().Digest() + " wire=" + wire.TableDigest()
}

// NodeFacts is what a node tells its peers about itself in the handshake:
// what it can hold (memory) and run (cores, kernels).
type NodeFacts struct {
	MemTotal     uint64   `json:"mem_total"`
	MemAvailable uint64   `json:"mem_available"`
	MemUsable    uint64   `json:"mem_usable"` // MemAvailable lowered to the cgroup's headroom
	CgroupLimit  uint64   `json:"cgroup_limit,omitempty"`
	Cores        int      `json:"cores"`
	OS           string   `json:"os"`
	Arch         string   `json:"arch"`
	ByteOrder    string   `json:"byte_order"`
	Features     []string `json:"features,omitempty"` // CPU features the kernels use
	Kernels      []string `json:"kernels,omitempty"`  // "TYPE=impl" per weight type
}

// LocalFacts reads this node's facts now (memory changes; read it per
// handshake).
func LocalFacts() NodeFacts {
	f := NodeFacts{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, ByteOrder: byteOrder(),
		Features: kernels.Features()}
	if m, err := sysinfo.ReadMemory(); err == nil {
		f.MemTotal, f.MemAvailable, f.MemUsable, f.CgroupLimit = m.Total, m.Available, m.Usable(), m.CgroupLimit
	}
	for _, c := range kernels.Selected() {
		f.Kernels = append(f.Kernels, fmt.Sprintf("%v=%s", c.Type, c.Impl))
	}
	return f
}

// LoadSecret returns the cluster's shared secret: the contents of path
// (surrounding white space trimmed) when path is set, else the BRAID_SECRET
// environment variable, else nil: no secret, and then only loopback peers
// are accepted. The error never contains the secret.
func LoadSecret(path string) ([]byte, error) {
	var s []byte
	from := "BRAID_SECRET"
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("dist: reading secret file: %w", err)
		}
		s, from = bytes.TrimSpace(b), "secret file "+path
		if len(s) == 0 {
			return nil, fmt.Errorf("dist: %s is empty", from)
		}
	} else if v, ok := os.LookupEnv("BRAID_SECRET"); ok {
		s = bytes.TrimSpace([]byte(v))
		if len(s) == 0 {
			return nil, errors.New("dist: BRAID_SECRET is set but empty (unset it to run without a secret, loopback only)")
		}
	} else {
		return nil, nil
	}
	if len(s) < MinSecretLen {
		return nil, fmt.Errorf("dist: the secret from %s is %d bytes; use at least %d (e.g. `head -c 32 /dev/urandom | base64`)", from, len(s), MinSecretLen)
	}
	return s, nil
}

// MinSecretLen is the shortest secret LoadSecret accepts.
const MinSecretLen = 8

// hello is the first frame each side sends.
type hello struct {
	Proto   int       `json:"proto"`
	Build   string    `json:"build"`
	Rank    int       `json:"rank"` // the sender's rank
	Peer    int       `json:"peer"` // the rank the sender believes it talks to
	Size    int       `json:"size"`
	Stripe  int       `json:"stripe"`
	Stripes int       `json:"stripes"`
	Secret  bool      `json:"secret"` // the sender proves a shared secret
	Nonce   []byte    `json:"nonce"`
	Facts   NodeFacts `json:"facts"`
}

const nonceLen = 32

// handshakeConfig is what one side brings to a handshake.
type handshakeConfig struct {
	rank, size, stripes int
	build               string
	secret              []byte
	timeout             time.Duration
	limits              wire.Limits
}

// handshake runs on a fresh connection. The dialer knows which rank and
// stripe it wants (peer, stripe); the listener learns them from the dialer's
// hello and checks them. It returns the peer's hello.
//
// Sequence: both send hello; both check version, digest and ranks; the
// dialer sends its MAC, the listener checks it and answers with its own MAC,
// the dialer checks that and sends an empty auth frame as the final yes.
// Each MAC is HMAC-SHA256(secret, role, SHA-256 of both hellos as sent),
// so it covers both fresh nonces and cannot be replayed or reflected.
func handshake(conn net.Conn, hc *handshakeConfig, dialer bool, peer, stripe int) (*hello, error) {
	remote := conn.RemoteAddr().String()
	if err := conn.SetDeadline(time.Now().Add(hc.timeout)); err != nil {
		return nil, err
	}
	defer conn.SetDeadline(time.Time{})
	mine := hello{Proto: ProtocolVersion, Build: hc.build, Rank: hc.rank, Peer: peer, Size: hc.size,
		Stripe: stripe, Stripes: hc.stripes, Secret: len(hc.secret) > 0, Nonce: make([]byte, nonceLen), Facts: LocalFacts()}
	if !dialer {
		mine.Peer, mine.Stripe = -1, -1 // not known until the dialer says
	}
	if _, err := rand.Read(mine.Nonce); err != nil {
		return nil, fmt.Errorf("handshake: random nonce: %w", err)
	}
	mineJSON, err := json.Marshal(&mine)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(wire.Append(nil, wire.Header{Type: wire.TypeHello}, mineJSON)); err != nil {
		return nil, fmt.Errorf("handshake: sending hello: %w", err)
	}
	var hdr [wire.HeaderSize]byte
	h, theirJSON, err := wire.ReadFrame(conn, hdr[:], nil, hc.limits)
	if err != nil {
		return nil, fmt.Errorf("handshake: reading hello: %w", err)
	}
	theirJSON = bytes.Clone(theirJSON)
	if err := expect(h, wire.TypeHello, theirJSON); err != nil {
		return nil, err
	}
	theirs, err := parseHello(theirJSON)
	if err != nil {
		refuse(conn, err.Error())
		return nil, err
	}
	if err := hc.check(theirs, dialer, peer, stripe, remote); err != nil {
		refuse(conn, err.Error())
		return nil, err
	}

	var dj, lj []byte
	if dialer {
		dj, lj = mineJSON, theirJSON
	} else {
		dj, lj = theirJSON, mineJSON
	}
	macD, macL := authMAC(hc.secret, "dialer", dj, lj), authMAC(hc.secret, "listener", dj, lj)
	badSecret := fmt.Errorf("handshake: rank %d at %s failed to prove the shared secret: the nodes were given different secrets (--secret-file or BRAID_SECRET)", theirs.Rank, remote)
	if dialer {
		if _, err := conn.Write(wire.Append(nil, wire.Header{Type: wire.TypeAuth}, macD)); err != nil {
			return nil, fmt.Errorf("handshake: sending proof: %w", err)
		}
		h, p, err := wire.ReadFrame(conn, hdr[:], nil, hc.limits)
		if err != nil {
			return nil, fmt.Errorf("handshake: reading proof: %w", err)
		}
		if err := expect(h, wire.TypeAuth, p); err != nil {
			return nil, err
		}
		if !hmac.Equal(p, macL) {
			refuse(conn, "authentication failed: the shared secrets differ")
			return nil, badSecret
		}
		if _, err := conn.Write(wire.Append(nil, wire.Header{Type: wire.TypeAuth}, nil)); err != nil {
			return nil, fmt.Errorf("handshake: sending final yes: %w", err)
		}
		return theirs, nil
	}
	h, p, err := wire.ReadFrame(conn, hdr[:], nil, hc.limits)
	if err != nil {
		return nil, fmt.Errorf("handshake: reading proof: %w", err)
	}
	if err := expect(h, wire.TypeAuth, p); err != nil {
		return nil, err
	}
	if !hmac.Equal(p, macD) {
		refuse(conn, "authentication failed: the shared secrets differ")
		return nil, badSecret
	}
	if _, err := conn.Write(wire.Append(nil, wire.Header{Type: wire.TypeAuth}, macL)); err != nil {
		return nil, fmt.Errorf("handshake: sending proof: %w", err)
	}
	h, p, err = wire.ReadFrame(conn, hdr[:], nil, hc.limits)
	if err != nil {
		return nil, fmt.Errorf("handshake: reading final yes: %w", err)
	}
	if err := expect(h, wire.TypeAuth, p); err != nil {
		return nil, err
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("handshake: final auth frame carries %d bytes, want 0", len(p))
	}
	return theirs, nil
}

// expect checks a handshake frame's type; an error frame from the peer
// becomes the error, so a refusal reads as the peer's reason.
func expect(h wire.Header, want wire.Type, payload []byte) error {
	if h.Type == wire.TypeError {
		return fmt.Errorf("handshake: the peer refused: %s", clip(payload))
	}
	if h.Type != want {
		return fmt.Errorf("handshake: %w: got a %s frame, want %s", wire.ErrMalformed, h.Type, want)
	}
	return nil
}

// clip makes peer-supplied text safe to log: bounded and printable.
func clip(b []byte) string {
	const max = 512
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' {
			return '?'
		}
		return r
	}, s)
}

// refuse tells the peer why, best effort, before the caller closes.
func refuse(conn net.Conn, msg string) {
	conn.Write(wire.Append(nil, wire.Header{Type: wire.TypeError}, []byte(msg)))
}

func authMAC(secret []byte, role string, dialerHello, listenerHello []byte) []byte {
	m := hmac.New(sha256.New, secret)
	hd, hl := sha256.Sum256(dialerHello), sha256.Sum256(listenerHello)
	m.Write([]byte("braid-auth-v1\x00" + role + "\x00"))
	m.Write(hd[:])
	m.Write(hl[:])
	return m.Sum(nil)
}

func parseHello(b []byte) (*hello, error) {
	var h hello
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&h); err != nil {
		return nil, fmt.Errorf("handshake: %w: hello is not valid JSON: %v", wire.ErrMalformed, err)
	}
	if len(h.Nonce) != nonceLen {
		return nil, fmt.Errorf("handshake: %w: nonce of %d bytes, want %d", wire.ErrMalformed, len(h.Nonce), nonceLen)
	}
	if len(h.Build) > 1024 || len(h.Facts.Features) > 256 || len(h.Facts.Kernels) > 256 {
		return nil, fmt.Errorf("handshake: %w: hello fields too long", wire.ErrMalformed)
	}
	return &h, nil
}

// check compares the peer's hello with this side's view. Version and build
// first: a peer from another build may mean anything by the rest.
func (hc *handshakeConfig) check(t *hello, dialer bool, peer, stripe int, remote string) error {
	who := fmt.Sprintf("rank %d at %s", t.Rank, remote)
	if t.Proto != ProtocolVersion {
		return fmt.Errorf("handshake: protocol version mismatch: this node (rank %d) speaks %d, %s speaks %d", hc.rank, ProtocolVersion, who, t.Proto)
	}
	if t.Build != hc.build {
		return fmt.Errorf("handshake: build digest mismatch: this node (rank %d) runs %q, %s runs %q; run the same braid build on every node", hc.rank, hc.build, who, t.Build)
	}
	if t.Facts.ByteOrder != byteOrder() {
		return fmt.Errorf("handshake: %s is %s, this node is %s: tensors would be misread", who, t.Facts.ByteOrder, byteOrder())
	}
	if t.Secret != (len(hc.secret) > 0) {
		if t.Secret {
			return fmt.Errorf("handshake: %s uses a shared secret and this node (rank %d) has none: give every node the same --secret-file or BRAID_SECRET", who, hc.rank)
		}
		return fmt.Errorf("handshake: this node (rank %d) uses a shared secret and %s has none: give every node the same --secret-file or BRAID_SECRET", hc.rank, who)
	}
	if t.Size != hc.size || t.Stripes != hc.stripes {
		return fmt.Errorf("handshake: %s is in a group of %d ranks with %d connections per pair, this node (rank %d) in one of %d with %d", who, t.Size, t.Stripes, hc.rank, hc.size, hc.stripes)
	}
	if dialer {
		if t.Rank != peer {
			return fmt.Errorf("handshake: dialed rank %d at %s but rank %d answered: check the addresses", peer, remote, t.Rank)
		}
		return nil
	}
	if t.Peer != hc.rank {
		return fmt.Errorf("handshake: %s wants rank %d, this node is rank %d: check the addresses", who, t.Peer, hc.rank)
	}
	if t.Rank < 0 || t.Rank >= hc.rank {
		return fmt.Errorf("handshake: %s dialed rank %d, but only lower ranks dial higher ones", who, hc.rank)
	}
	if t.Stripe < 0 || t.Stripe >= hc.stripes {
		return fmt.Errorf("handshake: %s sent stripe %d of %d", who, t.Stripe, hc.stripes)
	}
	return nil
}

// isLoopback reports whether addr (host:port) is a loopback address.
func isLoopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	return false
}
