package dist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/dist/wire"
)

// MeshConfig says how one rank joins a TCP mesh. Every pair of ranks gets
// its own connection(s); the lower rank dials the higher one, so rank 0 (the
// coordinator) only dials and the highest rank only listens. Addresses are
// per pair: on a switchless triangle each cable is its own subnet, and rank
// 0 reaches rank 1 at one address and rank 2 at another.
type MeshConfig struct {
	// Rank is this rank; the group's size is len(Addrs).
	Rank int
	// Addrs[j] is the address at which this rank dials rank j. Only the
	// entries j > Rank are used (the others may be empty).
	Addrs []string
	// Listen is the address this rank accepts its lower-ranked peers on
	// (needed when Rank > 0), e.g. ":7000" or "10.0.1.2:7000".
	Listen string
	// Listener, when set, is used instead of Listen and left open (tests
	// bind port 0 to learn the address before the mesh forms).
	Listener net.Listener
	// Secret is the shared secret; nil accepts and dials loopback peers
	// only (see LoadSecret), unless TLS is set.
	Secret []byte
	// TLS, when set, makes every connection of the mesh mutual TLS with
	// the cluster's CA (LoadTLS); a peer without it is refused with the
	// reason. A CA-signed peer is authenticated without a secret, so
	// non-loopback peers are accepted then; with a secret as well, its
	// handshake runs inside the TLS session.
	TLS *TLS
	// Stripes is the number of connections per pair (1..16, default 1);
	// data messages of at least StripeMin bytes (default 1 MiB) are split
	// over all of them.
	Stripes   int
	StripeMin int
	// Timeout bounds every wait once connected: a receive, a send the peer
	// does not drain, a handshake (DefaultTimeout when 0).
	Timeout time.Duration
	// ConnectTimeout bounds forming the mesh: peers may start later than
	// this rank, so dials are retried until then (default 60 s).
	ConnectTimeout time.Duration
	// Spin is how long a receive polls its socket before it parks
	// (see tcpConn.spin): 0 means DefaultSpin, a negative value never.
	Spin time.Duration
	// Shm carries the data frames of a pair whose ends are on the same
	// host through shared memory (shm.go) when both ends set it; the
	// pair's TCP connection still carries the rest.
	Shm bool
	// Limits bounds frame payloads (wire.DefaultLimits when zero).
	Limits wire.Limits
	// Build overrides the build digest sent in the handshake (tests of the
	// mismatch refusal); empty means BuildDigest().
	Build string
	// Logger receives the connection log lines (slog.Default() when nil).
	Logger *slog.Logger
	// Resolver resolves the host names in Addrs (nil: the system's); a
	// cluster found through a DNS server of its own (BRAID_DNS_SERVER)
	// dials its names through the same server.
	Resolver *net.Resolver
	// OnRetry, when set, is told of every failed dial before the next
	// attempt (the coordinator logs a worker not up yet as a warning);
	// without it the retries are logged at the info level.
	OnRetry func(Retry)
}

// Retry describes one failed dial that will be tried again.
type Retry struct {
	Rank    int           // the peer dialled
	Addr    string        // at this address
	Attempt int           // 1 for the first dial
	Err     error         // why it failed
	Wait    time.Duration // until the next attempt
	Waited  time.Duration // since the first attempt
	Limit   time.Duration // ConnectTimeout
}

// DefaultSpin is MeshConfig.Spin's default (Linux; elsewhere receives
// park at once): long enough to cover the wait of an all-reduce between
// ranks of similar speed, short enough that a rank waiting on a slow peer
// soon gives its CPU back.
const DefaultSpin = 500 * time.Microsecond

// inlineMax is the largest message Post writes on the caller's goroutine:
// a small write goes straight into the socket buffer, and a goroutine
// hand-off would cost more than it saves. Larger ones go to the
// connection's sender so that a rank writes to all its peers at once.
const inlineMax = 64 << 10

// TCP is one rank's transport over a TCP mesh, built by Connect.
type TCP struct {
	rank, size int
	cfg        MeshConfig
	peers      []*tcpPeer // nil at this rank's index
	log        *slog.Logger
	quit       chan struct{}
	closed     atomic.Bool
	wg         sync.WaitGroup // readers and senders
}

type tcpPeer struct {
	t           *TCP
	rank        int
	addr, local string
	dialed      bool
	hello       *hello
	conns       []*tcpConn // by stripe
	shm         *shmLink   // the data frames' shared memory, or nil (TCP)
	ctrl        *queue
	stats       counters
	asm         []byte // a striped message put back together
	pong        chan wire.Tag
	pingSeq     uint64
	failOnce    sync.Once
	failErr     error
	failed      chan struct{}
	pingMu      sync.Mutex
}

type tcpConn struct {
	p      *tcpPeer
	stripe int
	nc     net.Conn
	data   *queue

	wmu  sync.Mutex // one frame at a time on the socket
	whdr [wire.HeaderSize]byte
	wbuf []byte
	iov  [2][]byte
	bufs net.Buffers

	post    chan postReq
	done    chan error
	fd      int  // the socket, for spin's peeks; -1 when unknown
	pending bool // a posted send not yet flushed; owned by the poster
}

type postReq struct {
	h    wire.Header
	data []byte
	shm  bool // through the peer's shared memory
}

// Connect joins the mesh described by cfg and returns when this rank is
// connected to every peer, or with an error naming the peer that could not
// be reached or was refused. ctx bounds the forming; once connected, the
// transport lives until Close (or until ctx is done, which closes it).
func Connect(ctx context.Context, cfg MeshConfig) (*TCP, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	t := &TCP{rank: cfg.Rank, size: len(cfg.Addrs), cfg: cfg, log: cfg.Logger, quit: make(chan struct{})}
	t.peers = make([]*tcpPeer, t.size)
	if t.size == 1 {
		t.log.Info("dist: transport tcp with no peers (group of one)", "rank", t.rank)
		return t, nil
	}
	if err := t.form(ctx); err != nil {
		return nil, err
	}
	if err := t.negotiateShm(); err != nil {
		for _, p := range t.peers {
			if p != nil {
				if p.shm != nil {
					p.shm.unmap()
				}
				for _, c := range p.conns {
					c.nc.Close()
				}
			}
		}
		return nil, err
	}
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		t.log.Info("dist: connected", "transport", "tcp", "rank", t.rank, "peer", p.rank, "addr", p.addr,
			"local", p.local, "dialed", p.dialed, "stripes", len(p.conns), "peer_cores", p.hello.Facts.Cores,
			"peer_mem_usable", p.hello.Facts.MemUsable)
		for _, c := range p.conns {
			t.wg.Add(2)
			go c.reader()
			go c.sender()
		}
	}
	// The transport outlives Connect's ctx only by the caller's choice: a
	// cancelled ctx closes it, which ends every wait with an error.
	stop := context.AfterFunc(ctx, func() { t.Close() })
	go func() { <-t.quit; stop() }()
	return t, nil
}

func (c *MeshConfig) normalize() error {
	n := len(c.Addrs)
	if n < 1 || n > 1<<10 {
		return fmt.Errorf("dist: mesh of %d ranks: want 1..1024 addresses", n)
	}
	if c.Rank < 0 || c.Rank >= n {
		return fmt.Errorf("dist: rank %d is not in a mesh of %d", c.Rank, n)
	}
	for j := c.Rank + 1; j < n; j++ {
		if c.Addrs[j] == "" {
			return fmt.Errorf("dist: rank %d has no address to dial rank %d", c.Rank, j)
		}
	}
	if c.Rank > 0 && c.Listen == "" && c.Listener == nil {
		return fmt.Errorf("dist: rank %d needs a listen address: ranks 0..%d dial it", c.Rank, c.Rank-1)
	}
	if c.Stripes == 0 {
		c.Stripes = 1
	}
	if c.Stripes < 1 || c.Stripes > wire.MaxStripes {
		return fmt.Errorf("dist: %d connections per pair: want 1..%d", c.Stripes, wire.MaxStripes)
	}
	if c.StripeMin <= 0 {
		c.StripeMin = 1 << 20
	}
	if c.Spin == 0 {
		c.Spin = DefaultSpin
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 60 * time.Second
	}
	if c.Limits == (wire.Limits{}) {
		c.Limits = wire.DefaultLimits
	}
	if c.Build == "" {
		c.Build = BuildDigest()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func (t *TCP) hsConfig() *handshakeConfig {
	return &handshakeConfig{rank: t.rank, size: t.size, stripes: t.cfg.Stripes, build: t.cfg.Build,
		secret: t.cfg.Secret, timeout: min(t.cfg.Timeout, 10*time.Second), limits: t.cfg.Limits}
}

type arrival struct {
	conn   net.Conn
	hello  *hello
	peer   int
	stripe int
	dialed bool
}

// form dials the higher ranks and accepts the lower ones, concurrently,
// until every pair has its connections.
func (t *TCP) form(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.ConnectTimeout)
	defer cancel()
	hc := t.hsConfig()
	inbound, outbound := t.rank*t.cfg.Stripes, (t.size-1-t.rank)*t.cfg.Stripes
	arrivals := make(chan arrival, inbound+outbound)
	fatal := make(chan error, 1)
	fail := func(err error) {
		select {
		case fatal <- err:
		default:
		}
		cancel()
	}
	deliver := func(a arrival) {
		select {
		case arrivals <- a:
		case <-ctx.Done():
			a.conn.Close()
		}
	}
	var wg sync.WaitGroup
	var lastRefusal atomic.Pointer[string]

	if inbound > 0 {
		ln := t.cfg.Listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", t.cfg.Listen); err != nil {
				return fmt.Errorf("dist: rank %d listening on %s: %w", t.rank, t.cfg.Listen, err)
			}
			defer ln.Close()
		}
		t.log.Info("dist: listening", "rank", t.rank, "addr", ln.Addr().String(), "expect_ranks", fmt.Sprintf("0..%d", t.rank-1), "secret", len(t.cfg.Secret) > 0)
		if dl, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
			stop := context.AfterFunc(ctx, func() { dl.SetDeadline(time.Unix(1, 0)) })
			defer func() { stop(); dl.SetDeadline(time.Time{}) }()
		} else if t.cfg.Listener == nil {
			stop := context.AfterFunc(ctx, func() { ln.Close() })
			defer stop()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hs sync.WaitGroup
			defer hs.Wait()
			for ctx.Err() == nil {
				conn, err := ln.Accept()
				if err != nil {
					if ctx.Err() == nil {
						var ne net.Error
						if errors.As(err, &ne) && ne.Timeout() {
							continue
						}
						fail(fmt.Errorf("dist: rank %d accepting on %s: %w", t.rank, ln.Addr(), err))
					}
					return
				}
				hs.Add(1)
				go func() {
					defer hs.Done()
					// A client that connects and says nothing must not hold
					// up the mesh past its forming.
					stop := context.AfterFunc(ctx, func() { conn.Close() })
					a, err := t.accept(conn, hc)
					if !stop() {
						return // closed by the cancel; the mesh is done or failed
					}
					if err != nil {
						msg := err.Error()
						lastRefusal.Store(&msg)
						t.log.Warn("dist: refused connection", "rank", t.rank, "from", conn.RemoteAddr().String(), "err", err)
						conn.Close()
						return
					}
					deliver(a)
				}()
			}
		}()
	}
	for j := t.rank + 1; j < t.size; j++ {
		for s := range t.cfg.Stripes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := t.dial(ctx, j, s, hc)
				if err != nil {
					fail(err)
					return
				}
				deliver(a)
			}()
		}
	}

	slots := make([][]*arrival, t.size)
	for i := range slots {
		slots[i] = make([]*arrival, t.cfg.Stripes)
	}
	var err error
	for got := 0; got < inbound+outbound && err == nil; {
		select {
		case a := <-arrivals:
			if slots[a.peer][a.stripe] != nil {
				t.log.Warn("dist: refused duplicate connection", "rank", t.rank, "peer", a.peer, "stripe", a.stripe, "from", a.conn.RemoteAddr().String())
				refuse(a.conn, fmt.Sprintf("rank %d already has connection %d from rank %d", t.rank, a.stripe, a.peer))
				a.conn.Close()
				continue
			}
			slots[a.peer][a.stripe] = &a
			got++
		case err = <-fatal:
		case <-ctx.Done():
			// A dialer that gave up at the same moment has the better
			// reason (its last dial error): let them all finish first.
			wg.Wait()
			select {
			case err = <-fatal:
			default:
				err = t.missing(slots, ctx.Err(), lastRefusal.Load())
			}
		}
	}
	cancel()
	wg.Wait()
	close(arrivals)
	for a := range arrivals { // late ones, after a failure
		a.conn.Close()
	}
	if err != nil {
		for _, ss := range slots {
			for _, a := range ss {
				if a != nil {
					a.conn.Close()
				}
			}
		}
		return err
	}
	for j, ss := range slots {
		if j == t.rank {
			continue
		}
		p := &tcpPeer{t: t, rank: j, dialed: j > t.rank, hello: ss[0].hello, ctrl: newQueue(),
			pong: make(chan wire.Tag, 1), failed: make(chan struct{}),
			addr: ss[0].conn.RemoteAddr().String(), local: ss[0].conn.LocalAddr().String()}
		for s, a := range ss {
			p.conns = append(p.conns, &tcpConn{p: p, stripe: s, nc: a.conn, data: newQueue(),
				post: make(chan postReq, 1), done: make(chan error, 1), fd: socketFD(a.conn)})
		}
		t.peers[j] = p
	}
	return nil
}

// missing explains a mesh that did not form in time: which ranks never
// connected, and the last refusal seen, which is usually the real reason.
func (t *TCP) missing(slots [][]*arrival, cause error, last *string) error {
	var miss []string
	for j, ss := range slots {
		if j == t.rank {
			continue
		}
		for s, a := range ss {
			if a == nil {
				what := fmt.Sprintf("rank %d (listening for it)", j)
				if j > t.rank {
					what = fmt.Sprintf("rank %d at %s", j, t.cfg.Addrs[j])
				}
				if t.cfg.Stripes > 1 {
					what += fmt.Sprintf(" connection %d", s)
				}
				miss = append(miss, what)
			}
		}
	}
	sort.Strings(miss)
	err := fmt.Errorf("dist: rank %d: mesh not formed within %v (%v): no connection with %v", t.rank, t.cfg.ConnectTimeout, cause, miss)
	if last != nil {
		err = fmt.Errorf("%w; last refused connection: %s", err, *last)
	}
	return err
}

func (t *TCP) accept(conn net.Conn, hc *handshakeConfig) (arrival, error) {
	if len(t.cfg.Secret) == 0 && t.cfg.TLS == nil && !isLoopback(conn.RemoteAddr()) {
		refuse(conn, "this node has no shared secret and accepts loopback connections only")
		return arrival{}, fmt.Errorf("connection from %s refused: no shared secret configured (--secret-file or BRAID_SECRET) and no --tls-dir, so only loopback peers are accepted", conn.RemoteAddr())
	}
	setTCPOptions(conn)
	if t.cfg.TLS != nil {
		tc, err := ServerTLS(conn, t.cfg.TLS, hc.timeout)
		if err != nil {
			return arrival{}, err
		}
		conn = tc
	} else {
		c, isTLS, err := sniff(conn, hc.timeout)
		if err != nil {
			return arrival{}, fmt.Errorf("connection from %s: %w", conn.RemoteAddr(), err)
		}
		if isTLS {
			// A braid frame where the dialer expects TLS records: its TLS
			// library reports a record header starting "BRD" (clientTLS
			// turns that into the reason).
			refuse(c, "this node runs without --tls-dir")
			return arrival{}, fmt.Errorf("connection from %s refused: it speaks TLS, and this node runs without --tls-dir", conn.RemoteAddr())
		}
		conn = c
	}
	h, err := handshake(conn, hc, false, -1, -1)
	if err != nil {
		return arrival{}, err
	}
	return arrival{conn: conn, hello: h, peer: h.Rank, stripe: h.Stripe}, nil
}

// dial connects to rank j, retrying while the peer is not up yet (refused,
// unreachable, its name not resolving yet) with exponential backoff until
// ctx ends; a handshake refusal is final.
func (t *TCP) dial(ctx context.Context, j, stripe int, hc *handshakeConfig) (arrival, error) {
	addr := t.cfg.Addrs[j]
	d := net.Dialer{KeepAlive: 15 * time.Second, Resolver: t.cfg.Resolver}
	backoff := 50 * time.Millisecond
	// A long wait (a leader started minutes before its workers) polls
	// less often, but a worker that comes up still joins within seconds.
	maxBackoff := min(max(t.cfg.ConnectTimeout/60, time.Second), 5*time.Second)
	start := time.Now()
	var lastErr error
	for attempt := 1; ; attempt++ {
		dctx, dcancel := context.WithTimeout(ctx, min(t.cfg.Timeout, 5*time.Second))
		conn, err := d.DialContext(dctx, "tcp", addr)
		dcancel()
		if err == nil {
			if len(t.cfg.Secret) == 0 && t.cfg.TLS == nil && !isLoopback(conn.RemoteAddr()) {
				conn.Close()
				return arrival{}, &PeerError{Rank: j, Addr: addr, What: "dial", Err: errors.New("this node has no shared secret (--secret-file or BRAID_SECRET) and no --tls-dir, so it connects to loopback peers only")}
			}
			setTCPOptions(conn)
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			if t.cfg.TLS != nil {
				tc, err := clientTLS(conn, t.cfg.TLS, hc.timeout)
				if err != nil {
					stop()
					conn.Close()
					// A peer with another CA or without TLS will not change
					// its mind: final, like a handshake refusal.
					return arrival{}, &PeerError{Rank: j, Addr: addr, What: "connect", Err: err}
				}
				conn = tc
			}
			h, err := handshake(conn, hc, true, j, stripe)
			if !stop() {
				return arrival{}, &PeerError{Rank: j, Addr: addr, What: "connect", Err: fmt.Errorf("mesh forming ended: %w", context.Cause(ctx))}
			}
			if err != nil {
				conn.Close()
				return arrival{}, &PeerError{Rank: j, Addr: addr, What: "connect", Err: err}
			}
			return arrival{conn: conn, hello: h, peer: j, stripe: stripe, dialed: true}, nil
		}
		lastErr = err
		if ctx.Err() == nil {
			r := Retry{Rank: j, Addr: addr, Attempt: attempt, Err: err, Wait: backoff, Waited: time.Since(start), Limit: t.cfg.ConnectTimeout}
			if t.cfg.OnRetry != nil {
				t.cfg.OnRetry(r)
			} else {
				t.log.Info("dist: peer not reachable yet; retrying", "rank", t.rank, "peer", j, "addr", addr, "attempt", attempt,
					"err", err, "retry_in", backoff, "waited", r.Waited.Round(time.Millisecond), "limit", t.cfg.ConnectTimeout)
			}
		}
		select {
		case <-ctx.Done():
			return arrival{}, &PeerError{Rank: j, Addr: addr, What: "dial", Err: fmt.Errorf("not reachable within %v (%d attempts): %w", t.cfg.ConnectTimeout, attempt, lastErr)}
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func setTCPOptions(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		// Go sets TCP_NODELAY by default; set it anyway, it is the point.
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(15 * time.Second)
	}
}

// errPeerClosed is the error of a peer that closed its transport in order
// (it sent a Close frame).
var errPeerClosed = errors.New("the peer closed the connection")

// fail marks the peer broken: every wait on it returns err, its connections
// close. The first cause wins and is logged once.
func (p *tcpPeer) fail(err error) {
	p.failOnce.Do(func() {
		switch {
		case p.t.closed.Load():
			err = fmt.Errorf("rank %d closed its transport: %w", p.t.rank, ErrClosed)
		case errors.Is(err, errPeerClosed):
			// The peer said goodbye (a Close frame): the normal end of a
			// session, not a warning.
			p.t.log.Info("dist: the peer closed the connection", "rank", p.t.rank, "peer", p.rank, "addr", p.addr)
		default:
			p.t.log.Warn("dist: closing connection", "rank", p.t.rank, "peer", p.rank, "addr", p.addr, "err", err)
		}
		pe, ok := err.(*PeerError)
		if !ok {
			pe = &PeerError{Rank: p.rank, Addr: p.addr, What: "connection", Err: err}
		}
		p.failErr = pe
		close(p.failed)
		p.ctrl.kill(pe)
		if p.shm != nil {
			p.shm.kill(pe)
		}
		for _, c := range p.conns {
			c.data.kill(pe)
			c.nc.Close()
		}
	})
}

// reader moves frames from the socket into the queues. It blocks for the
// next header without a deadline (a link may idle between requests; TCP
// keepalive and Close bound that), then reads the payload under the
// deadline.
func (c *tcpConn) reader() {
	p, t := c.p, c.p.t
	defer t.wg.Done()
	var hdr [wire.HeaderSize]byte
	var small []byte
	for {
		if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("connection closed by the peer")
			}
			p.fail(err)
			return
		}
		h, err := wire.Parse(hdr[:], t.cfg.Limits)
		if err != nil {
			p.fail(err)
			return
		}
		var q *queue
		switch h.Type {
		case wire.TypeData:
			q = c.data
		case wire.TypeControl:
			if c.stripe != 0 {
				p.fail(fmt.Errorf("%w: control frame on striping connection %d", wire.ErrMalformed, c.stripe))
				return
			}
			q = p.ctrl
		case wire.TypePing, wire.TypePong, wire.TypeError, wire.TypeClose:
			small = grow(small, int(h.Length))
			c.nc.SetReadDeadline(time.Now().Add(t.cfg.Timeout))
			if _, err := io.ReadFull(c.nc, small); err != nil {
				p.fail(fmt.Errorf("reading %s frame: %w", h.Type, err))
				return
			}
			c.nc.SetReadDeadline(time.Time{})
			switch h.Type {
			case wire.TypePing:
				if err := c.write(wire.Header{Type: wire.TypePong, Tag: h.Tag, Stripes: 1}, nil); err != nil {
					p.fail(err)
					return
				}
			case wire.TypePong:
				select {
				case p.pong <- h.Tag:
				default: // nobody waits: a late answer
				}
			case wire.TypeError:
				p.fail(fmt.Errorf("the peer reported: %s", clip(small)))
				return
			case wire.TypeClose:
				p.fail(errPeerClosed)
				return
			}
			continue
		default:
			p.fail(fmt.Errorf("%w: %s frame after the handshake", wire.ErrMalformed, h.Type))
			return
		}
		f, err := q.getFree(0)
		if err != nil {
			return // the peer failed; its cause is recorded
		}
		f.data = grow(f.data, int(h.Length))
		c.nc.SetReadDeadline(time.Now().Add(t.cfg.Timeout))
		if _, err := io.ReadFull(c.nc, f.data); err != nil {
			q.free <- f
			p.fail(fmt.Errorf("reading %d-byte payload of %s frame %s: %w", h.Length, h.Type, h.Tag, err))
			return
		}
		c.nc.SetReadDeadline(time.Time{})
		f.tag, f.stripe, f.stripes = h.Tag, h.Stripe, h.Stripes
		p.stats.recv(int(h.Length))
		q.put(f)
	}
}

// sender writes posted messages; one per connection so that a rank writes
// to all its peers (and all stripes) at once.
func (c *tcpConn) sender() {
	defer c.p.t.wg.Done()
	for {
		select {
		case r := <-c.post:
			if r.shm {
				c.done <- c.p.shmWrite(r.h, r.data)
			} else {
				c.done <- c.write(r.h, r.data)
			}
		case <-c.p.t.quit:
			return
		}
	}
}

// write sends one frame under the write deadline: header and payload in one
// write for small frames, as a vectored write for large ones (no copy).
func (c *tcpConn) write(h wire.Header, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	h.Length = uint32(len(data))
	wire.Put(c.whdr[:], &h)
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.p.t.cfg.Timeout)); err != nil {
		return c.writeErr(h, err)
	}
	var err error
	if len(data) <= inlineMax {
		c.wbuf = append(append(c.wbuf[:0], c.whdr[:]...), data...)
		_, err = c.nc.Write(c.wbuf)
	} else {
		c.iov[0], c.iov[1] = c.whdr[:], data
		c.bufs = c.iov[:]
		_, err = c.bufs.WriteTo(c.nc)
		c.iov[0], c.iov[1] = nil, nil
	}
	if err != nil {
		return c.writeErr(h, err)
	}
	c.p.stats.sent(len(data))
	return nil
}

func (c *tcpConn) writeErr(h wire.Header, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("%w after %v: the peer is not reading (hung?)", ErrTimeout, c.p.t.cfg.Timeout)
	}
	select {
	case <-c.p.failed: // the connection broke first: that is the cause
		return c.p.failErr
	default:
	}
	pe := &PeerError{Rank: c.p.rank, Addr: c.p.addr, What: "send " + h.Tag.String(), Err: err}
	c.p.fail(pe)
	return pe
}

func (t *TCP) peer(j int) (*tcpPeer, error) {
	if j < 0 || j >= t.size || j == t.rank {
		return nil, fmt.Errorf("dist: rank %d has no peer %d in a group of %d", t.rank, j, t.size)
	}
	p := t.peers[j]
	select {
	case <-p.failed:
		return nil, p.failErr
	default:
	}
	return p, nil
}

// Rank is this rank's index.
func (t *TCP) Rank() int { return t.rank }

// Size is the number of ranks.
func (t *TCP) Size() int { return t.size }

// Kind is "tcp", or "tcp+shm" when some peer's data frames go through
// shared memory (shm.go).
func (t *TCP) Kind() string {
	for _, p := range t.peers {
		if p != nil && p.shm != nil {
			return "tcp+shm"
		}
	}
	return "tcp"
}

func (t *TCP) send(j int, typ wire.Type, tag wire.Tag, data []byte, async bool) error {
	p, err := t.peer(j)
	if err != nil {
		return err
	}
	if max := t.cfg.Limits.Max(typ); uint64(len(data)) > uint64(max) {
		return fmt.Errorf("dist: %s message of %d bytes to rank %d exceeds the limit of %d", typ, len(data), j, max)
	}
	if typ == wire.TypeData && p.shm != nil {
		c := p.conns[0]
		if c.pending {
			return fmt.Errorf("dist: send to rank %d while a posted send is not flushed", j)
		}
		h := wire.Header{Type: typ, Tag: tag, Stripes: 1}
		// A frame that fits the room left is written at once; a larger
		// posted one goes to the sender, so that this rank can receive
		// (and free the peer's ring) while it streams.
		if !async || p.shm.fits(len(data)) {
			return p.shmWrite(h, data)
		}
		c.pending = true
		c.post <- postReq{h: h, data: data, shm: true}
		return nil
	}
	k := 1
	if typ == wire.TypeData && len(p.conns) > 1 && len(data) >= t.cfg.StripeMin {
		k = len(p.conns)
	}
	for i := 0; i < k; i++ {
		if p.conns[i].pending {
			return fmt.Errorf("dist: send to rank %d while a posted send is not flushed", j)
		}
	}
	if k == 1 {
		h := wire.Header{Type: typ, Tag: tag, Stripes: 1}
		if !async || len(data) <= inlineMax {
			return p.conns[0].write(h, data)
		}
		p.conns[0].pending = true
		p.conns[0].post <- postReq{h: h, data: data}
		return nil
	}
	n := len(data)
	for i := k - 1; i >= 0; i-- {
		h := wire.Header{Type: typ, Tag: tag, Stripe: uint8(i), Stripes: uint8(k)}
		part := data[i*n/k : (i+1)*n/k]
		if i == 0 && !async {
			if err := p.conns[0].write(h, part); err != nil {
				t.flush(p)
				return err
			}
			continue
		}
		p.conns[i].pending = true
		p.conns[i].post <- postReq{h: h, data: part}
	}
	if !async {
		return t.flush(p)
	}
	return nil
}

func (t *TCP) flush(p *tcpPeer) error {
	var first error
	for _, c := range p.conns {
		if !c.pending {
			continue
		}
		var err error
		select {
		case err = <-c.done:
			c.pending = false
		case <-t.quit:
			err = &PeerError{Rank: p.rank, Addr: p.addr, What: "send", Err: ErrClosed}
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Send writes one data frame (striped when large and configured).
func (t *TCP) Send(peer int, tag wire.Tag, p []byte) error {
	return t.send(peer, wire.TypeData, tag, p, false)
}

// Post starts a send; small messages are written at once.
func (t *TCP) Post(peer int, tag wire.Tag, p []byte) error {
	return t.send(peer, wire.TypeData, tag, p, true)
}

// Flush waits for the posted send to peer.
func (t *TCP) Flush(peer int) error {
	if peer < 0 || peer >= t.size || peer == t.rank {
		return fmt.Errorf("dist: rank %d has no peer %d in a group of %d", t.rank, peer, t.size)
	}
	return t.flush(t.peers[peer])
}

// Recv waits for the next data frame from peer and checks its tag.
func (t *TCP) Recv(peer int, tag wire.Tag) ([]byte, error) {
	p, err := t.peer(peer)
	if err != nil {
		// Frames that arrived before the failure are still delivered.
		if peer < 0 || peer >= t.size || peer == t.rank {
			return nil, err
		}
		p = t.peers[peer]
	}
	b, err := p.recv(tag)
	if err != nil {
		pe, ok := err.(*PeerError)
		if !ok {
			pe = &PeerError{Rank: peer, Addr: p.addr, What: "recv " + tag.String(), Err: err}
			p.fail(pe)
		} else if pe.What == "connection" {
			pe = &PeerError{Rank: peer, Addr: p.addr, What: "recv " + tag.String(), Err: pe.Err}
		}
		return nil, pe
	}
	return b, nil
}

// shmWrite writes one data frame through the shared memory; a failure
// breaks the pair, as a failed socket write does.
func (p *tcpPeer) shmWrite(h wire.Header, data []byte) error {
	if err := p.shm.write(h, data); err != nil {
		select {
		case <-p.failed: // the connection broke first: that is the cause
			return p.failErr
		default:
		}
		pe := &PeerError{Rank: p.rank, Addr: p.addr, What: "send " + h.Tag.String() + " (shared memory)", Err: err}
		p.fail(pe)
		return pe
	}
	p.stats.sent(len(data))
	return nil
}

func (p *tcpPeer) recv(tag wire.Tag) ([]byte, error) {
	if p.shm != nil {
		h, b, err := p.shm.recv()
		if err != nil {
			return nil, err
		}
		if h.Type != wire.TypeData || h.Stripes != 1 {
			return nil, fmt.Errorf("%w: %s frame (%d stripes) on the shared-memory data lane", wire.ErrMalformed, h.Type, h.Stripes)
		}
		if err := checkTag(h.Tag, tag); err != nil {
			return nil, err
		}
		p.stats.recv(len(b))
		return b, nil
	}
	timeout := p.t.cfg.Timeout
	if !p.conns[0].spin(p.t.cfg.Spin, p.conns[0].data) {
		p.stats.sleeps.Add(1)
	}
	f, err := p.conns[0].data.take(timeout)
	if err != nil {
		return nil, err
	}
	if err := checkTag(f.tag, tag); err != nil {
		return nil, err
	}
	if f.stripes == 1 {
		return f.data, nil
	}
	k := int(f.stripes)
	if f.stripe != 0 || k > len(p.conns) {
		return nil, fmt.Errorf("%w: message striped over %d connections (part %d first), this pair has %d", wire.ErrMalformed, k, f.stripe, len(p.conns))
	}
	parts := [wire.MaxStripes][]byte{f.data}
	total := len(f.data)
	for i := 1; i < k; i++ {
		g, err := p.conns[i].data.take(timeout)
		if err != nil {
			return nil, err
		}
		if g.tag != f.tag || int(g.stripe) != i || g.stripes != f.stripes {
			return nil, fmt.Errorf("%w: part %d/%d of %s on connection %d, expected part %d/%d of %s", wire.ErrMalformed, g.stripe, g.stripes, g.tag, i, i, k, f.tag)
		}
		parts[i] = g.data
		total += len(g.data)
	}
	p.asm = grow(p.asm, total)
	off := 0
	for _, b := range parts[:k] {
		off += copy(p.asm[off:], b)
	}
	return p.asm, nil
}

// SendControl writes one control frame (never striped).
func (t *TCP) SendControl(peer int, tag wire.Tag, p []byte) error {
	return t.send(peer, wire.TypeControl, tag, p, false)
}

// RecvControl waits for the next control frame from peer.
func (t *TCP) RecvControl(peer int) (wire.Tag, []byte, error) {
	if peer < 0 || peer >= t.size || peer == t.rank {
		return wire.Tag{}, nil, fmt.Errorf("dist: rank %d has no peer %d in a group of %d", t.rank, peer, t.size)
	}
	p := t.peers[peer]
	p.conns[0].spin(t.cfg.Spin, p.ctrl)
	f, err := p.ctrl.take(t.cfg.Timeout)
	if err != nil {
		var pe *PeerError
		if errors.As(err, &pe) {
			return wire.Tag{}, nil, &PeerError{Rank: peer, Addr: p.addr, What: "recv control", Err: pe.Err}
		}
		return wire.Tag{}, nil, &PeerError{Rank: peer, Addr: p.addr, What: "recv control", Err: err}
	}
	return f.tag, f.data, nil
}

// Ping measures one round trip to peer through its reader (a liveness
// check that needs no cooperation from the peer's step loop).
func (t *TCP) Ping(peer int) (time.Duration, error) {
	p, err := t.peer(peer)
	if err != nil {
		return 0, err
	}
	p.pingMu.Lock()
	defer p.pingMu.Unlock()
	p.pingSeq++
	tag := wire.Tag{Step: p.pingSeq}
	start := time.Now()
	if err := p.conns[0].write(wire.Header{Type: wire.TypePing, Tag: tag, Stripes: 1}, nil); err != nil {
		return 0, err
	}
	timer := time.NewTimer(t.cfg.Timeout)
	defer timer.Stop()
	for {
		select {
		case got := <-p.pong:
			if got == tag {
				return time.Since(start), nil
			}
		case <-p.failed:
			return 0, p.failErr
		case <-timer.C:
			return 0, &PeerError{Rank: peer, Addr: p.addr, What: "ping", Err: fmt.Errorf("%w after %v", ErrTimeout, t.cfg.Timeout)}
		}
	}
}

// Err is why the connection with peer failed, or nil while it works. It
// never blocks: a coordinator checks an idle worker's session with it.
func (t *TCP) Err(peer int) error {
	if peer < 0 || peer >= t.size || peer == t.rank {
		return fmt.Errorf("dist: rank %d has no peer %d in a group of %d", t.rank, peer, t.size)
	}
	select {
	case <-t.peers[peer].failed:
		return t.peers[peer].failErr
	default:
		return nil
	}
}

// Peer describes peer.
func (t *TCP) Peer(peer int) PeerInfo {
	if peer < 0 || peer >= t.size || peer == t.rank {
		return PeerInfo{Rank: peer}
	}
	p := t.peers[peer]
	facts := p.hello.Facts
	return PeerInfo{Rank: peer, Addr: p.addr, Local: p.local, Facts: &facts, Build: p.hello.Build,
		Conns: len(p.conns), Kind: p.kind(), Dialed: p.dialed}
}

// kind is "tcp", or "tcp+shm" when the data frames go through shared
// memory.
func (p *tcpPeer) kind() string {
	if p.shm != nil {
		return "tcp+shm"
	}
	return "tcp"
}

// Stats returns the traffic counters.
func (t *TCP) Stats() Stats {
	s := Stats{Kind: "tcp", Rank: t.rank, Peers: make([]PeerStats, t.size)}
	for j, p := range t.peers {
		if p != nil {
			s.Peers[j] = p.stats.snapshot(j, p.addr)
		} else {
			s.Peers[j].Rank = j
		}
	}
	return s
}

// Close says goodbye to every peer (best effort, so they fail at once with
// a clear reason rather than at their deadline), closes the connections and
// waits for the readers and senders to end.
func (t *TCP) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		c := p.conns[0]
		if c.wmu.TryLock() { // a writer stuck on a dead peer must not hold up Close
			c.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.nc.Write(wire.Append(nil, wire.Header{Type: wire.TypeClose}, nil))
			c.wmu.Unlock()
		}
	}
	close(t.quit)
	for _, p := range t.peers {
		if p != nil {
			p.fail(ErrClosed)
		}
	}
	t.wg.Wait()
	for _, p := range t.peers {
		if p != nil && p.shm != nil {
			p.shm.release()
		}
	}
	return nil
}
