package kvcache

import (
	"errors"
	"testing"
)

// windowRow reads position pos of seq in layer through Table, as attention
// does, and returns the token written there.
func windowRow(t *testing.T, c *Cache, layer int, seq SeqID, pos int) uint16 {
	t.Helper()
	tab, ring := c.Table(layer, seq)
	i := pos / c.cfg.BlockSize
	if ring > 0 {
		i %= ring
	}
	if i >= len(tab) || tab[i] < 0 {
		t.Fatalf("seq %d layer %d pos %d: no block (table %v, ring %d)", seq, layer, pos, tab, ring)
	}
	k := c.KF16(layer, tab[i])[pos%c.cfg.BlockSize*c.cfg.KVDim]
	return (k - uint16(layer)) / 7
}

// checkWindow checks that every query of the last step (positions
// [from, Len)) reads its whole window back: the full layer every earlier
// position, the windowed one the last W.
func checkWindow(t *testing.T, c *Cache, seq SeqID, toks []uint16, from int) {
	t.Helper()
	w := c.Window(1)
	for q := from; q < c.Len(seq); q++ {
		for p := max(0, q-w+1); p <= q; p++ {
			if got := windowRow(t, c, 1, seq, p); got != toks[p] {
				t.Fatalf("seq %d: query %d reads position %d of the windowed layer as token %d, want %d", seq, q, p, got, toks[p])
			}
		}
		if got := windowRow(t, c, 0, seq, 0); got != toks[0] {
			t.Fatalf("seq %d: the full layer lost position 0 (token %d, want %d)", seq, got, toks[0])
		}
	}
}

func TestWindowRing(t *testing.T) {
	cfg := Config{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 32, Window: []int{0, 5}, MaxStep: 3, Rings: 2}
	c := mustNew(t, cfg)
	ring := cfg.RingBlocks() // (5-1+3+3)/4 + 1 = 3
	if ring != 3 {
		t.Fatalf("RingBlocks %d, want 3", ring)
	}
	if want := int64(2*1*32*4*2*2 + 2*1*2*3*4*2*2); c.Bytes() != want {
		t.Errorf("Bytes %d, want %d (paged pool of one layer plus two rings of one layer)", c.Bytes(), want)
	}
	var toks []uint16
	for step := 0; c.Len(0) < 60; step++ {
		from := c.Len(0)
		var add []uint16
		for i := 0; i < 1+step%3; i++ {
			add = append(add, uint16(len(toks)+len(add)+1))
		}
		if err := appendTokens(t, c, 0, add...); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, add...)
		checkWindow(t, c, 0, toks, from)
		if st := c.Stats(); st.RingBlocksUsed > ring {
			t.Fatalf("after %d positions the ring holds %d blocks, more than %d", c.Len(0), st.RingBlocksUsed, ring)
		}
	}
	n := c.Len(0)
	// One position back stays resumable; far back is not, and says why.
	if got := c.ResumePoint(0, n-1); got != n-1 {
		t.Errorf("ResumePoint(%d) = %d, want %d", n-1, got, n-1)
	}
	if got := c.ResumePoint(0, 10); got != 0 {
		t.Errorf("ResumePoint(10) = %d after %d positions, want 0 (overwritten)", got, n)
	}
	if err := c.CopyPrefix(1, 0, 10); !errors.Is(err, ErrNotResumable) {
		t.Errorf("CopyPrefix of 10 overwritten positions: %v, want ErrNotResumable", err)
	}
	if err := c.Truncate(0, 10); !errors.Is(err, ErrNotResumable) {
		t.Errorf("Truncate to 10: %v, want ErrNotResumable", err)
	}
	// A prefix the ring still holds copies, and both go on on their own.
	if err := c.CopyPrefix(1, 0, n-1); err != nil {
		t.Fatal(err)
	}
	if c.Len(1) != n-1 {
		t.Fatalf("copy has %d positions, want %d", c.Len(1), n-1)
	}
	toks1 := append([]uint16(nil), toks[:n-1]...)
	toks1 = append(toks1, 900)
	if err := appendTokens(t, c, 1, 900); err != nil {
		t.Fatal(err)
	}
	checkWindow(t, c, 1, toks1, n-1)
	toks = append(toks, 901)
	if err := appendTokens(t, c, 0, 901); err != nil {
		t.Fatal(err)
	}
	checkWindow(t, c, 0, toks, n)
	// Out of rings: a third sequence reserving a whole ring waits for one.
	if err := c.Reserve(2, 40); !errors.Is(err, ErrFull) {
		t.Errorf("third ring of two: %v, want ErrFull", err)
	}
	if err := c.Truncate(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(2, 40); err != nil {
		t.Errorf("after truncating sequence 1 to 0 its ring is free again: %v", err)
	}
	c.Drop(0)
	c.Drop(1)
	c.Drop(2)
	if st := c.Stats(); st.RingBlocksUsed != 0 || st.BlocksUsed != 0 {
		t.Errorf("after dropping everything: %+v", st)
	}
}

func TestWindowConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"windows for other layers", Config{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 4, Window: []int{3}, MaxStep: 1, Rings: 1}},
		{"unlike windows", Config{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 4, Window: []int{3, 5}, MaxStep: 1, Rings: 1}},
		{"no step", Config{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 4, Window: []int{0, 5}, Rings: 1}},
		{"no rings", Config{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 4, Window: []int{0, 5}, MaxStep: 1}},
	} {
		if _, err := New(tc.cfg); err == nil {
			t.Errorf("%s: New(%+v) accepted", tc.name, tc.cfg)
		}
	}
}

// TestSharedKV checks MLA's one-row cache: half the bytes, and the V rows
// are the K rows.
func TestSharedKV(t *testing.T) {
	base := Config{Layers: 2, KVDim: 8, BlockSize: 4, Blocks: 8}
	shared := base
	shared.SharedKV = true
	a, b := mustNew(t, base), mustNew(t, shared)
	if 2*b.Bytes() != a.Bytes() {
		t.Errorf("shared cache %d bytes, separate %d: want half", b.Bytes(), a.Bytes())
	}
	if err := b.Reserve(0, 3); err != nil {
		t.Fatal(err)
	}
	k, _ := b.RowF16(1, 0, 2)
	for i := range k {
		k[i] = uint16(100 + i)
	}
	blk := b.Blocks(0)[0]
	if v := b.VF16(1, blk)[2*8:]; v[0] != 100 || v[7] != 107 {
		t.Errorf("V row reads %v, want the K row 100..107", v[:8])
	}
}
