package dist

import (
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socketFD returns conn's file descriptor, or -1. The descriptor is only
// ever peeked at (see spin), so one that outlives its connection and gets
// reused can do no harm: a peek consumes nothing.
func socketFD(conn net.Conn) int {
	// A TLS session (or the sniffing wrapper under it) reads from a TCP
	// socket: peeking at that socket still tells whether bytes came.
	for {
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if rc.Control(func(f uintptr) { fd = int(f) }) != nil {
		return -1
	}
	return fd
}

// spin polls the socket for up to d until bytes are there to read (or a
// frame is already queued on q), without reading them: the connection's
// reader goroutine still reads every frame, and once this goroutine parks
// to take it, the scheduler finds the socket ready at once.
//
// Why: a receiver that parks in the netpoller with nothing else to run
// lets its CPU go idle, and the wake-up when the peer's bytes arrive costs
// far more than the bytes (on this project's test VM, all-reduce waits of
// 100-200 µs against a 20 µs round trip in netbench); tensor-parallel
// decode has two all-reduces per layer, and every step a Step frame and
// its result cross between coordinator and workers. Ranks run one compute
// goroutine each, so the spin takes no CPU another goroutine of this
// process could use; sched_yield between peeks lets another process on the
// same CPU run (an oversubscribed machine).
//
// It reports whether the wait is over (bytes or a frame are there); false
// means the spin ran out (or polling is off) and the receive sleeps.
func (c *tcpConn) spin(d time.Duration, q *queue) bool {
	if len(q.full) > 0 || c.fd < 0 {
		return true
	}
	if d <= 0 {
		return false
	}
	var b [1]byte
	start := time.Now()
	for i := 0; ; i++ {
		_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		if e != unix.EAGAIN {
			return true // bytes, end of stream or an error: the reader takes it from here
		}
		if len(q.full) > 0 {
			return true
		}
		if i%8 == 7 {
			if time.Since(start) > d {
				return false
			}
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}
