package kvcache

// Reset drops every sequence at once and hands every block and ring back to
// its pool, keeping the memory. A cache that must start over (a cluster
// re-forming after a failed step) would otherwise be replaced by a new one
// while the old one is still live: twice the KV memory at the moment a node
// fails, which is when a tight plan has no room for it. After Reset the
// cache hands out blocks in the same order as a new one; the rows keep
// their old values, which no sequence can read until it writes them.
func (c *Cache) Reset() {
	for id, s := range c.seqs {
		s.blocks, s.n = s.blocks[:0], 0
		s.ring, s.top, s.slot, s.snaps = s.ring[:0], 0, -1, s.snaps[:0]
		c.spare = append(c.spare, s)
		delete(c.seqs, id)
	}
	clear(c.refs)
	c.free = c.free[:0]
	for b := c.cfg.Blocks - 1; b >= 0; b-- {
		c.free = append(c.free, int32(b))
	}
	if c.st != nil {
		c.st.reset()
	}
	if w := c.win; w != nil {
		w.free = w.free[:0]
		for b := w.blocks - 1; b >= 0; b-- {
			w.free = append(w.free, int32(b))
		}
	}
}
