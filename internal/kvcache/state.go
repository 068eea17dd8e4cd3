package kvcache

import "fmt"

// Recurrent layers (DeltaNet) keep no row per position: each sequence has
// one state per layer, a fixed slot of Config.State[layer] float32 values
// (zeros when the sequence starts), rewritten by every step. A slot is taken
// at the sequence's first Reserve and given back by Drop or Truncate to 0.
// Such a sequence resumes only where its state is, at its length or at 0.

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
// data[i][j*size[i] : (j+1)*size[i]].
type statePool struct {
	data [][]float32 // per recurrent layer
	size []int
	free []int32
}

func newStatePool(cfg Config) *statePool {
	p := &statePool{}
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
	for i := len(p.data[0])/p.size[0] - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
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
	f := c.st.free
	s.slot = f[len(f)-1]
	c.st.free = f[:len(f)-1]
	c.st.clearSlot(s.slot)
}

func (c *Cache) stateRelease(s *seqState) {
	if c.st == nil || s.slot < 0 {
		return
	}
	c.st.free = append(c.st.free, s.slot)
	s.slot = -1
}

// State is seq's recurrent state in layer, for the model to read and
// rewrite (after Reserve). It panics on a layer without state or a
// sequence without a slot: both mean a missing Reserve.
func (c *Cache) State(layer int, seq SeqID) []float32 {
	s := c.seqs[seq]
	if uint(layer) >= uint(c.cfg.Layers) || !c.stateful[layer] || s == nil || s.slot < 0 {
		panic(fmt.Sprintf("kvcache: no recurrent state for sequence %d in layer %d (Reserve first)", seq, layer))
	}
	i := c.slot[layer]
	n := c.st.size[i]
	return c.st.data[i][int(s.slot)*n : int(s.slot+1)*n : int(s.slot+1)*n]
}
