package dist

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/dist/wire"
)

// inprocNet is the shared state of N in-process ranks: one queue per
// ordered pair and lane.
type inprocNet struct {
	n          int
	data, ctrl [][]*queue // [from][to]
}

// InProc is one rank of a group that lives in this process; messages are
// copied into the receiver's preallocated buffers, so it behaves like a
// network transport (ordering, flow control, deadlines, tag checks) without
// one. Used by tests and by single-machine runs of the cluster code.
type InProc struct {
	net     *inprocNet
	rank    int
	timeout time.Duration
	sendMu  []sync.Mutex
	stats   []counters
	closed  atomic.Bool
}

// NewInProc returns the n ranks of an in-process group. timeout bounds every
// wait (DefaultTimeout when 0).
func NewInProc(n int, timeout time.Duration) ([]*InProc, error) {
	if n < 1 || n > 1<<12 {
		return nil, fmt.Errorf("dist: in-process group of %d ranks: want 1..4096", n)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	nt := &inprocNet{n: n, data: make([][]*queue, n), ctrl: make([][]*queue, n)}
	for i := range n {
		nt.data[i] = make([]*queue, n)
		nt.ctrl[i] = make([]*queue, n)
		for j := range n {
			if i != j {
				nt.data[i][j], nt.ctrl[i][j] = newQueue(), newQueue()
			}
		}
	}
	ranks := make([]*InProc, n)
	for r := range n {
		ranks[r] = &InProc{net: nt, rank: r, timeout: timeout, sendMu: make([]sync.Mutex, n), stats: make([]counters, n)}
	}
	return ranks, nil
}

// Rank is this rank's index.
func (t *InProc) Rank() int { return t.rank }

// Size is the number of ranks.
func (t *InProc) Size() int { return t.net.n }

// Kind is "inproc".
func (t *InProc) Kind() string { return "inproc" }

func (t *InProc) check(peer int) error {
	if peer < 0 || peer >= t.net.n || peer == t.rank {
		return fmt.Errorf("dist: rank %d has no peer %d in a group of %d", t.rank, peer, t.net.n)
	}
	if t.closed.Load() {
		return &PeerError{Rank: peer, Addr: "inproc", What: "send", Err: ErrClosed}
	}
	return nil
}

func (t *InProc) send(q *queue, peer int, tag wire.Tag, p []byte, what string) error {
	if err := t.check(peer); err != nil {
		return err
	}
	t.sendMu[peer].Lock()
	defer t.sendMu[peer].Unlock()
	f, err := q.getFree(t.timeout)
	if err != nil {
		return &PeerError{Rank: peer, Addr: "inproc", What: what + " " + tag.String(), Err: err}
	}
	f.tag, f.stripes = tag, 1
	f.data = grow(f.data, len(p))
	copy(f.data, p)
	q.put(f)
	t.stats[peer].sent(len(p))
	return nil
}

// Send copies p into peer's receive buffer.
func (t *InProc) Send(peer int, tag wire.Tag, p []byte) error {
	if err := t.check(peer); err != nil {
		return err
	}
	return t.send(t.net.data[t.rank][peer], peer, tag, p, "send")
}

// Post is Send: the copy is done before it returns.
func (t *InProc) Post(peer int, tag wire.Tag, p []byte) error { return t.Send(peer, tag, p) }

// Flush has nothing to wait for.
func (t *InProc) Flush(peer int) error { return nil }

// Recv waits for the next data frame from peer.
func (t *InProc) Recv(peer int, tag wire.Tag) ([]byte, error) {
	if err := t.check(peer); err != nil {
		return nil, err
	}
	f, err := t.net.data[peer][t.rank].take(t.timeout)
	if err == nil {
		err = checkTag(f.tag, tag)
	}
	if err != nil {
		err = &PeerError{Rank: peer, Addr: "inproc", What: "recv " + tag.String(), Err: err}
		t.net.data[peer][t.rank].kill(err)
		return nil, err
	}
	t.stats[peer].recv(len(f.data))
	return f.data, nil
}

// SendControl copies p into peer's control lane.
func (t *InProc) SendControl(peer int, tag wire.Tag, p []byte) error {
	if err := t.check(peer); err != nil {
		return err
	}
	return t.send(t.net.ctrl[t.rank][peer], peer, tag, p, "send control")
}

// RecvControl waits for the next control frame from peer.
func (t *InProc) RecvControl(peer int) (wire.Tag, []byte, error) {
	if err := t.check(peer); err != nil {
		return wire.Tag{}, nil, err
	}
	f, err := t.net.ctrl[peer][t.rank].take(t.timeout)
	if err != nil {
		return wire.Tag{}, nil, &PeerError{Rank: peer, Addr: "inproc", What: "recv control", Err: err}
	}
	t.stats[peer].recv(len(f.data))
	return f.tag, f.data, nil
}

// Peer describes peer.
func (t *InProc) Peer(peer int) PeerInfo {
	return PeerInfo{Rank: peer, Addr: "inproc", Local: "inproc", Conns: 1, Kind: "inproc", Dialed: t.rank < peer}
}

// Stats returns the traffic counters.
func (t *InProc) Stats() Stats {
	s := Stats{Kind: "inproc", Rank: t.rank, Peers: make([]PeerStats, t.net.n)}
	for p := range t.net.n {
		s.Peers[p] = t.stats[p].snapshot(p, "inproc")
	}
	return s
}

// Close fails every wait that involves this rank, here and on its peers.
func (t *InProc) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	for p := range t.net.n {
		if p == t.rank {
			continue
		}
		err := fmt.Errorf("rank %d closed its transport: %w", t.rank, ErrClosed)
		t.net.data[t.rank][p].kill(err)
		t.net.data[p][t.rank].kill(err)
		t.net.ctrl[t.rank][p].kill(err)
		t.net.ctrl[p][t.rank].kill(err)
	}
	return nil
}
