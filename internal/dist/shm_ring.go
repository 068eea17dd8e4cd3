package dist

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"braid/internal/dist/wire"
)

// The shared file: a page with the cookie, then one ring per direction
// (the lower rank writes the first), each a control page and the bytes.
//
// A ring is a single-producer single-consumer byte stream carrying frames
// as on TCP (header, payload), each padded to 8 bytes so that payloads
// stay aligned for reading as float32s. head and tail count the bytes
// written and read since the start; the producer writes only head, the
// consumer only tail. A side that finds nothing to do polls for its spin
// time, then sleeps on a futex in the shared page: the consumer on
// dataSeq (the producer bumps it after every publish and wakes it when
// dataWait is set), the producer on spaceSeq likewise.
const (
	shmRingSize  = 8 << 20 // bytes per direction (a power of two)
	shmPage      = 4096
	shmFileSize  = shmPage + 2*(shmPage+shmRingSize)
	shmCookieLen = 32
	shmAlign     = 8

	offHead      = 0
	offTail      = 64
	offDataSeq   = 128
	offDataWait  = 132
	offSpaceSeq  = 192
	offSpaceWait = 196
)

// shmRing is one direction of a shmLink, as views into the mapping.
type shmRing struct {
	head, tail          *atomic.Uint64
	dataSeq, dataWait   *atomic.Uint32
	spaceSeq, spaceWait *atomic.Uint32
	buf                 []byte
}

func ringAt(mem []byte, off int) shmRing {
	ctl := unsafe.Pointer(&mem[off])
	u64 := func(o int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Add(ctl, o)) }
	u32 := func(o int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Add(ctl, o)) }
	return shmRing{head: u64(offHead), tail: u64(offTail), dataSeq: u32(offDataSeq), dataWait: u32(offDataWait),
		spaceSeq: u32(offSpaceSeq), spaceWait: u32(offSpaceWait), buf: mem[off+shmPage : off+shmPage+shmRingSize]}
}

// shmLink is one pair's shared memory: tx is written by this rank, rx read.
type shmLink struct {
	mem    []byte
	tx, rx shmRing
	spin   time.Duration
	wait   time.Duration  // bound on one wait for data or room (MeshConfig.Timeout)
	sleeps *atomic.Uint64 // receives that slept (the peer's PeerStats.Sleeps), or nil
	limits wire.Limits

	// dead ends every wait (the TCP connection failed or the transport
	// closed); why is set before it. users counts goroutines inside a
	// method, so that the mapping goes only once none is.
	dead    atomic.Bool
	why     atomic.Pointer[error]
	users   atomic.Int64
	unmapMu sync.Mutex
	gone    bool

	wmu  sync.Mutex // one writer at a time (the caller or the sender goroutine)
	whdr [wire.HeaderSize]byte
	rhdr [wire.HeaderSize]byte
	rbuf []byte // the last received payload, valid until the next recv
	// rslept says the frame being received has slept; a frame's header,
	// payload and padding are published apart, and a receive is counted
	// once however many of its parts it waited for.
	rslept bool
}

func newShmLink(mem []byte, lower bool, cfg MeshConfig) *shmLink {
	a, b := ringAt(mem, shmPage), ringAt(mem, 2*shmPage+shmRingSize)
	l := &shmLink{mem: mem, tx: a, rx: b, spin: max(cfg.Spin, 0), wait: cfg.Timeout, limits: cfg.Limits}
	if !lower {
		l.tx, l.rx = b, a
	}
	return l
}

// errShmClosed is a wait ended by kill without a recorded cause.
var errShmClosed = errors.New("shared memory closed")

// kill ends every wait with err (the first cause wins) and wakes sleepers.
func (l *shmLink) kill(err error) {
	l.why.CompareAndSwap(nil, &err)
	l.dead.Store(true)
	if l.enter() {
		for _, r := range []*shmRing{&l.tx, &l.rx} {
			futexWake(r.dataSeq)
			futexWake(r.spaceSeq)
		}
		l.leave()
	}
}

func (l *shmLink) cause() error {
	if p := l.why.Load(); p != nil {
		return *p
	}
	return errShmClosed
}

// enter registers a user of the mapping; false once it is gone.
func (l *shmLink) enter() bool {
	l.users.Add(1)
	l.unmapMu.Lock()
	ok := !l.gone
	l.unmapMu.Unlock()
	if !ok {
		l.users.Add(-1)
	}
	return ok
}

func (l *shmLink) leave() { l.users.Add(-1) }

// release unmaps once no goroutine is inside a method (after kill, each
// returns promptly); one that does not within a second keeps the mapping
// alive rather than risk touching unmapped memory.
func (l *shmLink) release() {
	l.kill(errShmClosed)
	deadline := time.Now().Add(time.Second)
	for {
		l.unmapMu.Lock()
		if l.users.Load() == 0 {
			l.gone = true
			l.unmapMu.Unlock()
			l.unmap()
			return
		}
		l.unmapMu.Unlock()
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// fits reports whether a frame of n payload bytes fits the room the
// consumer has left now, so that writing it cannot wait.
func (l *shmLink) fits(n int) bool {
	r := &l.tx
	need := uint64(recordLen(n))
	return shmRingSize-(r.head.Load()-r.tail.Load()) >= need
}

func recordLen(n int) int { return (wire.HeaderSize + n + shmAlign - 1) &^ (shmAlign - 1) }

// write sends one frame, waiting for room as the consumer reads (a frame
// larger than the ring streams through it).
func (l *shmLink) write(h wire.Header, data []byte) error {
	if !l.enter() {
		return l.cause()
	}
	defer l.leave()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	h.Length = uint32(len(data))
	wire.Put(l.whdr[:], &h)
	var pad [shmAlign]byte
	padN := recordLen(len(data)) - wire.HeaderSize - len(data)
	for _, p := range [][]byte{l.whdr[:], data, pad[:padN]} {
		if err := l.put(p); err != nil {
			return err
		}
	}
	return nil
}

// put copies p into the ring, publishing each part as it goes.
func (l *shmLink) put(p []byte) error {
	r := &l.tx
	for len(p) > 0 {
		head := r.head.Load()
		free := shmRingSize - (head - r.tail.Load())
		if free == 0 {
			if err := l.await(r.spaceSeq, r.spaceWait, func() bool { return r.head.Load()-r.tail.Load() < shmRingSize }, "room in the ring (the peer is not reading)"); err != nil {
				return err
			}
			continue
		}
		n := min(uint64(len(p)), free)
		at := head % shmRingSize
		k := copy(r.buf[at:], p[:n])
		copy(r.buf, p[k:n])
		r.head.Store(head + n)
		r.dataSeq.Add(1)
		if r.dataWait.Load() != 0 {
			futexWake(r.dataSeq)
		}
		p = p[n:]
	}
	return nil
}

// recv returns the next frame's header and payload (valid until the next
// recv).
func (l *shmLink) recv() (wire.Header, []byte, error) {
	if !l.enter() {
		return wire.Header{}, nil, l.cause()
	}
	defer l.leave()
	l.rslept = false
	defer func() {
		if l.rslept && l.sleeps != nil {
			l.sleeps.Add(1)
		}
	}()
	if err := l.get(l.rhdr[:]); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.Parse(l.rhdr[:], l.limits)
	if err != nil {
		return h, nil, err
	}
	l.rbuf = grow(l.rbuf, int(h.Length))
	if err := l.get(l.rbuf); err != nil {
		return h, nil, err
	}
	var pad [shmAlign]byte
	if err := l.get(pad[:recordLen(int(h.Length))-wire.HeaderSize-int(h.Length)]); err != nil {
		return h, nil, err
	}
	return h, l.rbuf, nil
}

// get fills p from the ring, freeing each part as it goes.
func (l *shmLink) get(p []byte) error {
	r := &l.rx
	for len(p) > 0 {
		tail := r.tail.Load()
		avail := r.head.Load() - tail
		if avail == 0 {
			if err := l.await(r.dataSeq, r.dataWait, func() bool { return r.head.Load() != r.tail.Load() }, "data"); err != nil {
				return err
			}
			continue
		}
		n := min(uint64(len(p)), avail)
		at := tail % shmRingSize
		k := copy(p[:n], r.buf[at:])
		copy(p[k:n], r.buf)
		r.tail.Store(tail + n)
		r.spaceSeq.Add(1)
		if r.spaceWait.Load() != 0 {
			futexWake(r.spaceSeq)
		}
		p = p[n:]
	}
	return nil
}

// await returns once ready() holds: it polls for the spin time (yielding
// now and then, so that a peer on the same CPU and this process's other
// goroutines run), then sleeps on seq with its wait flag raised, in slices
// so that kill and the deadline are seen.
func (l *shmLink) await(seq, flag *atomic.Uint32, ready func() bool, what string) error {
	start := time.Now()
	for i := 1; ; i++ {
		if ready() {
			return nil
		}
		if l.dead.Load() {
			return l.cause()
		}
		if i%256 == 0 {
			runtime.Gosched()
			osYield()
			if time.Since(start) > l.spin {
				break
			}
		}
	}
	if seq == l.rx.dataSeq {
		l.rslept = true
	}
	for {
		flag.Store(1)
		s := seq.Load()
		if ready() {
			flag.Store(0)
			return nil
		}
		if l.dead.Load() {
			flag.Store(0)
			return l.cause()
		}
		waited := time.Since(start)
		if l.wait > 0 && waited > l.wait {
			flag.Store(0)
			return fmt.Errorf("%w after %v waiting for %s", ErrTimeout, l.wait, what)
		}
		futexWait(seq, s, 20*time.Millisecond)
		flag.Store(0)
	}
}
