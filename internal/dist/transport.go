// Package dist joins the ranks of one model run: frames and handshake
// (sub-package wire and Handshake), transports that move tagged messages
// between ranks (in-process for tests, TCP between machines), and the
// collectives the model needs from them (Comm).
//
// Every wait has a deadline and every failure names the peer's rank and
// address, so a dead or hung node turns into an error on the others, never
// a hang. After any error a Transport or Comm is broken: close it and build
// a new one (the cluster re-forms; nothing is patched up in place).
package dist

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"braid/internal/dist/wire"
)

// Transport moves tagged messages between the ranks of one group. It has two
// lanes per peer, each in order: data (collectives, hidden states between
// pipeline stages) and control (the step protocol), so a worker can wait for
// its next Step while collectives use the data lane.
//
// Per peer and lane, at most one goroutine sends and one receives at a time;
// different peers may be used concurrently.
type Transport interface {
	// Rank is this rank's index, Size the number of ranks.
	Rank() int
	Size() int
	// Kind names the transport ("inproc", "tcp") for logs and metrics.
	Kind() string
	// Send writes one data frame to peer. p may be reused when Send returns.
	Send(peer int, tag wire.Tag, p []byte) error
	// Post starts sending p to peer and returns at once; p must stay
	// unchanged until Flush(peer) returns. One posted send per peer at a
	// time: Post lets a rank send to several peers while it receives.
	Post(peer int, tag wire.Tag, p []byte) error
	// Flush waits for the posted send to peer, if any, and returns its error.
	Flush(peer int) error
	// Recv waits for the next data frame from peer, which must carry tag.
	// The returned bytes stay valid until the next Recv from the same peer.
	Recv(peer int, tag wire.Tag) ([]byte, error)
	// SendControl and RecvControl are the control lane: any tag, any order
	// the step protocol defines. RecvControl's bytes stay valid until the
	// next RecvControl from the same peer.
	SendControl(peer int, tag wire.Tag, p []byte) error
	RecvControl(peer int) (wire.Tag, []byte, error)
	// Peer describes peer (address, node facts from the handshake).
	Peer(peer int) PeerInfo
	// Stats returns the traffic counters so far.
	Stats() Stats
	// Close ends every wait on this rank with an error and releases the
	// connections; peers see the close as an error naming this rank.
	Close() error
}

// PeerInfo is what a transport knows about one peer.
type PeerInfo struct {
	Rank   int
	Addr   string // remote address ("inproc" in process)
	Local  string // our end of the connection
	Facts  *NodeFacts
	Build  string // the peer's build digest
	Conns  int    // connections to this peer (stripes)
	Kind   string
	Dialed bool // this rank dialed the peer (the lower rank dials)
}

// PeerStats are one peer's traffic counters.
type PeerStats struct {
	Rank                   int
	Addr                   string
	BytesSent, BytesRecv   uint64
	FramesSent, FramesRecv uint64
	// Sleeps counts the data receives that found nothing after polling for
	// the spin time and slept until the frame came: the peer was that
	// much later, and waking costs more than the poll.
	Sleeps uint64
}

// Stats is a snapshot of a transport's counters.
type Stats struct {
	Kind  string
	Rank  int
	Peers []PeerStats // indexed by rank; this rank's own entry is zero
}

// PeerError is every failure that involves one peer: it names the rank and
// address, what was being done, and the cause.
type PeerError struct {
	Rank int
	Addr string
	What string // "recv step=3 seq=1 op=allreduce-oneshot", "dial", ...
	Err  error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("rank %d (%s): %s: %v", e.Rank, e.Addr, e.What, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// ErrTimeout is wrapped by errors from waits that ran past their deadline.
var ErrTimeout = errors.New("timed out")

// ErrClosed is wrapped by errors from a transport closed on this rank.
var ErrClosed = errors.New("transport closed")

// DefaultTimeout bounds every wait unless configured otherwise: long enough
// for a slow rank's prefill step, short enough that a hung node is noticed.
const DefaultTimeout = 30 * time.Second

// counters are one peer's traffic counters, updated on the hot path.
type counters struct {
	bytesSent, bytesRecv, framesSent, framesRecv, sleeps atomic.Uint64
}

func (c *counters) sent(n int) { c.bytesSent.Add(uint64(n)); c.framesSent.Add(1) }
func (c *counters) recv(n int) { c.bytesRecv.Add(uint64(n)); c.framesRecv.Add(1) }

func (c *counters) snapshot(rank int, addr string) PeerStats {
	return PeerStats{Rank: rank, Addr: addr, BytesSent: c.bytesSent.Load(), BytesRecv: c.bytesRecv.Load(),
		FramesSent: c.framesSent.Load(), FramesRecv: c.framesRecv.Load(), Sleeps: c.sleeps.Load()}
}

// frame is one received message in a queue's preallocated buffer.
type frame struct {
	tag     wire.Tag
	stripes uint8
	stripe  uint8
	data    []byte
}

// queue hands received frames from a producer (a connection's reader, or a
// sending rank in process) to the consumer, through a fixed set of buffers
// that grow to the largest message seen and are then reused: no allocation
// per message after warm-up. A full set of buffers stops the producer, which
// is the flow control.
type queue struct {
	free, full chan *frame
	held       *frame // given to the consumer, returned on its next take
	dead       chan struct{}
	once       sync.Once
	err        error // why the queue died; set before dead is closed
	ctimer     *time.Timer
	ptimer     *time.Timer
}

// queueDepth is the buffers per queue: one held by the consumer, the others
// let the producer run ahead (a ring step's next chunk, a striped part).
const queueDepth = 3

func newQueue() *queue {
	q := &queue{free: make(chan *frame, queueDepth), full: make(chan *frame, queueDepth), dead: make(chan struct{})}
	for range queueDepth {
		q.free <- &frame{}
	}
	q.ctimer = time.NewTimer(time.Hour)
	q.ctimer.Stop()
	q.ptimer = time.NewTimer(time.Hour)
	q.ptimer.Stop()
	return q
}

// kill makes every current and later wait on q fail with err (the first
// cause wins).
func (q *queue) kill(err error) {
	q.once.Do(func() { q.err = err; close(q.dead) })
}

// getFree returns an empty frame for the producer; timeout 0 waits until
// the queue dies (a connection reader, stopped by Close).
func (q *queue) getFree(timeout time.Duration) (*frame, error) {
	select {
	case <-q.dead: // a dead receiver takes nothing more, even with room left
		return nil, q.err
	default:
	}
	select {
	case f := <-q.free:
		return f, nil
	case <-q.dead:
		return nil, q.err
	default:
	}
	var tc <-chan time.Time
	if timeout > 0 {
		q.ptimer.Reset(timeout)
		defer q.ptimer.Stop()
		tc = q.ptimer.C
	}
	select {
	case f := <-q.free:
		return f, nil
	case <-q.dead:
		return nil, q.err
	case <-tc:
		return nil, fmt.Errorf("%w after %v waiting for the receiver to take earlier messages", ErrTimeout, timeout)
	}
}

func (q *queue) put(f *frame) { q.full <- f } // never blocks: at most queueDepth frames exist

// take returns the next full frame, releasing the one held before. Frames
// already received are delivered even after the queue died.
func (q *queue) take(timeout time.Duration) (*frame, error) {
	if q.held != nil {
		q.free <- q.held
		q.held = nil
	}
	select {
	case f := <-q.full:
		q.held = f
		return f, nil
	default:
	}
	q.ctimer.Reset(timeout)
	defer q.ctimer.Stop()
	select {
	case f := <-q.full:
		q.held = f
		return f, nil
	case <-q.dead:
		select { // a frame that raced with the death is still good
		case f := <-q.full:
			q.held = f
			return f, nil
		default:
		}
		return nil, q.err
	case <-q.ctimer.C:
		return nil, fmt.Errorf("%w after %v", ErrTimeout, timeout)
	}
}

// grow returns b resliced to n bytes, reallocating only when too small.
// New storage is 8-byte aligned (allocated as uint64s), so that a received
// payload can be read as float32s in place: a plain make([]byte) of odd
// size may come from the tiny allocator at any byte offset.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	c := n + n/8
	words := make([]uint64, (c+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)[:n]
}

// checkTag compares a received tag with the expected one.
func checkTag(got, want wire.Tag) error {
	if got != want {
		return fmt.Errorf("got message %s, expected %s (the ranks disagree on what comes next: same code and settings on every rank?)", got, want)
	}
	return nil
}

// bytesOf views x as its little-endian bytes without copying (all supported
// platforms are little-endian; the handshake refuses a peer that is not).
func bytesOf(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// floatsOf views b as float32s; b's length must be a multiple of 4 and its
// storage 4-byte aligned (frame buffers come from make, which is).
func floatsOf(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func aligned(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%4 == 0
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// byteOrder names this host's byte order for the handshake.
func byteOrder() string {
	if littleEndian {
		return "little-endian"
	}
	return "big-endian"
}
