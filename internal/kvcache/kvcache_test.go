package kvcache

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustNew(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// val is the value written to every element of seq-independent token tok's
// row in layer (K) — V gets its complement — so copies can be traced.
func val(tok uint16, layer int) uint16 { return tok*7 + uint16(layer) }

// appendTokens reserves, writes and commits toks at the end of seq.
func appendTokens(t testing.TB, c *Cache, seq SeqID, toks ...uint16) error {
	t.Helper()
	n := c.Len(seq)
	if err := c.Reserve(seq, n+len(toks)); err != nil {
		return err
	}
	for i, tok := range toks {
		for l := range c.cfg.Layers {
			if c.cfg.F32 {
				k, v := c.RowF32(l, seq, n+i)
				for j := range k {
					k[j], v[j] = float32(val(tok, l)), -float32(val(tok, l))
				}
			} else {
				k, v := c.RowF16(l, seq, n+i)
				for j := range k {
					k[j], v[j] = val(tok, l), ^val(tok, l)
				}
			}
		}
	}
	if err := c.Commit(seq, n+len(toks)); err != nil {
		t.Fatal(err)
	}
	return nil
}

// contents reads seq back through the block table, checking every element of
// each row agrees, and returns one token per position.
func contents(t testing.TB, c *Cache, seq SeqID) []uint16 {
	t.Helper()
	bs, d := c.cfg.BlockSize, c.cfg.KVDim
	blocks := c.Blocks(seq)
	out := make([]uint16, c.Len(seq))
	for pos := range out {
		b := blocks[pos/bs]
		o := pos % bs * d
		for l := range c.cfg.Layers {
			var k0 uint16
			for j := range d {
				var k, v uint16
				if c.cfg.F32 {
					kf, vf := c.KF32(l, b)[o+j], c.VF32(l, b)[o+j]
					k, v = uint16(kf), ^uint16(-vf)
				} else {
					k, v = c.KF16(l, b)[o+j], c.VF16(l, b)[o+j]
				}
				if v != ^k || j > 0 && k != k0 {
					t.Fatalf("seq %d pos %d layer %d elem %d: k %d v %d (row start %d)", seq, pos, l, j, k, v, k0)
				}
				k0 = k
			}
			if tok := (k0 - uint16(l)) / 7; val(tok, l) != k0 {
				t.Fatalf("seq %d pos %d layer %d: value %d is no token's", seq, pos, l, k0)
			} else if l == 0 {
				out[pos] = tok
			} else if tok != out[pos] {
				t.Fatalf("seq %d pos %d: layer %d holds token %d, layer 0 token %d", seq, pos, l, tok, out[pos])
			}
		}
	}
	return out
}

// checkInvariants recomputes reference counts from the tables and checks the
// free list and Stats against them.
func checkInvariants(t testing.TB, c *Cache) {
	t.Helper()
	refs := make([]int32, c.cfg.Blocks)
	for seq, s := range c.seqs {
		if len(s.blocks) < c.blocksFor(s.n) {
			t.Fatalf("seq %d: %d positions in %d blocks", seq, s.n, len(s.blocks))
		}
		for _, b := range s.blocks {
			refs[b]++
		}
	}
	if !slices.Equal(refs, c.refs) {
		t.Fatalf("refcounts %v, recomputed %v", c.refs, refs)
	}
	seen := make([]bool, c.cfg.Blocks)
	for _, b := range c.free {
		if seen[b] || refs[b] != 0 {
			t.Fatalf("free list %v: block %d duplicated or in use (refs %d)", c.free, b, refs[b])
		}
		seen[b] = true
	}
	used := 0
	for _, r := range refs {
		if r > 0 {
			used++
		}
	}
	if used+len(c.free) != c.cfg.Blocks {
		t.Fatalf("%d used + %d free != %d blocks: leak", used, len(c.free), c.cfg.Blocks)
	}
	if st := c.Stats(); st.BlocksUsed != used || st.BlocksFree != len(c.free) || st.Sequences != len(c.seqs) {
		t.Fatalf("stats %+v, want used %d free %d seqs %d", st, used, len(c.free), len(c.seqs))
	}
}

func TestNew(t *testing.T) {
	cases := []struct {
		cfg   Config
		err   string
		bytes int64
	}{
		{Config{Layers: 2, KVDim: 8, BlockSize: 16, Blocks: 4}, "", 2 * 2 * 8 * 16 * 4 * 2},
		{Config{Layers: 2, KVDim: 8, BlockSize: 16, Blocks: 4, F32: true}, "", 2 * 2 * 8 * 16 * 4 * 4},
		{Config{Layers: 0, KVDim: 8, BlockSize: 16, Blocks: 4}, "Layers 0", 0},
		{Config{Layers: 1, KVDim: -1, BlockSize: 16, Blocks: 4}, "KVDim -1", 0},
		{Config{Layers: 1, KVDim: 8, BlockSize: 0, Blocks: 4}, "BlockSize 0", 0},
		{Config{Layers: 1, KVDim: 8, BlockSize: 16, Blocks: 0}, "Blocks 0", 0},
		{Config{Layers: 1 << 20, KVDim: 1 << 20, BlockSize: 1 << 20, Blocks: 1 << 20}, "overflows", 0},
	}
	for _, tc := range cases {
		c, err := New(tc.cfg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("New(%+v) error %v, want %q", tc.cfg, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Bytes() != tc.bytes || c.Stats().Bytes != tc.bytes {
			t.Errorf("New(%+v).Bytes() = %d, want %d", tc.cfg, c.Bytes(), tc.bytes)
		}
	}
}

func TestReserveLenDrop(t *testing.T) {
	for _, f32 := range []bool{false, true} {
		c := mustNew(t, Config{Layers: 3, KVDim: 4, BlockSize: 4, Blocks: 64, F32: f32})
		want := map[SeqID][]uint16{}
		r := rand.New(rand.NewPCG(1, 1))
		// Interleave appends across many sequences so their blocks interleave in the pool.
		for round := range 20 {
			for s := range SeqID(10) {
				seq := s*100 - 300 // any SeqID value works, negative included
				k := r.IntN(3)
				toks := make([]uint16, k)
				for i := range toks {
					toks[i] = uint16(round*10 + int(s))
				}
				if err := appendTokens(t, c, seq, toks...); err != nil {
					t.Fatal(err)
				}
				want[seq] = append(want[seq], toks...)
			}
		}
		checkInvariants(t, c)
		for seq, w := range want {
			if c.Len(seq) != len(w) || c.Cap(seq) != len(c.Blocks(seq))*4 || len(c.Blocks(seq)) != (len(w)+3)/4 {
				t.Fatalf("seq %d: Len %d Cap %d blocks %d, want Len %d", seq, c.Len(seq), c.Cap(seq), len(c.Blocks(seq)), len(w))
			}
			if got := contents(t, c, seq); !slices.Equal(got, w) {
				t.Fatalf("seq %d: %v, want %v", seq, got, w)
			}
		}
		for seq := range want {
			c.Drop(seq)
			checkInvariants(t, c)
		}
		if st := c.Stats(); st.BlocksFree != 64 || st.Sequences != 0 || c.Len(0) != 0 || c.Blocks(0) != nil {
			t.Fatalf("after dropping all: %+v", st)
		}
		c.Drop(12345) // unknown: no-op
	}
}

func TestReserveSemantics(t *testing.T) {
	c := mustNew(t, Config{Layers: 1, KVDim: 2, BlockSize: 4, Blocks: 8})
	steps := []struct {
		name         string
		op           func() error
		err          string
		len, cap, nb int
	}{
		{"create empty", func() error { return c.Reserve(1, 0) }, "", 0, 0, 0},
		{"reserve 5", func() error { return c.Reserve(1, 5) }, "", 0, 8, 2},
		{"commit 3", func() error { return c.Commit(1, 3) }, "", 3, 8, 2},
		{"commit past cap", func() error { return c.Commit(1, 9) }, "must be in [Len 3, Cap 8]", 3, 8, 2},
		{"commit backwards", func() error { return c.Commit(1, 2) }, "must be in [Len 3, Cap 8]", 3, 8, 2},
		{"reserve within cap", func() error { return c.Reserve(1, 8) }, "", 3, 8, 2},
		{"reserve below len", func() error { return c.Reserve(1, 1) }, "", 3, 8, 2},
		{"negative reserve", func() error { return c.Reserve(1, -1) }, "reserve -1", 3, 8, 2},
		{"truncate above len", func() error { return c.Truncate(1, 4) }, "must be in [0, Len 3]", 3, 8, 2},
		{"truncate drops reserved room", func() error { return c.Truncate(1, 3) }, "", 3, 4, 1},
		{"truncate to 0", func() error { return c.Truncate(1, 0) }, "", 0, 0, 0},
		{"unknown commit", func() error { return c.Commit(9, 0) }, "unknown sequence 9", 0, 0, 0},
		{"unknown truncate", func() error { return c.Truncate(9, 0) }, "unknown sequence 9", 0, 0, 0},
		{"unknown copy", func() error { return c.CopyPrefix(1, 9, 0) }, "unknown sequence 9", 0, 0, 0},
	}
	for _, s := range steps {
		err := s.op()
		if s.err == "" && err != nil || s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)) {
			t.Fatalf("%s: error %v, want %q", s.name, err, s.err)
		}
		if c.Len(1) != s.len || c.Cap(1) != s.cap || len(c.Blocks(1)) != s.nb {
			t.Fatalf("%s: Len %d Cap %d blocks %d, want %d %d %d", s.name, c.Len(1), c.Cap(1), len(c.Blocks(1)), s.len, s.cap, s.nb)
		}
		checkInvariants(t, c)
	}
	if !errors.Is(c.Commit(9, 0), ErrUnknownSeq) {
		t.Fatal("ErrUnknownSeq not wrapped")
	}
}

func TestExhaustion(t *testing.T) {
	c := mustNew(t, Config{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 5})
	if err := appendTokens(t, c, 1, 1, 2, 3, 4, 5, 6); err != nil { // 2 blocks
		t.Fatal(err)
	}
	if err := appendTokens(t, c, 2, 7, 8, 9, 10, 11); err != nil { // 2 blocks
		t.Fatal(err)
	}
	before := c.Stats()
	// 1 free block; 9 more positions for seq 1 need 2 (positions 6..14 -> blocks 1..3, block 1 held).
	err := c.Reserve(1, 15)
	if !errors.Is(err, ErrFull) {
		t.Fatalf("Reserve past the pool: %v", err)
	}
	for _, s := range []string{"sequence 1", "needs 2 blocks", "1 free of 5"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	// A new sequence that does not fit is not left behind half-made.
	if err := c.Reserve(3, 9); !errors.Is(err, ErrFull) || c.Has(3) {
		t.Fatalf("new sequence: %v, exists %v", err, c.Has(3))
	}
	if after := c.Stats(); after != before || c.Cap(1) != 8 {
		t.Fatalf("failed reserve changed state: %+v -> %+v, Cap %d", before, after, c.Cap(1))
	}
	checkInvariants(t, c)
	// The last block is still usable, and then the pool is exactly full.
	if err := c.Reserve(1, 12); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyPrefix(4, 2, 3); !errors.Is(err, ErrFull) || c.Has(4) {
		t.Fatalf("partial copy with no free block: %v", err)
	}
	if err := c.CopyPrefix(4, 2, 4); err != nil { // whole block: shared, no new block
		t.Fatal(err)
	}
	if got := contents(t, c, 4); !slices.Equal(got, []uint16{7, 8, 9, 10}) {
		t.Fatal(got)
	}
	// Copy-on-write also needs a block: writing into the shared block after a
	// truncate must fail cleanly when the pool is empty.
	if err := c.Truncate(4, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(4, 3); !errors.Is(err, ErrFull) {
		t.Fatalf("copy-on-write with no free block: %v", err)
	}
	checkInvariants(t, c)
	c.Drop(1)
	c.Drop(2)
	c.Drop(4)
	checkInvariants(t, c)
	if c.Stats().BlocksFree != 5 {
		t.Fatal("leak")
	}
}

func TestCopyPrefixSharing(t *testing.T) {
	for _, f32 := range []bool{false, true} {
		c := mustNew(t, Config{Layers: 2, KVDim: 3, BlockSize: 4, Blocks: 16, F32: f32})
		src := []uint16{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		if err := appendTokens(t, c, 1, src...); err != nil {
			t.Fatal(err)
		}
		sb := slices.Clone(c.Blocks(1)) // 3 blocks, the last partial
		if err := c.CopyPrefix(2, 1, 10); err != nil {
			t.Fatal(err)
		}
		db := c.Blocks(2)
		if db[0] != sb[0] || db[1] != sb[1] || db[2] == sb[2] {
			t.Fatalf("src blocks %v, dst blocks %v: want 2 shared, last copied", sb, db)
		}
		if c.Refs(sb[0]) != 2 || c.Refs(sb[1]) != 2 || c.Refs(sb[2]) != 1 || c.Refs(db[2]) != 1 {
			t.Fatalf("refs %d %d %d %d", c.Refs(sb[0]), c.Refs(sb[1]), c.Refs(sb[2]), c.Refs(db[2]))
		}
		if st := c.Stats(); st.BlocksShared != 2 || st.BlocksUsed != 4 || st.Positions != 20 {
			t.Fatalf("stats %+v", st)
		}
		// Both continue independently.
		if err := appendTokens(t, c, 1, 11, 12, 13); err != nil {
			t.Fatal(err)
		}
		if err := appendTokens(t, c, 2, 21, 22); err != nil {
			t.Fatal(err)
		}
		// dst rolls back into a shared block and rewrites it: copy-on-write.
		if err := c.Truncate(2, 5); err != nil {
			t.Fatal(err)
		}
		if err := appendTokens(t, c, 2, 31, 32, 33, 34); err != nil {
			t.Fatal(err)
		}
		if c.Blocks(2)[1] == sb[1] || c.Refs(sb[1]) != 1 || c.Blocks(2)[0] != sb[0] {
			t.Fatalf("no copy-on-write: src %v dst %v", sb, c.Blocks(2))
		}
		// src rolls back into the block still shared with dst and rewrites it.
		if err := c.Truncate(1, 2); err != nil {
			t.Fatal(err)
		}
		if err := appendTokens(t, c, 1, 41); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, c)
		if got := contents(t, c, 1); !slices.Equal(got, []uint16{1, 2, 41}) {
			t.Fatalf("src %v", got)
		}
		if got := contents(t, c, 2); !slices.Equal(got, []uint16{1, 2, 3, 4, 5, 31, 32, 33, 34}) {
			t.Fatalf("dst %v", got)
		}
		// Copy onto an existing sequence replaces it, including when dst's old
		// blocks are the very ones being shared.
		if err := c.CopyPrefix(2, 2, 4); err != nil { // dst == src: truncate
			t.Fatal(err)
		}
		if err := c.CopyPrefix(3, 2, 4); err != nil {
			t.Fatal(err)
		}
		if err := c.CopyPrefix(3, 2, 4); err != nil {
			t.Fatal(err)
		}
		if err := c.CopyPrefix(2, 1, 0); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, c)
		if got := contents(t, c, 3); !slices.Equal(got, []uint16{1, 2, 3, 4}) || c.Len(2) != 0 || !c.Has(2) {
			t.Fatalf("seq 3 %v, seq 2 len %d", got, c.Len(2))
		}
		for _, s := range []SeqID{1, 2, 3} {
			c.Drop(s)
		}
		checkInvariants(t, c)
		if c.Stats().BlocksFree != 16 {
			t.Fatal("leak")
		}
	}
}

func TestWriteGuards(t *testing.T) {
	c := mustNew(t, Config{Layers: 1, KVDim: 2, BlockSize: 4, Blocks: 8})
	if err := appendTokens(t, c, 1, 1, 2, 3, 4, 5); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyPrefix(2, 1, 4); err != nil {
		t.Fatal(err)
	}
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(r.(string), want) {
				t.Fatalf("%s: panic %v, want %q", name, r, want)
			}
		}()
		f()
	}
	mustPanic("shared block", "shared block", func() { c.RowF16(0, 1, 1) })
	mustPanic("past reserved room", "outside its reserved room", func() { c.RowF16(0, 2, 4) })
	mustPanic("unknown sequence", "outside its reserved room", func() { c.RowF16(0, 7, 0) })
	mustPanic("bad layer", "out of range", func() { c.KF16(1, 0) })
	mustPanic("bad block", "out of range", func() { c.VF16(0, 8) })
}

// TestRandomOps runs random operation sequences against a plain model (seq ->
// tokens) and checks contents, invariants, and that dropping everything frees
// every block.
func TestRandomOps(t *testing.T) {
	for _, cfg := range []Config{
		{Layers: 2, KVDim: 2, BlockSize: 4, Blocks: 24},
		{Layers: 1, KVDim: 3, BlockSize: 1, Blocks: 40},
		{Layers: 3, KVDim: 1, BlockSize: 7, Blocks: 12, F32: true},
	} {
		r := rand.New(rand.NewPCG(uint64(cfg.BlockSize), 9))
		c := mustNew(t, cfg)
		model := map[SeqID][]uint16{}
		tok := uint16(0)
		for step := range 3000 {
			seq := SeqID(r.IntN(6))
			switch op := r.IntN(10); {
			case op < 5: // append
				toks := make([]uint16, 1+r.IntN(2*cfg.BlockSize))
				for i := range toks {
					tok++
					toks[i] = tok % 9000
				}
				free := c.Stats().BlocksFree
				err := appendTokens(t, c, seq, toks...)
				if errors.Is(err, ErrFull) {
					if c.Stats().BlocksFree != free {
						t.Fatalf("step %d: failed append changed the pool", step)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				model[seq] = append(model[seq], toks...)
			case op < 7: // copy prefix
				src := SeqID(r.IntN(6))
				if !c.Has(src) {
					break
				}
				n := r.IntN(c.Len(src) + 1)
				err := c.CopyPrefix(seq, src, n)
				if errors.Is(err, ErrFull) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				model[seq] = slices.Clone(model[src][:n])
			case op < 9: // truncate
				if !c.Has(seq) {
					break
				}
				n := r.IntN(c.Len(seq) + 1)
				if err := c.Truncate(seq, n); err != nil {
					t.Fatal(err)
				}
				model[seq] = model[seq][:n]
			default:
				c.Drop(seq)
				delete(model, seq)
			}
			checkInvariants(t, c)
			for s, w := range model {
				if got := contents(t, c, s); !slices.Equal(got, w) {
					t.Fatalf("cfg %+v step %d: seq %d holds %v, want %v", cfg, step, s, got, w)
				}
			}
		}
		for s := range model {
			c.Drop(s)
		}
		checkInvariants(t, c)
		if st := c.Stats(); st.BlocksFree != cfg.Blocks || st.Sequences != 0 {
			t.Fatalf("after dropping everything: %+v", st)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	c := mustNew(t, Config{Layers: 2, KVDim: 8, BlockSize: 16, Blocks: 64})
	if err := appendTokens(t, c, 1, make([]uint16, 40)...); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(1, 48); err != nil {
		t.Fatal(err)
	}
	var sink int
	hot := map[string]func(){
		"RowF16": func() { k, v := c.RowF16(1, 1, 45); sink += len(k) + len(v) },
		"KF16":   func() { sink += len(c.KF16(1, 2)) + len(c.VF16(0, 1)) },
		"Blocks": func() { sink += len(c.Blocks(1)) + c.Len(1) + c.Cap(1) },
		// Within reserved room Reserve and Commit touch no memory.
		"Reserve+Commit": func() { _ = c.Reserve(1, 48); _ = c.Commit(1, 40) },
	}
	for name, f := range hot {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s allocates %v", name, a)
		}
	}
	// A sequence's table keeps its capacity across Truncate and regrowth.
	if a := testing.AllocsPerRun(100, func() {
		_ = c.Truncate(1, 0)
		_ = c.Reserve(1, 48)
	}); a != 0 {
		t.Errorf("Truncate/Reserve cycle allocates %v", a)
	}
	f32 := mustNew(t, Config{Layers: 1, KVDim: 4, BlockSize: 8, Blocks: 4, F32: true})
	if err := f32.Reserve(0, 8); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		k, v := f32.RowF32(0, 0, 3)
		sink += len(k) + len(v) + len(f32.KF32(0, 0)) + len(f32.VF32(0, 0))
	}); a != 0 {
		t.Errorf("F32 accessors allocate %v", a)
	}
}

func BenchmarkRowF16(b *testing.B) {
	c := mustNew(b, Config{Layers: 32, KVDim: 1024, BlockSize: 16, Blocks: 256})
	if err := c.Reserve(1, 4096); err != nil {
		b.Fatal(err)
	}
	var sink int
	for i := 0; b.Loop(); i++ {
		k, _ := c.RowF16(i&31, 1, i&4095)
		sink += len(k)
	}
}
