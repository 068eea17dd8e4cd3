package dist

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		acc <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// spinReturns runs c.spin with a budget far beyond the test's and fails if
// it has not returned within bound: spin must end on what it watches for,
// not on its budget.
func spinReturns(t *testing.T, c *tcpConn, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { c.spin(time.Hour, c.data); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("spin did not return on %s", what)
	}
}

// TestSpin checks the receive spin's contract: it ends as soon as bytes are
// readable, a frame is queued or the peer has closed, it consumes nothing
// (the reader still reads every byte), and the budget ends it otherwise.
func TestSpin(t *testing.T) {
	a, b := tcpPair(t)
	c := &tcpConn{nc: b, fd: socketFD(b), data: newQueue()}
	if c.fd < 0 {
		t.Fatalf("socketFD of a TCP connection = %d", c.fd)
	}
	if fd := socketFD(nil); fd != -1 {
		t.Fatalf("socketFD(nil) = %d, want -1", fd)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if fd := socketFD(p1); fd != -1 {
		t.Fatalf("socketFD of an in-memory pipe = %d, want -1", fd)
	}

	// Nothing to read: the budget ends it.
	start := time.Now()
	c.spin(2*time.Millisecond, c.data)
	if time.Since(start) < 2*time.Millisecond {
		t.Fatalf("spin returned after %v with nothing to read (budget 2ms)", time.Since(start))
	}

	// Bytes arrive while it spins: it returns and leaves them in place.
	go func() {
		time.Sleep(5 * time.Millisecond)
		a.Write([]byte("frame"))
	}()
	spinReturns(t, c, "bytes arriving")
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "frame" {
		t.Fatalf("after spin, read %q, %v; want the peer's 5 bytes", got, err)
	}

	// A frame already queued: no need to look at the socket.
	f, _ := c.data.getFree(0)
	c.data.put(f)
	spinReturns(t, c, "a queued frame")
	if _, err := c.data.take(time.Second); err != nil {
		t.Fatal(err)
	}

	// The peer closes: end of stream is for the reader to see.
	a.Close()
	spinReturns(t, c, "the peer closing")

	// Disabled.
	c2 := &tcpConn{fd: -1, data: newQueue()}
	spinReturns(t, c2, "an unknown descriptor")
}
