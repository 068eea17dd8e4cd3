package kvcache

import (
	"slices"
	"testing"
)

// TestReset fills a cache (shared prefixes, copy-on-write blocks, a
// windowed layer's rings), resets it, and checks that it is then
// indistinguishable from a new cache of the same config: nothing held,
// every block free, the same block ids handed out for the same operations,
// the same bytes, and no allocation.
func TestReset(t *testing.T) {
	for _, cfg := range []Config{
		{Layers: 2, KVDim: 4, BlockSize: 8, Blocks: 12},
		{Layers: 2, KVDim: 4, BlockSize: 8, Blocks: 12, F32: true},
		{Layers: 2, KVDim: 4, BlockSize: 8, Blocks: 12, Window: []int{0, 10}, MaxStep: 4, Rings: 3},
	} {
		used := mustNew(t, cfg)
		toks := make([]uint16, 20)
		ops := func(c *Cache) {
			t.Helper()
			if err := appendTokens(t, c, 1, toks...); err != nil {
				t.Fatal(err)
			}
			if err := c.CopyPrefix(2, 1, 12); err != nil {
				t.Fatal(err)
			}
			if err := appendTokens(t, c, 2, 1, 2, 3); err != nil {
				t.Fatal(err)
			}
			if err := c.Reserve(3, 9); err != nil {
				t.Fatal(err)
			}
		}
		ops(used)
		bytes := used.Bytes()
		used.Reset()
		st := used.Stats()
		if st.BlocksUsed != 0 || st.BlocksFree != cfg.Blocks || st.Sequences != 0 || st.Positions != 0 || st.RingBlocksUsed != 0 || st.BytesUsed != 0 {
			t.Fatalf("window %v: after Reset %+v, want an empty pool", cfg.Window, st)
		}
		for seq := SeqID(1); seq <= 3; seq++ {
			if used.Has(seq) || used.Len(seq) != 0 {
				t.Errorf("window %v: sequence %d survived Reset (len %d)", cfg.Window, seq, used.Len(seq))
			}
		}
		for b := range cfg.Blocks {
			if r := used.Refs(int32(b)); r != 0 {
				t.Errorf("window %v: block %d has %d references after Reset", cfg.Window, b, r)
			}
		}
		if used.Bytes() != bytes {
			t.Errorf("window %v: %d bytes after Reset, %d before", cfg.Window, used.Bytes(), bytes)
		}
		fresh := mustNew(t, cfg)
		ops(fresh)
		ops(used)
		for seq := SeqID(1); seq <= 3; seq++ {
			if a, b := used.Blocks(seq), fresh.Blocks(seq); !slices.Equal(a, b) {
				t.Errorf("window %v: sequence %d holds blocks %v after Reset, %v in a new cache", cfg.Window, seq, a, b)
			}
			if cfg.Window != nil {
				a, _ := used.Table(1, seq)
				b, _ := fresh.Table(1, seq)
				if !slices.Equal(a, b) {
					t.Errorf("window %v: sequence %d's ring is %v after Reset, %v in a new cache", cfg.Window, seq, a, b)
				}
			}
		}
		// contents reads every layer through the paged table, so only
		// without a window.
		if cfg.Window == nil {
			if got, want := contents(t, used, 2), contents(t, fresh, 2); !slices.Equal(got, want) {
				t.Errorf("sequence 2 reads %v after Reset, %v in a new cache", got, want)
			}
		}
		if a := testing.AllocsPerRun(20, func() { used.Reset(); ops(used) }); a != 0 {
			t.Errorf("window %v: Reset and refilling allocate %v times", cfg.Window, a)
		}
	}
}
