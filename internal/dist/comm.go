package dist

import (
	"fmt"
	"sync/atomic"
	"time"

	"braid/internal/dist/wire"
)

// Algo is an all-reduce algorithm.
type Algo int

// All-reduce algorithms. Every one leaves bit-identical results on all ranks.
// OneShot and TwoShot add the partials in rank order 0..N-1 for every
// element, so their results are also identical to each other; Ring adds
// chunk c in the order c, c+1, ..., c-1 (mod N), which for N <= 2 is the
// same sum (float addition is commutative) and for N >= 3 may differ from
// rank order in the last bits.
const (
	// Auto picks OneShot up to Comm.OneShotMax bytes, Comm.Large above.
	Auto Algo = iota
	// OneShot: every rank sends its whole vector to every peer and sums all
	// N partials itself. One network hop: the decode-step choice.
	OneShot
	// TwoShot: reduce-scatter by sending chunk j straight to rank j, which
	// sums it in rank order, then all-gather of the sums. Two hops, each rank
	// sends 2(N-1)/N of the vector, and on a full mesh (a switchless
	// triangle) every link is busy in both directions.
	TwoShot
	// Ring: the classic ring reduce-scatter + all-gather, 2(N-1) hops, each
	// rank sends only to its successor.
	Ring
	algoEnd
)

var algoNames = [...]string{"auto", "oneshot", "twoshot", "ring"}

func (a Algo) String() string {
	if a >= 0 && a < algoEnd {
		return algoNames[a]
	}
	return fmt.Sprintf("algo(%d)", int(a))
}

// ParseAlgo reads an algorithm name as String writes it.
func ParseAlgo(s string) (Algo, error) {
	for a := Auto; a < algoEnd; a++ {
		if algoNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("dist: unknown all-reduce algorithm %q (want auto, oneshot, twoshot or ring)", s)
}

// Algos lists the concrete algorithms (without Auto), for sweeps.
func Algos() []Algo { return []Algo{OneShot, TwoShot, Ring} }

// DefaultOneShotMax is the all-reduce size in bytes up to which Auto uses
// one-shot: the best fit of `braid netbench --local 3` (and of
// BenchmarkAllReduce) on loopback TCP on the 2-core development machine,
// where two-shot wins from 64 KiB (docs/PERFORMANCE.md, "Fabric"). A real
// fabric has more latency per hop, which favours one-shot for longer: run
// netbench there and set Comm.OneShotMax from its best fit.
const DefaultOneShotMax = 32 << 10

// Comm is the collectives of one rank over a Transport; it satisfies the
// model's Comm interface. One goroutine uses a Comm at a time, and every rank
// makes the same calls in the same order (SPMD): each message carries its
// step, its number on the pair within the step and its operation, and a
// rank that receives anything else fails with both tags in the error.
//
// After an error the Comm is broken: every later call returns the first
// error. Close the transport and build a new group.
type Comm struct {
	t          Transport
	rank, size int

	// OneShotMax and Large choose Auto's algorithm: vectors of at most
	// OneShotMax bytes go one-shot, larger ones use Large. Both must be the
	// same on every rank (a mismatch fails with a tag error, not a wrong sum).
	OneShotMax int
	Large      Algo

	step             uint64
	sendSeq, recvSeq []uint32
	err              error

	parts     [][]float32 // per-rank partials during a sum, reused
	scratch   []float32
	unaligned [][]float32 // per peer: a copy of a payload that was not 4-byte aligned
	gather    [][]byte

	stats [algoEnd]algoCounters
}

type algoCounters struct{ count, nanos, bytes atomic.Uint64 }

// NewComm returns the collectives of t's rank.
func NewComm(t Transport) *Comm {
	n := t.Size()
	return &Comm{t: t, rank: t.Rank(), size: n, OneShotMax: DefaultOneShotMax, Large: TwoShot,
		sendSeq: make([]uint32, n), recvSeq: make([]uint32, n),
		parts: make([][]float32, n), gather: make([][]byte, n), unaligned: make([][]float32, n)}
}

// Rank is this rank's index.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Transport is the transport the Comm runs on.
func (c *Comm) Transport() Transport { return c.t }

// SetStep starts a new step: later messages carry step in their tags and
// are numbered from zero again. Every rank calls it at the same point.
func (c *Comm) SetStep(step uint64) {
	c.step = step
	clear(c.sendSeq)
	clear(c.recvSeq)
}

func (c *Comm) sendTag(peer int, op wire.Op) wire.Tag {
	t := wire.Tag{Step: c.step, Seq: c.sendSeq[peer], Op: op}
	c.sendSeq[peer]++
	return t
}

func (c *Comm) recvTag(peer int, op wire.Op) wire.Tag {
	t := wire.Tag{Step: c.step, Seq: c.recvSeq[peer], Op: op}
	c.recvSeq[peer]++
	return t
}

func (c *Comm) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

// recvFloats receives a data frame from peer that must hold exactly n
// float32s and returns it as float32s (a view into the receive buffer).
func (c *Comm) recvFloats(peer int, op wire.Op, n int) ([]float32, error) {
	tag := c.recvTag(peer, op)
	b, err := c.t.Recv(peer, tag)
	if err != nil {
		return nil, err
	}
	if len(b) != 4*n {
		return nil, fmt.Errorf("dist: rank %d sent %d bytes for %s, rank %d expected %d (the ranks disagree on the tensor's size)", peer, len(b), tag, c.rank, 4*n)
	}
	if !aligned(b) { // never for frame buffers (see grow); kept so a future transport cannot misread
		c.unaligned[peer] = growF(c.unaligned[peer], n)
		copy(bytesOf(c.unaligned[peer]), b)
		return c.unaligned[peer], nil
	}
	return floatsOf(b), nil
}

// AllReduceSum replaces x on every rank by the sum of x over all ranks,
// bit-identical on every rank; the algorithm is chosen by size (Auto).
func (c *Comm) AllReduceSum(x []float32) error { return c.AllReduce(x, Auto) }

// AllReduce is AllReduceSum with a given algorithm.
func (c *Comm) AllReduce(x []float32, algo Algo) error {
	if c.err != nil {
		return c.err
	}
	if c.size == 1 {
		return nil
	}
	if algo == Auto {
		algo = c.Large
		if 4*len(x) <= c.OneShotMax {
			algo = OneShot
		}
	}
	start := time.Now()
	var err error
	switch algo {
	case OneShot:
		err = c.oneShot(x)
	case TwoShot:
		err = c.twoShot(x)
	case Ring:
		err = c.ring(x)
	default:
		return fmt.Errorf("dist: all-reduce algorithm %v is not one of oneshot, twoshot, ring", algo)
	}
	if err != nil {
		return c.fail(fmt.Errorf("dist: %s all-reduce of %d floats on rank %d: %w", algo, len(x), c.rank, err))
	}
	s := &c.stats[algo]
	s.count.Add(1)
	s.nanos.Add(uint64(time.Since(start)))
	s.bytes.Add(uint64(4 * len(x)))
	return nil
}

func (c *Comm) oneShot(x []float32) error {
	b := bytesOf(x)
	for i := 1; i < c.size; i++ { // start at the successor so ranks do not all hit rank 0 first
		p := (c.rank + i) % c.size
		if err := c.t.Post(p, c.sendTag(p, wire.OpAllReduce1), b); err != nil {
			return err
		}
	}
	for p := range c.size {
		if p == c.rank {
			c.parts[p] = x
			continue
		}
		v, err := c.recvFloats(p, wire.OpAllReduce1, len(x))
		if err != nil {
			return err
		}
		c.parts[p] = v
	}
	// x must not change while a posted send may still read it.
	for i := 1; i < c.size; i++ {
		if err := c.t.Flush((c.rank + i) % c.size); err != nil {
			return err
		}
	}
	c.sumRankOrder(x, c.parts)
	return nil
}

// chunk returns the bounds of chunk i of n elements split over size ranks:
// sizes differ by at most one, the earlier chunks being the smaller.
func chunk(n, size, i int) (lo, hi int) {
	return i * n / size, (i + 1) * n / size
}

func (c *Comm) twoShot(x []float32) error {
	n := len(x)
	// Reduce-scatter: chunk p of my vector goes to rank p, which sums it.
	for i := 1; i < c.size; i++ {
		p := (c.rank + i) % c.size
		lo, hi := chunk(n, c.size, p)
		if err := c.t.Post(p, c.sendTag(p, wire.OpReduceScat2), bytesOf(x[lo:hi])); err != nil {
			return err
		}
	}
	mlo, mhi := chunk(n, c.size, c.rank)
	mine := x[mlo:mhi]
	for p := range c.size {
		if p == c.rank {
			c.parts[p] = mine
			continue
		}
		v, err := c.recvFloats(p, wire.OpReduceScat2, len(mine))
		if err != nil {
			return err
		}
		c.parts[p] = v
	}
	c.sumRankOrder(mine, c.parts)
	for i := 1; i < c.size; i++ {
		if err := c.t.Flush((c.rank + i) % c.size); err != nil {
			return err
		}
	}
	// All-gather: my summed chunk to everyone, theirs into place.
	for i := 1; i < c.size; i++ {
		p := (c.rank + i) % c.size
		if err := c.t.Post(p, c.sendTag(p, wire.OpAllGather2), bytesOf(mine)); err != nil {
			return err
		}
	}
	for i := 1; i < c.size; i++ {
		p := (c.rank - i + c.size) % c.size
		lo, hi := chunk(n, c.size, p)
		v, err := c.recvFloats(p, wire.OpAllGather2, hi-lo)
		if err != nil {
			return err
		}
		copy(x[lo:hi], v)
	}
	for i := 1; i < c.size; i++ {
		if err := c.t.Flush((c.rank + i) % c.size); err != nil {
			return err
		}
	}
	return nil
}

func (c *Comm) ring(x []float32) error {
	n, N, r := len(x), c.size, c.rank
	next, prev := (r+1)%N, (r-1+N)%N
	// Reduce-scatter: after N-1 steps rank r holds the full sum of chunk r+1.
	for s := 0; s < N-1; s++ {
		slo, shi := chunk(n, N, (r-s+N)%N)
		if err := c.t.Post(next, c.sendTag(next, wire.OpRingRS), bytesOf(x[slo:shi])); err != nil {
			return err
		}
		rlo, rhi := chunk(n, N, (r-s-1+2*N)%N)
		v, err := c.recvFloats(prev, wire.OpRingRS, rhi-rlo)
		if err != nil {
			return err
		}
		addTo(x[rlo:rhi], v)
		if err := c.t.Flush(next); err != nil {
			return err
		}
	}
	// All-gather: pass the finished chunks around.
	for s := 0; s < N-1; s++ {
		slo, shi := chunk(n, N, (r+1-s+N)%N)
		if err := c.t.Post(next, c.sendTag(next, wire.OpRingAG), bytesOf(x[slo:shi])); err != nil {
			return err
		}
		rlo, rhi := chunk(n, N, (r-s+N)%N)
		v, err := c.recvFloats(prev, wire.OpRingAG, rhi-rlo)
		if err != nil {
			return err
		}
		copy(x[rlo:rhi], v)
		if err := c.t.Flush(next); err != nil {
			return err
		}
	}
	return nil
}

// sumRankOrder sets dst[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ...
// for every i: the same operations in the same order on every rank, so the
// results agree bit for bit. dst is parts[c.rank]; the element-wise loops
// read each element of it before writing it, except in the general case,
// where it is saved first.
func (c *Comm) sumRankOrder(dst []float32, parts [][]float32) {
	switch len(parts) {
	case 2:
		add2(dst, parts[0], parts[1])
	case 3:
		add3(dst, parts[0], parts[1], parts[2])
	default:
		if c.rank >= 3 {
			c.scratch = growF(c.scratch, len(dst))
			copy(c.scratch, dst)
			parts[c.rank] = c.scratch
		}
		add3(dst, parts[0], parts[1], parts[2])
		for _, p := range parts[3:] {
			addTo(dst, p)
		}
	}
}

func add2(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

func add3(dst, a, b, c []float32) {
	a, b, c = a[:len(dst)], b[:len(dst)], c[:len(dst)]
	for i := range dst {
		dst[i] = (a[i] + b[i]) + c[i]
	}
}

func addTo(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] += a[i]
	}
}

func growF(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Broadcast sends root's p to every rank; every rank gets the bytes back
// (on the others a view valid until the next receive from root).
func (c *Comm) Broadcast(root int, p []byte) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	if c.rank == root {
		for i := 1; i < c.size; i++ {
			q := (c.rank + i) % c.size
			if err := c.t.Post(q, c.sendTag(q, wire.OpBroadcast), p); err != nil {
				return nil, c.fail(err)
			}
		}
		for i := 1; i < c.size; i++ {
			if err := c.t.Flush((c.rank + i) % c.size); err != nil {
				return nil, c.fail(err)
			}
		}
		return p, nil
	}
	b, err := c.t.Recv(root, c.recvTag(root, wire.OpBroadcast))
	if err != nil {
		return nil, c.fail(err)
	}
	return b, nil
}

// BroadcastFloat32 copies root's x into x on every rank; the lengths must
// agree.
func (c *Comm) BroadcastFloat32(root int, x []float32) error {
	b, err := c.Broadcast(root, bytesOf(x))
	if err != nil || c.rank == root {
		return err
	}
	if len(b) != 4*len(x) {
		return c.fail(fmt.Errorf("dist: broadcast from rank %d carried %d bytes, rank %d expected %d", root, len(b), c.rank, 4*len(x)))
	}
	copy(bytesOf(x), b)
	return nil
}

// Gather collects every rank's p on root: root gets a slice indexed by rank
// (its own p at its rank; the others views valid until the next receive from
// that rank; the slice itself is reused by the next Gather); the other ranks
// get nil.
func (c *Comm) Gather(root int, p []byte) ([][]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	if c.rank != root {
		if err := c.t.Send(root, c.sendTag(root, wire.OpGather), p); err != nil {
			return nil, c.fail(err)
		}
		return nil, nil
	}
	for q := range c.size {
		if q == c.rank {
			c.gather[q] = p
			continue
		}
		b, err := c.t.Recv(q, c.recvTag(q, wire.OpGather))
		if err != nil {
			return nil, c.fail(err)
		}
		c.gather[q] = b
	}
	return c.gather, nil
}

// SendFloat32 sends x to peer, e.g. the hidden state to the next pipeline
// stage; the peer receives it with RecvFloat32.
func (c *Comm) SendFloat32(peer int, x []float32) error {
	if c.err != nil {
		return c.err
	}
	if err := c.checkPeer(peer); err != nil {
		return err
	}
	if err := c.t.Send(peer, c.sendTag(peer, wire.OpSendRecv), bytesOf(x)); err != nil {
		return c.fail(err)
	}
	return nil
}

// RecvFloat32 receives into x what peer sent with SendFloat32; the lengths
// must agree.
func (c *Comm) RecvFloat32(peer int, x []float32) error {
	if c.err != nil {
		return c.err
	}
	if err := c.checkPeer(peer); err != nil {
		return err
	}
	v, err := c.recvFloats(peer, wire.OpSendRecv, len(x))
	if err != nil {
		return c.fail(err)
	}
	copy(x, v)
	return nil
}

func (c *Comm) checkRoot(root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("dist: root rank %d is not in a group of %d", root, c.size)
	}
	return nil
}

func (c *Comm) checkPeer(peer int) error {
	if peer < 0 || peer >= c.size || peer == c.rank {
		return fmt.Errorf("dist: rank %d has no peer %d in a group of %d", c.rank, peer, c.size)
	}
	return nil
}

// AlgoStats are the all-reduce counters of one algorithm.
type AlgoStats struct {
	Algo  Algo
	Count uint64
	Time  time.Duration
	Bytes uint64
}

// Stats returns the all-reduce counters per algorithm (OneShot, TwoShot,
// Ring).
func (c *Comm) Stats() []AlgoStats {
	var out []AlgoStats
	for _, a := range Algos() {
		s := &c.stats[a]
		out = append(out, AlgoStats{Algo: a, Count: s.count.Load(), Time: time.Duration(s.nanos.Load()), Bytes: s.bytes.Load()})
	}
	return out
}
