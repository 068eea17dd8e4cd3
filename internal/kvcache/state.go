package kvcache

import "fmt"

// Recurrent layers (DeltaNet) keep no row per position: each sequence has
// one state per layer, a fixed slot of Config.State[layer] float32 values
// (zeros when the sequence starts), rewritten by every step. A slot is taken
// at the sequence's first Reserve and given back by Drop or Truncate to 0.
//
// Such a sequence resumes only where a state is kept: at its length, at 0,
// or at a snapshot. Snapshot(seq, n) keeps the state at length n in a slot
// of its own, from the same pool: at once when n is the sequence's length,
// else filled by the model during the step that computes position n-1
// (SnapshotState). Truncate to a snapshot's length makes that snapshot the
// live state (its slot is swapped in, nothing is copied), CopyPrefix copies
// it into the new sequence; Forget releases snapshots. The engine keeps one
// at the end of each prompt (prefix reuse of a repeated prompt) and one per
// draft of a speculative step (rollback without recomputing).
//
// Slots > 0 marks a model with recurrent layers on every rank, also one
// whose layers here are all attention: its sequences resume only where a
// state is kept, and the slots are counted alike on every rank, so an
// operation the coordinator's cache accepts fits every worker's.

// Recurrent reports whether sequences keep recurrent state somewhere in
// the model (on this rank or another): they resume only where it is kept.
func (cfg Config) Recurrent() bool { return cfg.Slots > 0 }

// StateLayers counts the recurrent layers.
func (cfg Config) StateLayers() int {
	n := 0
	for _, x := range cfg.State {
		if x > 0 {
			n++
		}
	}
	return n
}

// StateBytes is the memory of every recurrent layer's slots.
func (cfg Config) StateBytes() int64 {
	var n int64
	for _, x := range cfg.State {
		n += int64(x)
	}
	return 4 * n * int64(cfg.Slots)
}

// statePool holds the slots of every recurrent layer: layer i's slot j is
// data[i][j*size[i] : (j+1)*size[i]]. A rank without recurrent layers
// keeps the free list alone.
type statePool struct {
	data  [][]float32 // per recurrent layer
	size  []int
	slots int
	free  []int32
}

func newStatePool(cfg Config) *statePool {
	p := &statePool{slots: cfg.Slots}
	for _, x := range cfg.State {
		if x > 0 {
			p.data = append(p.data, make([]float32, x*cfg.Slots))
			p.size = append(p.size, x)
		}
	}
	p.reset()
	return p
}

// reset frees every slot, lowest first out.
func (p *statePool) reset() {
	p.free = p.free[:0]
	for i := p.slots - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
}

func (p *statePool) take() int32 {
	s := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return s
}

func (p *statePool) clearSlot(slot int32) {
	for i, d := range p.data {
		clear(d[int(slot)*p.size[i] : int(slot+1)*p.size[i]])
	}
}

func (p *statePool) copySlot(dst, src int32) {
	if dst == src {
		return
	}
	for i, d := range p.data {
		n := p.size[i]
		copy(d[int(dst)*n:int(dst+1)*n], d[int(src)*n:int(src+1)*n])
	}
}

// stateTake gives s a zeroed slot if it has none; the caller checked one
// is free.
func (c *Cache) stateTake(s *seqState) {
	if c.st == nil || s.slot >= 0 {
		return
	}
	s.slot = c.st.take()
	c.st.clearSlot(s.slot)
}

// stateRelease gives back s's slot and its snapshots'.
func (c *Cache) stateRelease(s *seqState) {
	if c.st == nil {
		return
	}
	if s.slot >= 0 {
		c.st.free = append(c.st.free, s.slot)
		s.slot = -1
	}
	c.forget(s, 0)
}

// snapshot is a kept state of a sequence: the state at length n, in its
// own slot.
type snapshot struct {
	n    int
	slot int32
}

// Snapshot keeps seq's recurrent state at length n in a slot of its own:
// copied now when n is Len(seq), else written by the model when a step
// computes position n-1 (n must not be below Len(seq): that state is
// gone). Asking again for a length kept is a no-op, and so is a cache
// whose model has no recurrent layers (every length resumes). Without a
// free slot it returns ErrFull and changes nothing.
func (c *Cache) Snapshot(seq SeqID, n int) error {
	if c.st == nil {
		return nil
	}
	s := c.seqs[seq]
	if s == nil {
		return fmt.Errorf("%w %d: snapshot", ErrUnknownSeq, seq)
	}
	if n < s.n || n < 1 {
		return fmt.Errorf("kvcache: snapshot of sequence %d at %d positions: must be in [max(1, Len %d), ...): the state of an earlier length is gone", seq, n, s.n)
	}
	at := 0
	for at < len(s.snaps) && s.snaps[at].n < n {
		at++
	}
	if at < len(s.snaps) && s.snaps[at].n == n {
		return nil
	}
	if len(c.st.free) == 0 {
		return fmt.Errorf("%w: snapshot of sequence %d at %d positions needs a recurrent-state slot, all %d are taken", ErrFull, seq, n, c.cfg.Slots)
	}
	sn := snapshot{n: n, slot: c.st.take()}
	if n == s.n && s.slot >= 0 {
		c.st.copySlot(sn.slot, s.slot)
	}
	s.snaps = append(s.snaps, snapshot{})
	copy(s.snaps[at+1:], s.snaps[at:])
	s.snaps[at] = sn
	return nil
}

// Forget releases seq's snapshots at lengths from and above.
func (c *Cache) Forget(seq SeqID, from int) {
	if s := c.seqs[seq]; s != nil && c.st != nil {
		c.forget(s, from)
	}
}

func (c *Cache) forget(s *seqState, from int) {
	k := 0
	for _, sn := range s.snaps {
		if sn.n >= from {
			c.st.free = append(c.st.free, sn.slot)
			continue
		}
		s.snaps[k] = sn
		k++
	}
	s.snaps = s.snaps[:k]
}

// Snapshots lists the lengths at which seq keeps a snapshot, ascending
// (those above Len(seq) are still to be written). A view, valid until the
// next operation on seq.
func (c *Cache) Snapshots(seq SeqID) []int {
	s := c.seqs[seq]
	if s == nil {
		return nil
	}
	c.lens = c.lens[:0]
	for _, sn := range s.snaps {
		c.lens = append(c.lens, sn.n)
	}
	return c.lens
}

// snapAt is s's snapshot at length n, or nil.
func (s *seqState) snapAt(n int) *snapshot {
	for i := range s.snaps {
		if s.snaps[i].n == n {
			return &s.snaps[i]
		}
	}
	return nil
}

// SnapshotState is where the model writes seq's state in layer after the
// step's token at position n-1, when seq keeps a snapshot at length n;
// nil otherwise.
func (c *Cache) SnapshotState(layer int, seq SeqID, n int) []float32 {
	s := c.seqs[seq]
	if s == nil || c.st == nil || uint(layer) >= uint(c.cfg.Layers) || !c.stateful[layer] {
		return nil
	}
	sn := s.snapAt(n)
	if sn == nil {
		return nil
	}
	return c.slotData(layer, sn.slot)
}

func (c *Cache) slotData(layer int, slot int32) []float32 {
	i := c.slot[layer]
	n := c.st.size[i]
	return c.st.data[i][int(slot)*n : int(slot+1)*n : int(slot+1)*n]
}

// restore makes s's snapshot at n its live state (the caller checked it
// exists) and releases the snapshots above n.
func (c *Cache) restore(s *seqState, n int) {
	sn := s.snapAt(n)
	if s.slot >= 0 {
		c.st.free = append(c.st.free, s.slot)
	}
	s.slot = sn.slot
	sn.n = -1 // no longer a snapshot: drop it from the list without freeing
	k := 0
	for _, x := range s.snaps {
		if x.n >= 0 {
			s.snaps[k] = x
			k++
		}
	}
	s.snaps = s.snaps[:k]
	c.forget(s, n+1)
}

// State is seq's recurrent state in layer, for the model to read and
// rewrite (after Reserve). It panics on a layer without state or a
// sequence without a slot: both mean a missing Reserve.
func (c *Cache) State(layer int, seq SeqID) []float32 {
	s := c.seqs[seq]
	if uint(layer) >= uint(c.cfg.Layers) || !c.stateful[layer] || s == nil || s.slot < 0 {
		panic(fmt.Sprintf("kvcache: no recurrent state for sequence %d in layer %d (Reserve first)", seq, layer))
	}
	return c.slotData(layer, s.slot)
}
