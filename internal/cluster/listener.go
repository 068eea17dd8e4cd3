package cluster

import (
	"net"
	"sync"
	"time"
)

// handoff is a net.Listener fed by the worker's accept loop: the loop
// decides who gets a new connection (the next session's handshake, or a
// refusal while a live coordinator is being served) and hands the chosen
// ones over here. It supports SetDeadline, which dist.Connect uses to stop
// waiting when its context ends.
type handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	deadline time.Time
	wake     chan struct{} // closed and replaced when the deadline changes
}

func newHandoff(addr net.Addr) *handoff {
	return &handoff{addr: addr, conns: make(chan net.Conn, 16), done: make(chan struct{}), wake: make(chan struct{})}
}

// offer hands c to the next Accept; when nobody takes it soon (the queue is
// full) the connection is closed rather than held.
func (h *handoff) offer(c net.Conn) {
	select {
	case h.conns <- c:
	default:
		c.Close()
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "accept: deadline reached" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// Accept returns the next connection handed over, or a timeout error at the
// deadline, or net.ErrClosed after Close.
func (h *handoff) Accept() (net.Conn, error) {
	for {
		h.mu.Lock()
		dl, wake := h.deadline, h.wake
		h.mu.Unlock()
		var timer *time.Timer
		var expired <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return nil, timeoutErr{}
			}
			timer = time.NewTimer(d)
			expired = timer.C
		}
		var c net.Conn
		var err error
		select {
		case c = <-h.conns:
		case <-h.done:
			err = net.ErrClosed
		case <-expired:
			err = timeoutErr{}
		case <-wake:
		}
		if timer != nil {
			timer.Stop()
		}
		if c != nil || err != nil {
			return c, err
		}
	}
}

// SetDeadline bounds Accept; the zero time waits for ever.
func (h *handoff) SetDeadline(t time.Time) error {
	h.mu.Lock()
	h.deadline = t
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
	return nil
}

// Close ends every Accept and closes the connections still queued.
func (h *handoff) Close() error {
	h.once.Do(func() {
		close(h.done)
		for {
			select {
			case c := <-h.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }
