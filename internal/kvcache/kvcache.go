// Package kvcache is a paged key/value cache: one pool of fixed-size blocks,
// allocated once, shared by all sequences through per-sequence block tables.
//
// Each block holds BlockSize consecutive positions of one sequence for every
// layer: per layer a K part and a V part of BlockSize rows of KVDim values
// (this rank's KV heads only), stored as F16 bits or F32. A block can be
// shared by several sequences (prefix sharing after CopyPrefix); it is
// reference counted and returns to the pool when the last sequence lets go.
//
// Life of a decode step for one sequence:
//
//	c.Reserve(seq, c.Len(seq)+t) // blocks for t new positions; may fail with ErrFull
//	k, v := c.RowF16(layer, seq, pos)  // the model writes K/V of each new position
//	c.Commit(seq, c.Len(seq)+t)  // the new positions become part of the sequence
//
// Reserve is the only operation that takes blocks from the pool, and it also
// un-shares (copy-on-write) any shared block that the reserved positions fall
// into, so the row accessors never allocate and never fail. Writing into a
// shared block without reserving first is a bug and panics.
//
// Layers with a sliding window (Config.Window) keep only what their window
// can still read: each sequence holds a ring of RingBlocks blocks in a pool
// of their own, position p living in ring slot (p/BlockSize) mod
// RingBlocks, so their memory is bounded by the window, not the context.
// A ring is sized for the window plus the most positions one step adds, so
// a step never overwrites a position one of its queries reads. The price:
// a windowed sequence can only resume (Truncate, CopyPrefix) at a length
// whose window the ring still holds; ResumePoint says where.
//
// Layers with Config.SharedKV keep one row per position that serves as both
// K and V (MLA's latent row); recurrent layers (Config.State) keep a fixed
// state slot per sequence instead of rows.
//
// Prefix reuse is the engine's: its scheduler keeps finished sequences,
// finds the one whose tokens share the longest prefix with a new prompt,
// and shares those positions with CopyPrefix. Reset empties the whole cache
// in place, for a cluster that re-forms.
//
// A Cache is not safe for concurrent use; the engine owns it from one goroutine.
package kvcache

import (
	"errors"
	"fmt"
	"math"
)

// ErrFull is returned (wrapped, with the numbers) when the pool has too few
// free blocks for an operation. The operation then has changed nothing.
var ErrFull = errors.New("kvcache: out of blocks")

// ErrUnknownSeq is returned (wrapped) for operations on a sequence that does
// not exist.
var ErrUnknownSeq = errors.New("kvcache: unknown sequence")

// ErrNotResumable is returned (wrapped, with the numbers) when a sequence
// cannot restart at the length asked: its windowed layers have overwritten
// positions that length's window reads. ResumePoint says where it can.
var ErrNotResumable = errors.New("kvcache: cannot resume there")

// Config sizes a cache.
type Config struct {
	Layers    int  // layers held by this rank
	KVDim     int  // values per K (and per V) row: kvHeads*headDim of this rank
	BlockSize int  // positions per block
	Blocks    int  // blocks in the pool (of the layers without a window)
	F32       bool // store F32 instead of F16 bits
	// Window is each layer's sliding window, nil or 0 for a layer that
	// keeps every position; every windowed layer has the same window.
	Window []int
	// State is each recurrent layer's state per sequence, in float32
	// values (0 for a layer with K/V rows): a fixed slot per sequence, not
	// a row per position (DeltaNet's conv and delta states). Slots is the
	// most sequences holding state at once.
	State []int
	Slots int
	// SharedKV stores one row per position that serves as both K and V
	// (MLA's latent row, V being its first values): the V accessors
	// return the K rows and the cache takes half the memory.
	SharedKV bool
	// MaxStep is the most positions one sequence adds in one step, and
	// Rings the most sequences holding a ring at once: they size the
	// windowed layers' pool. Used only with a window.
	MaxStep, Rings int
}

// RingBlocks is the ring each sequence keeps in the windowed layers: the
// window's last W-1 positions plus a step of MaxStep, wherever the block
// boundaries fall. 0 without windowed layers.
func (cfg Config) RingBlocks() int {
	w := cfg.window()
	if w == 0 {
		return 0
	}
	return (w-1+cfg.MaxStep+cfg.BlockSize-1)/cfg.BlockSize + 1
}

// window is the windowed layers' window (0: none).
func (cfg Config) window() int {
	w := 0
	for _, x := range cfg.Window {
		w = max(w, x)
	}
	return w
}

// WindowLayers counts the layers with a window.
func (cfg Config) WindowLayers() int {
	n := 0
	for _, x := range cfg.Window {
		if x > 0 {
			n++
		}
	}
	return n
}

// SeqID names a sequence; any value is valid.
type SeqID int32

type seqState struct {
	blocks []int32
	n      int // committed positions
	// The windowed layers' ring: RingBlocks slots, -1 until allocated.
	// top is the highest length the ring has held since it was last
	// empty: the ring holds positions from ringLow() up, older ones were
	// overwritten.
	ring []int32
	top  int
	// slot is the sequence's recurrent-state slot (-1: none yet); snaps
	// its kept states, by ascending length.
	slot  int32
	snaps []snapshot
}

// Cache is a paged KV cache. See the package documentation.
type Cache struct {
	cfg Config
	// Strides in elements.
	rowStride   int // KVDim
	blockStride int // BlockSize*KVDim
	layerStride int // Blocks*BlockSize*KVDim

	kf16, vf16 []uint16
	kf32, vf32 []float32

	refs  []int32 // per block; 0 = free
	free  []int32 // stack of free block ids
	seqs  map[SeqID]*seqState
	spare []*seqState // dropped states, reused to keep their tables' capacity

	// Layer l's data sits at index slot[l] of its pool: the paged pool
	// above or, for a windowed layer, win.
	slot     []int
	windowed []bool
	win      *ringPool
	stateful []bool
	st       *statePool
	lens     []int // Snapshots' answer
}

// ringPool is the windowed layers' storage: blocks never shared, handed
// out as rings.
type ringPool struct {
	window, ring int // positions read back, blocks per ring
	blocks       int
	kf16, vf16   []uint16
	kf32, vf32   []float32
	layerStride  int
	free         []int32
}

// New validates cfg and allocates the whole pool at once.
func New(cfg Config) (*Cache, error) {
	for _, f := range []struct {
		name string
		v    int
	}{{"Layers", cfg.Layers}, {"KVDim", cfg.KVDim}, {"BlockSize", cfg.BlockSize}, {"Blocks", cfg.Blocks}} {
		if f.v <= 0 {
			return nil, fmt.Errorf("kvcache: invalid %s %d: must be > 0", f.name, f.v)
		}
	}
	if cfg.Blocks > math.MaxInt32 {
		return nil, fmt.Errorf("kvcache: invalid Blocks %d: block ids are int32", cfg.Blocks)
	}
	if cfg.Window != nil && len(cfg.Window) != cfg.Layers {
		return nil, fmt.Errorf("kvcache: %d layer windows for %d layers", len(cfg.Window), cfg.Layers)
	}
	if cfg.State != nil && len(cfg.State) != cfg.Layers {
		return nil, fmt.Errorf("kvcache: %d layer states for %d layers", len(cfg.State), cfg.Layers)
	}
	ns := cfg.StateLayers()
	for l, x := range cfg.State {
		if x < 0 || x > 0 && cfg.Window != nil && cfg.Window[l] > 0 {
			return nil, fmt.Errorf("kvcache: layer %d has state %d and window %d: a layer keeps rows or state, not both", l, x, cfg.Window[l])
		}
	}
	if ns > 0 && cfg.Slots <= 0 || cfg.Slots < 0 || cfg.Slots > math.MaxInt32 {
		return nil, fmt.Errorf("kvcache: invalid Slots %d: recurrent layers need at least one", cfg.Slots)
	}
	w, nw := cfg.window(), cfg.WindowLayers()
	for l, x := range cfg.Window {
		if x < 0 || x > 0 && x != w {
			return nil, fmt.Errorf("kvcache: layer %d has window %d: windows must be positive and alike (others have %d)", l, x, w)
		}
	}
	if nw > 0 && (cfg.MaxStep <= 0 || cfg.Rings <= 0) {
		return nil, fmt.Errorf("kvcache: windowed layers need MaxStep (%d) and Rings (%d) > 0", cfg.MaxStep, cfg.Rings)
	}
	// Each of K and V holds Layers*Blocks*BlockSize*KVDim elements; refuse sizes
	// whose element count or byte count overflows rather than wrap silently.
	elems := uint64(cfg.Layers - nw - ns)
	for _, f := range []int{cfg.Blocks, cfg.BlockSize, cfg.KVDim} {
		if elems > math.MaxInt64/8/uint64(f) {
			return nil, fmt.Errorf("kvcache: %+v overflows", cfg)
		}
		elems *= uint64(f)
	}
	var win *ringPool
	if nw > 0 {
		ring := cfg.RingBlocks()
		if uint64(cfg.Rings)*uint64(ring) > math.MaxInt32/2 {
			return nil, fmt.Errorf("kvcache: %d rings of %d blocks overflow the block ids", cfg.Rings, ring)
		}
		win = &ringPool{window: w, ring: ring, blocks: cfg.Rings * ring}
		welems := uint64(nw)
		for _, f := range []int{win.blocks, cfg.BlockSize, cfg.KVDim} {
			if welems > math.MaxInt64/8/uint64(f) {
				return nil, fmt.Errorf("kvcache: %+v overflows", cfg)
			}
			welems *= uint64(f)
		}
		win.layerStride = win.blocks * cfg.BlockSize * cfg.KVDim
		if cfg.F32 {
			win.kf32 = make([]float32, welems)
			win.vf32 = win.kf32
			if !cfg.SharedKV {
				win.vf32 = make([]float32, welems)
			}
		} else {
			win.kf16 = make([]uint16, welems)
			win.vf16 = win.kf16
			if !cfg.SharedKV {
				win.vf16 = make([]uint16, welems)
			}
		}
		win.free = make([]int32, win.blocks)
		for i := range win.free {
			win.free[i] = int32(win.blocks - 1 - i)
		}
	}
	c := &Cache{
		cfg:         cfg,
		rowStride:   cfg.KVDim,
		blockStride: cfg.BlockSize * cfg.KVDim,
		layerStride: cfg.Blocks * cfg.BlockSize * cfg.KVDim,
		refs:        make([]int32, cfg.Blocks),
		free:        make([]int32, cfg.Blocks),
		seqs:        make(map[SeqID]*seqState),
		slot:        make([]int, cfg.Layers),
		windowed:    make([]bool, cfg.Layers),
		win:         win,
		stateful:    make([]bool, cfg.Layers),
	}
	if cfg.Slots > 0 {
		c.st = newStatePool(cfg)
	}
	var nf, nwin, nst int
	for l := range c.slot {
		if cfg.State != nil && cfg.State[l] > 0 {
			c.stateful[l], c.slot[l] = true, nst
			nst++
		} else if cfg.Window != nil && cfg.Window[l] > 0 {
			c.windowed[l], c.slot[l] = true, nwin
			nwin++
		} else {
			c.slot[l] = nf
			nf++
		}
	}
	if cfg.F32 {
		c.kf32 = make([]float32, elems)
		c.vf32 = c.kf32
		if !cfg.SharedKV {
			c.vf32 = make([]float32, elems)
		}
	} else {
		c.kf16 = make([]uint16, elems)
		c.vf16 = c.kf16
		if !cfg.SharedKV {
			c.vf16 = make([]uint16, elems)
		}
	}
	// Pop order hands out low block ids first, which keeps tests readable.
	for i := range c.free {
		c.free[i] = int32(cfg.Blocks - 1 - i)
	}
	return c, nil
}

// Config returns the configuration the cache was built with.
func (c *Cache) Config() Config { return c.cfg }

// BlockBytes is the size of one block of the paged pool across its layers
// (those without a window), K and V.
func (c *Cache) BlockBytes() int64 {
	return c.parts() * int64(c.cfg.Layers-c.cfg.WindowLayers()-c.cfg.StateLayers()) * int64(c.blockStride) * c.elemBytes()
}

func (c *Cache) elemBytes() int64 {
	if c.cfg.F32 {
		return 4
	}
	return 2
}

// Bytes is the size of the whole cache: the paged pool and the windowed
// layers' rings.
func (c *Cache) Bytes() int64 {
	return c.BlockBytes()*int64(c.cfg.Blocks) + c.ringBytes() + c.cfg.StateBytes()
}

func (c *Cache) ringBytes() int64 {
	if c.win == nil {
		return 0
	}
	return c.parts() * int64(c.cfg.WindowLayers()) * int64(c.win.blocks) * int64(c.blockStride) * c.elemBytes()
}

// parts is 2 for separate K and V rows, 1 for a shared row.
func (c *Cache) parts() int64 {
	if c.cfg.SharedKV {
		return 1
	}
	return 2
}

// Len is the number of committed positions of seq (0 for an unknown sequence).
func (c *Cache) Len(seq SeqID) int {
	if s := c.seqs[seq]; s != nil {
		return s.n
	}
	return 0
}

// Cap is the number of positions seq's blocks can hold (Len plus reserved room).
func (c *Cache) Cap(seq SeqID) int {
	if s := c.seqs[seq]; s != nil {
		return len(s.blocks) * c.cfg.BlockSize
	}
	return 0
}

// Has reports whether seq exists (was reserved or copied into and not dropped).
func (c *Cache) Has(seq SeqID) bool { return c.seqs[seq] != nil }

// Blocks is seq's block table: block i holds positions [i*BlockSize,
// (i+1)*BlockSize). It is a view into the cache, valid until the next
// operation that changes seq; do not modify it.
func (c *Cache) Blocks(seq SeqID) []int32 {
	if s := c.seqs[seq]; s != nil {
		return s.blocks[:len(s.blocks):len(s.blocks)]
	}
	return nil
}

// Refs is block b's reference count: the number of sequences whose table holds it.
func (c *Cache) Refs(b int32) int { return int(c.refs[b]) }

func (c *Cache) blocksFor(n int) int { return (n + c.cfg.BlockSize - 1) / c.cfg.BlockSize }

func (c *Cache) full(op string, seq SeqID, need int) error {
	return fmt.Errorf("%w: %s for sequence %d needs %d blocks of %d positions, %d free of %d",
		ErrFull, op, seq, need, c.cfg.BlockSize, len(c.free), c.cfg.Blocks)
}

func (c *Cache) alloc() int32 {
	b := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.refs[b] = 1
	return b
}

func (c *Cache) release(b int32) {
	c.refs[b]--
	if c.refs[b] == 0 {
		c.free = append(c.free, b)
	}
}

func (c *Cache) newSeq(seq SeqID) *seqState {
	var s *seqState
	if n := len(c.spare); n > 0 {
		s = c.spare[n-1]
		c.spare = c.spare[:n-1]
	} else {
		s = &seqState{}
	}
	s.slot, s.snaps = -1, s.snaps[:0]
	c.seqs[seq] = s
	return s
}

// Reserve makes room for positions [Len(seq), n) of seq, creating seq if it
// does not exist: it takes blocks from the pool and un-shares (copies) any
// shared block those positions fall into, so they can be written. When the
// pool has too few free blocks it returns ErrFull and changes nothing. n <=
// Cap(seq) with nothing shared is a no-op.
func (c *Cache) Reserve(seq SeqID, n int) error {
	if n < 0 {
		return fmt.Errorf("kvcache: reserve %d positions for sequence %d", n, seq)
	}
	s := c.seqs[seq]
	have, cur := 0, 0
	if s != nil {
		have, cur = len(s.blocks), s.n
	}
	if n <= cur {
		if s == nil {
			c.newSeq(seq)
		}
		return nil
	}
	want := c.blocksFor(n)
	need := max(0, want-have)
	// Blocks that the new positions fall into and that another sequence shares.
	first, last := cur/c.cfg.BlockSize, min(have, want)
	for i := first; i < last; i++ {
		if c.refs[s.blocks[i]] > 1 {
			need++
		}
	}
	if need > len(c.free) {
		return c.full("reserve", seq, need)
	}
	var ringTmp seqState
	rs := s
	if rs == nil {
		rs = &ringTmp
	}
	if w := c.ringNeed(rs, cur, n); c.win != nil && w > len(c.win.free) {
		return fmt.Errorf("%w: reserve for sequence %d needs %d blocks of the windowed layers, %d free of %d",
			ErrFull, seq, w, len(c.win.free), c.win.blocks)
	}
	if c.st != nil && (s == nil || s.slot < 0) && len(c.st.free) == 0 {
		return fmt.Errorf("%w: reserve for sequence %d needs a recurrent-state slot, all %d are taken", ErrFull, seq, c.cfg.Slots)
	}
	if s == nil {
		s = c.newSeq(seq)
	}
	c.ringFill(s, cur, n)
	c.stateTake(s)
	for i := first; i < last; i++ {
		if old := s.blocks[i]; c.refs[old] > 1 {
			nb := c.alloc()
			// Rows at or past Len are garbage to be overwritten; only the
			// committed ones need to survive the copy.
			c.copyRows(nb, old, max(0, min(c.cfg.BlockSize, cur-i*c.cfg.BlockSize)))
			c.release(old)
			s.blocks[i] = nb
		}
	}
	for len(s.blocks) < want {
		s.blocks = append(s.blocks, c.alloc())
	}
	return nil
}

// Commit marks positions [Len(seq), n) as written: Len(seq) becomes n. n must
// lie in [Len(seq), Cap(seq)]; rolling back is Truncate's job.
func (c *Cache) Commit(seq SeqID, n int) error {
	s := c.seqs[seq]
	if s == nil {
		return fmt.Errorf("%w %d: commit", ErrUnknownSeq, seq)
	}
	if n < s.n || n > len(s.blocks)*c.cfg.BlockSize {
		return fmt.Errorf("kvcache: commit sequence %d to %d positions: must be in [Len %d, Cap %d]",
			seq, n, s.n, len(s.blocks)*c.cfg.BlockSize)
	}
	s.n = n
	s.top = max(s.top, n)
	return nil
}

// Drop forgets seq and returns the blocks no other sequence holds to the pool.
// Dropping an unknown sequence does nothing.
func (c *Cache) Drop(seq SeqID) {
	s := c.seqs[seq]
	if s == nil {
		return
	}
	for _, b := range s.blocks {
		c.release(b)
	}
	c.ringRelease(s)
	c.stateRelease(s)
	s.blocks, s.n = s.blocks[:0], 0
	delete(c.seqs, seq)
	c.spare = append(c.spare, s)
}

// Truncate rolls seq back to its first n positions (rejected draft tokens in
// speculative decoding, an edited conversation) and returns the blocks it no
// longer needs, reserved room included. n must lie in [0, Len(seq)].
func (c *Cache) Truncate(seq SeqID, n int) error {
	s := c.seqs[seq]
	if s == nil {
		return fmt.Errorf("%w %d: truncate", ErrUnknownSeq, seq)
	}
	if n < 0 || n > s.n {
		return fmt.Errorf("kvcache: truncate sequence %d to %d positions: must be in [0, Len %d]", seq, n, s.n)
	}
	if !c.resumable(s, n) {
		return c.notResumable("truncate", seq, s, n)
	}
	switch {
	case n == 0:
		c.ringRelease(s)
		c.stateRelease(s)
	case c.st != nil && n != s.n:
		c.restore(s, n)
	case c.st != nil:
		c.forget(s, n+1)
	}
	keep := c.blocksFor(n)
	for _, b := range s.blocks[keep:] {
		c.release(b)
	}
	s.blocks, s.n = s.blocks[:keep], n
	return nil
}

// CopyPrefix makes dst the first n positions of src (n <= Len(src)),
// replacing whatever dst held. Full blocks are shared by reference count; a
// partial last block is copied, since both sequences are about to write past
// n into it. It needs one free block when n is not a multiple of BlockSize;
// without one it returns ErrFull and changes nothing (dst's own blocks are not
// counted as free for this). dst == src truncates.
func (c *Cache) CopyPrefix(dst, src SeqID, n int) error {
	ss := c.seqs[src]
	if ss == nil {
		return fmt.Errorf("%w %d: copy prefix to %d", ErrUnknownSeq, src, dst)
	}
	if n < 0 || n > ss.n {
		return fmt.Errorf("kvcache: copy %d positions of sequence %d: must be in [0, Len %d]", n, src, ss.n)
	}
	if dst == src {
		return c.Truncate(src, n)
	}
	if !c.resumable(ss, n) {
		return c.notResumable("copy prefix", src, ss, n)
	}
	shared, part := n/c.cfg.BlockSize, n%c.cfg.BlockSize
	if part > 0 && len(c.free) == 0 {
		return c.full("copy prefix", dst, 1)
	}
	wlo := c.ringStart(n)
	if ds := c.seqs[dst]; c.st != nil && n > 0 && (ds == nil || ds.slot < 0) && len(c.st.free) == 0 {
		return fmt.Errorf("%w: copy prefix for sequence %d needs a recurrent-state slot, all %d are taken", ErrFull, dst, c.cfg.Slots)
	}
	if w := c.ringNeed(&seqState{}, wlo, n); c.win != nil && w > len(c.win.free) {
		return fmt.Errorf("%w: copy prefix for sequence %d needs %d blocks of the windowed layers, %d free of %d",
			ErrFull, dst, w, len(c.win.free), c.win.blocks)
	}
	// Take the new references before letting go of dst's old blocks: they may
	// be the same blocks.
	for _, b := range ss.blocks[:shared] {
		c.refs[b]++
	}
	var nb int32 = -1
	if part > 0 {
		nb = c.alloc()
		c.copyRows(nb, ss.blocks[shared], part)
	}
	ds := c.seqs[dst]
	if ds == nil {
		ds = c.newSeq(dst)
	}
	for _, b := range ds.blocks {
		c.release(b)
	}
	ds.blocks = append(ds.blocks[:0], ss.blocks[:shared]...)
	if nb >= 0 {
		ds.blocks = append(ds.blocks, nb)
	}
	c.ringRelease(ds)
	if c.win != nil && n > 0 {
		// Rings are never shared: copy the blocks the window reads.
		c.ringFill(ds, wlo, n)
		bs := c.cfg.BlockSize
		for b := wlo / bs; b <= (n-1)/bs; b++ {
			i := b % c.win.ring
			c.copyRingBlock(ds.ring[i], ss.ring[i])
		}
	}
	if c.st != nil {
		if n == 0 {
			c.stateRelease(ds)
		} else {
			from := ss.slot
			if n != ss.n {
				from = ss.snapAt(n).slot
			}
			c.forget(ds, 0)
			c.stateTake(ds)
			c.st.copySlot(ds.slot, from)
		}
	}
	ds.n, ds.top = n, n
	return nil
}

// ResumePoint is the longest length n' <= n at which seq can continue:
// n itself (at most Len(seq)), unless its windowed layers have overwritten
// what the window at n reads, or its recurrent layers keep no state there;
// then the longest snapshot below, or 0 (a restart). An unknown sequence
// resumes at 0.
func (c *Cache) ResumePoint(seq SeqID, n int) int {
	s := c.seqs[seq]
	if s == nil || n <= 0 {
		return 0
	}
	n = min(n, s.n)
	if c.resumable(s, n) {
		return n
	}
	for i := len(s.snaps) - 1; i >= 0; i-- {
		if m := s.snaps[i].n; m < n && c.resumable(s, m) {
			return m
		}
	}
	return 0
}

// ringStart is the first position the window at length n reads.
func (c *Cache) ringStart(n int) int {
	if c.win == nil {
		return n
	}
	return max(0, n-c.win.window+1)
}

// ringLow is the lowest position s's ring still holds.
func (c *Cache) ringLow(s *seqState) int {
	if c.win == nil || s.top == 0 {
		return 0
	}
	bs := c.cfg.BlockSize
	return max(0, ((s.top-1)/bs-c.win.ring+1)*bs)
}

func (c *Cache) resumable(s *seqState, n int) bool {
	if n == 0 {
		return true
	}
	if c.st != nil && n != s.n && (n > s.n || s.snapAt(n) == nil) {
		return false // a recurrent state is kept at the length and the snapshots only
	}
	return c.win == nil || c.ringLow(s) <= c.ringStart(n)
}

func (c *Cache) notResumable(op string, seq SeqID, s *seqState, n int) error {
	if c.st != nil && n != s.n && s.snapAt(n) == nil {
		return fmt.Errorf("%w: %s sequence %d at %d positions: its recurrent layers keep the state at its length %d and at the snapshots %v only",
			ErrNotResumable, op, seq, n, s.n, c.Snapshots(seq))
	}
	return fmt.Errorf("%w: %s sequence %d at %d positions: its windowed layers (window %d) hold positions from %d on, the window at %d starts at %d",
		ErrNotResumable, op, seq, n, c.win.window, c.ringLow(s), n, c.ringStart(n))
}

// ringNeed counts the ring slots positions [cur, n) fall into that s has
// not allocated yet.
func (c *Cache) ringNeed(s *seqState, cur, n int) int {
	if c.win == nil || n <= cur {
		return 0
	}
	bs, r := c.cfg.BlockSize, c.win.ring
	first, last := cur/bs, (n-1)/bs
	if last-first+1 >= r {
		first, last = 0, r-1
	}
	need := 0
	for b := first; b <= last; b++ {
		if len(s.ring) == 0 || s.ring[b%r] < 0 {
			need++
		}
	}
	return need
}

// ringFill allocates the ring slots positions [cur, n) fall into; the
// caller checked there are enough free blocks.
func (c *Cache) ringFill(s *seqState, cur, n int) {
	if c.win == nil || n <= cur {
		return
	}
	bs, r := c.cfg.BlockSize, c.win.ring
	if len(s.ring) == 0 {
		s.ring = s.ring[:0]
		for range r {
			s.ring = append(s.ring, -1)
		}
	}
	first, last := cur/bs, (n-1)/bs
	if last-first+1 >= r {
		first, last = 0, r-1
	}
	for b := first; b <= last; b++ {
		if i := b % r; s.ring[i] < 0 {
			f := c.win.free
			s.ring[i] = f[len(f)-1]
			c.win.free = f[:len(f)-1]
		}
	}
}

// ringRelease returns s's ring to the windowed pool.
func (c *Cache) ringRelease(s *seqState) {
	for _, b := range s.ring {
		if b >= 0 {
			c.win.free = append(c.win.free, b)
		}
	}
	s.ring, s.top = s.ring[:0], 0
}

// copyRingBlock copies a whole ring block, every windowed layer, K and V.
func (c *Cache) copyRingBlock(dst, src int32) {
	w, m := c.win, c.blockStride
	for l := range c.cfg.WindowLayers() {
		d := l*w.layerStride + int(dst)*m
		s := l*w.layerStride + int(src)*m
		if c.cfg.F32 {
			copy(w.kf32[d:d+m], w.kf32[s:s+m])
			copy(w.vf32[d:d+m], w.vf32[s:s+m])
		} else {
			copy(w.kf16[d:d+m], w.kf16[s:s+m])
			copy(w.vf16[d:d+m], w.vf16[s:s+m])
		}
	}
}

// copyRows copies the first rows positions of block src into block dst, in
// every layer, K and V.
func (c *Cache) copyRows(dst, src int32, rows int) {
	if rows == 0 {
		return
	}
	m := rows * c.rowStride
	for l := range c.cfg.Layers - c.cfg.WindowLayers() - c.cfg.StateLayers() {
		d := l*c.layerStride + int(dst)*c.blockStride
		s := l*c.layerStride + int(src)*c.blockStride
		if c.cfg.F32 {
			copy(c.kf32[d:d+m], c.kf32[s:s+m])
			copy(c.vf32[d:d+m], c.vf32[s:s+m])
		} else {
			copy(c.kf16[d:d+m], c.kf16[s:s+m])
			copy(c.vf16[d:d+m], c.vf16[s:s+m])
		}
	}
}

func (c *Cache) blockOff(layer int, block int32) int {
	if uint(layer) >= uint(c.cfg.Layers) {
		panic(fmt.Sprintf("kvcache: layer %d out of range (%d layers)", layer, c.cfg.Layers))
	}
	if c.windowed[layer] {
		if uint(block) >= uint(c.win.blocks) {
			panic(fmt.Sprintf("kvcache: windowed layer %d block %d out of range (%d blocks)", layer, block, c.win.blocks))
		}
		return c.slot[layer]*c.win.layerStride + int(block)*c.blockStride
	}
	if uint(block) >= uint(c.cfg.Blocks) {
		panic(fmt.Sprintf("kvcache: layer %d block %d out of range (%d blocks)", layer, block, c.cfg.Blocks))
	}
	return c.slot[layer]*c.layerStride + int(block)*c.blockStride
}

// Table is the block table layer reads seq through, and its ring length:
// block i of the sequence (positions [i*BlockSize, (i+1)*BlockSize)) is
// tab[i], or tab[i%ring] when ring > 0 (a windowed layer, whose older
// blocks are gone). A view, valid until the next operation on seq.
func (c *Cache) Table(layer int, seq SeqID) (tab []int32, ring int) {
	s := c.seqs[seq]
	if s == nil {
		return nil, 0
	}
	if c.windowed[layer] {
		return s.ring[:len(s.ring):len(s.ring)], c.win.ring
	}
	return s.blocks[:len(s.blocks):len(s.blocks)], 0
}

// Window is layer's sliding window (0: every position).
func (c *Cache) Window(layer int) int {
	if c.windowed[layer] {
		return c.win.window
	}
	return 0
}

// KF16 is block's K rows in layer: BlockSize rows of KVDim values, row i being
// position block_index*BlockSize+i of whichever sequences hold the block.
// Panics on an F32 cache.
func (c *Cache) KF16(layer int, block int32) []uint16 {
	o := c.blockOff(layer, block)
	if c.windowed[layer] {
		return c.win.kf16[o : o+c.blockStride : o+c.blockStride]
	}
	return c.kf16[o : o+c.blockStride : o+c.blockStride]
}

// VF16 is block's V rows in layer, laid out as in KF16.
func (c *Cache) VF16(layer int, block int32) []uint16 {
	o := c.blockOff(layer, block)
	if c.windowed[layer] {
		return c.win.vf16[o : o+c.blockStride : o+c.blockStride]
	}
	return c.vf16[o : o+c.blockStride : o+c.blockStride]
}

// KF32 is block's K rows in layer on an F32 cache, laid out as in KF16.
func (c *Cache) KF32(layer int, block int32) []float32 {
	o := c.blockOff(layer, block)
	if c.windowed[layer] {
		return c.win.kf32[o : o+c.blockStride : o+c.blockStride]
	}
	return c.kf32[o : o+c.blockStride : o+c.blockStride]
}

// VF32 is block's V rows in layer on an F32 cache, laid out as in KF16.
func (c *Cache) VF32(layer int, block int32) []float32 {
	o := c.blockOff(layer, block)
	if c.windowed[layer] {
		return c.win.vf32[o : o+c.blockStride : o+c.blockStride]
	}
	return c.vf32[o : o+c.blockStride : o+c.blockStride]
}

// rowOff locates position pos of seq in layer for writing. It panics if pos is
// beyond the reserved room or its block is shared: both mean a missing Reserve,
// and writing anyway would corrupt another sequence.
func (c *Cache) rowOff(layer int, seq SeqID, pos int) int {
	s := c.seqs[seq]
	if s == nil || pos < 0 || pos >= len(s.blocks)*c.cfg.BlockSize {
		panic(fmt.Sprintf("kvcache: write to sequence %d position %d outside its reserved room", seq, pos))
	}
	if c.windowed[layer] {
		b := int32(-1)
		if len(s.ring) > 0 {
			b = s.ring[pos/c.cfg.BlockSize%c.win.ring]
		}
		if b < 0 {
			panic(fmt.Sprintf("kvcache: write to sequence %d position %d of windowed layer %d outside its reserved ring", seq, pos, layer))
		}
		return c.blockOff(layer, b) + pos%c.cfg.BlockSize*c.rowStride
	}
	b := s.blocks[pos/c.cfg.BlockSize]
	if c.refs[b] > 1 {
		panic(fmt.Sprintf("kvcache: write to sequence %d position %d in shared block %d (Reserve first)", seq, pos, b))
	}
	return c.blockOff(layer, b) + pos%c.cfg.BlockSize*c.rowStride
}

// RowF16 returns the K and V rows (KVDim values each) of position pos of seq
// in layer, for the model to write after Reserve. Panics on an F32 cache.
func (c *Cache) RowF16(layer int, seq SeqID, pos int) (k, v []uint16) {
	o := c.rowOff(layer, seq, pos)
	e := o + c.rowStride
	if c.windowed[layer] {
		return c.win.kf16[o:e:e], c.win.vf16[o:e:e]
	}
	return c.kf16[o:e:e], c.vf16[o:e:e]
}

// RowF32 is RowF16 for an F32 cache.
func (c *Cache) RowF32(layer int, seq SeqID, pos int) (k, v []float32) {
	o := c.rowOff(layer, seq, pos)
	e := o + c.rowStride
	if c.windowed[layer] {
		return c.win.kf32[o:e:e], c.win.vf32[o:e:e]
	}
	return c.kf32[o:e:e], c.vf32[o:e:e]
}

// Stats is a snapshot of the pool for metrics and admission control.
type Stats struct {
	BlocksTotal int
	BlocksUsed  int
	BlocksFree  int
	// BlocksShared counts blocks held by more than one sequence.
	BlocksShared int
	Sequences    int
	// Positions sums Len over sequences (shared positions count once per sequence).
	Positions  int
	Bytes      int64 // whole cache, rings included
	BytesUsed  int64 // blocks in use, rings included
	BlockBytes int64
	// The windowed layers' pool, in ring blocks.
	RingBlocksTotal, RingBlocksUsed int
	// The recurrent layers' state slots, snapshots included, and the
	// snapshots alone.
	SlotsTotal, SlotsUsed, Snapshots int
}

// Stats reports the pool's occupancy. It walks the reference counts, so it
// costs O(Blocks); call it for metrics, not per token.
func (c *Cache) Stats() Stats {
	st := Stats{
		BlocksTotal: c.cfg.Blocks,
		BlocksFree:  len(c.free),
		BlocksUsed:  c.cfg.Blocks - len(c.free),
		Sequences:   len(c.seqs),
		Bytes:       c.Bytes(),
		BlockBytes:  c.BlockBytes(),
	}
	st.BytesUsed = int64(st.BlocksUsed) * st.BlockBytes
	if c.st != nil {
		st.SlotsTotal, st.SlotsUsed = c.cfg.Slots, c.cfg.Slots-len(c.st.free)
		st.BytesUsed += c.cfg.StateBytes() / int64(c.cfg.Slots) * int64(st.SlotsUsed)
	}
	if c.win != nil {
		st.RingBlocksTotal = c.win.blocks
		st.RingBlocksUsed = c.win.blocks - len(c.win.free)
		st.BytesUsed += c.ringBytes() / int64(c.win.blocks) * int64(st.RingBlocksUsed)
	}
	for _, r := range c.refs {
		if r > 1 {
			st.BlocksShared++
		}
	}
	for _, s := range c.seqs {
		st.Positions += s.n
		st.Snapshots += len(s.snaps)
	}
	return st
}
