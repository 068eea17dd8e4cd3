package kvcache

import (
	"errors"
	"slices"
	"testing"
)

// TestRecurrentState checks the per-sequence slots of recurrent layers:
// zeroed when taken, private to the sequence, copied with a whole prefix,
// resumable only at the sequence's length or 0, returned by Drop and
// Truncate to 0, and counted in the bytes.
func TestRecurrentState(t *testing.T) {
	cfg := Config{Layers: 3, KVDim: 4, BlockSize: 4, Blocks: 8, State: []int{6, 0, 2}, Slots: 2}
	c := mustNew(t, cfg)
	if want := int64(2*1*8*4*4*2) + 4*(6+2)*2; c.Bytes() != want {
		t.Errorf("Bytes %d, want %d (one paged layer, two layers of state in two slots)", c.Bytes(), want)
	}
	if err := c.Reserve(0, 3); err != nil {
		t.Fatal(err)
	}
	st := c.State(0, 0)
	if len(st) != 6 || len(c.State(2, 0)) != 2 {
		t.Fatalf("state sizes %d and %d, want 6 and 2", len(st), len(c.State(2, 0)))
	}
	for i := range st {
		st[i] = float32(i + 1)
	}
	if err := c.Commit(0, 3); err != nil {
		t.Fatal(err)
	}
	// A copy of the whole sequence carries the state; a shorter one cannot.
	if err := c.CopyPrefix(1, 0, 2); !errors.Is(err, ErrNotResumable) {
		t.Errorf("copy of 2 of 3 positions: %v, want ErrNotResumable", err)
	}
	if err := c.CopyPrefix(1, 0, 3); err != nil {
		t.Fatal(err)
	}
	if got := c.State(0, 1); got[5] != 6 {
		t.Errorf("copied state %v, want 1..6", got)
	}
	c.State(0, 1)[0] = 100
	if c.State(0, 0)[0] != 1 {
		t.Error("a copy's state is shared with its source")
	}
	if got := c.ResumePoint(0, 2); got != 0 {
		t.Errorf("ResumePoint(2) of a 3-position recurrent sequence = %d, want 0", got)
	}
	if err := c.Truncate(0, 1); !errors.Is(err, ErrNotResumable) {
		t.Errorf("truncate to 1: %v, want ErrNotResumable", err)
	}
	// Both slots are taken: a third sequence waits.
	if err := c.Reserve(2, 1); !errors.Is(err, ErrFull) {
		t.Errorf("third sequence with two slots: %v, want ErrFull", err)
	}
	if err := c.Truncate(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(2, 1); err != nil {
		t.Fatal(err)
	}
	for _, v := range c.State(0, 2) {
		if v != 0 {
			t.Fatalf("a new sequence's state %v is not zero", c.State(0, 2))
		}
	}
	c.Reset()
	if st := c.Stats(); st.SlotsUsed != 0 || st.Sequences != 0 {
		t.Errorf("after Reset: %+v", st)
	}
}

// TestSnapshots checks the kept states of a recurrent sequence: one at its
// length is a copy taken at once, one ahead is written through
// SnapshotState; the sequence resumes at a snapshot (Truncate swaps it in,
// CopyPrefix copies it, ResumePoint finds the longest), every snapshot
// takes a slot of the pool (ErrFull when none is left, changing nothing)
// and Forget, Truncate, Drop and Reset give them back.
func TestSnapshots(t *testing.T) {
	cfg := Config{Layers: 2, KVDim: 4, BlockSize: 4, Blocks: 16, State: []int{3, 0}, Slots: 4}
	c := mustNew(t, cfg)
	fill := func(seq SeqID, v float32) {
		for i := range c.State(0, seq) {
			c.State(0, seq)[i] = v
		}
	}
	step := func(seq SeqID, n int, v float32) {
		t.Helper()
		if err := c.Reserve(seq, n); err != nil {
			t.Fatal(err)
		}
		fill(seq, v)
		if err := c.Commit(seq, n); err != nil {
			t.Fatal(err)
		}
	}
	step(0, 5, 5)
	if err := c.Snapshot(0, 5); err != nil { // at the length: a copy now
		t.Fatal(err)
	}
	if err := c.Snapshot(0, 4); err == nil {
		t.Error("a snapshot at 4 of a 5-position sequence: accepted, its state is gone")
	}
	for _, n := range []int{7, 9} { // ahead: written by the step
		if err := c.Snapshot(0, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Snapshot(0, 9); err != nil {
		t.Errorf("asking again for a kept length: %v", err)
	}
	if err := c.Snapshot(1, 3); !errors.Is(err, ErrUnknownSeq) {
		t.Errorf("snapshot of an unknown sequence: %v", err)
	}
	if got := c.Snapshots(0); !slices.Equal(got, []int{5, 7, 9}) {
		t.Fatalf("snapshots %v, want [5 7 9]", got)
	}
	if st := c.Stats(); st.SlotsUsed != 4 || st.Snapshots != 3 {
		t.Errorf("slots used %d, snapshots %d: want 4 and 3", st.SlotsUsed, st.Snapshots)
	}
	if err := c.Snapshot(0, 8); !errors.Is(err, ErrFull) {
		t.Errorf("a fifth slot of four: %v, want ErrFull", err)
	}
	if got := c.Snapshots(0); len(got) != 3 {
		t.Errorf("a refused snapshot changed the list: %v", got)
	}
	if s := c.SnapshotState(1, 0, 7); s != nil {
		t.Error("a layer without state has a snapshot")
	}
	// A step over positions 5..9 writes the snapshots at 7 and 9 as it
	// passes them (the model's part), then the live state.
	if err := c.Reserve(0, 10); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{7, 9} {
		s := c.SnapshotState(0, 0, n)
		for i := range s {
			s[i] = float32(n)
		}
	}
	fill(0, 10)
	if err := c.Commit(0, 10); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]int{10: 10, 9: 9, 8: 7, 6: 5, 4: 0} {
		if got := c.ResumePoint(0, n); got != want {
			t.Errorf("ResumePoint(%d) = %d, want %d", n, got, want)
		}
	}
	if err := c.Truncate(0, 8); !errors.Is(err, ErrNotResumable) {
		t.Errorf("truncate to 8 (no snapshot): %v, want ErrNotResumable", err)
	}
	// Another sequence copies the prefix of 7 from its snapshot, the source unchanged.
	if err := c.CopyPrefix(1, 0, 7); !errors.Is(err, ErrFull) {
		t.Errorf("copy with every slot taken: %v, want ErrFull", err)
	}
	c.Forget(0, 9)
	if err := c.CopyPrefix(1, 0, 7); err != nil {
		t.Fatal(err)
	}
	if got := c.State(0, 1)[0]; got != 7 || c.Len(1) != 7 {
		t.Errorf("copy of 7 positions: state %g, length %d; want 7 and 7", got, c.Len(1))
	}
	if len(c.Snapshots(1)) != 0 || c.State(0, 0)[0] != 10 {
		t.Error("the copy took the source's snapshots, or changed its state")
	}
	// Truncate to a snapshot makes it the live state, in its slot, and
	// lets go of the old live state and the snapshots past it.
	used := c.Stats().SlotsUsed
	if err := c.Truncate(0, 7); err != nil {
		t.Fatal(err)
	}
	if got := c.State(0, 0)[0]; got != 7 || c.Len(0) != 7 {
		t.Errorf("after truncating to the snapshot at 7: state %g, length %d", got, c.Len(0))
	}
	if got := c.Snapshots(0); !slices.Equal(got, []int{5}) || c.Stats().SlotsUsed != used-1 {
		t.Errorf("after the truncation: snapshots %v, %d slots used (was %d)", got, c.Stats().SlotsUsed, used)
	}
	c.Drop(0)
	c.Drop(1)
	if st := c.Stats(); st.SlotsUsed != 0 || st.Snapshots != 0 {
		t.Errorf("after dropping both: %d slots, %d snapshots", st.SlotsUsed, st.Snapshots)
	}
	step(2, 3, 1)
	if err := c.Snapshot(2, 6); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	if st := c.Stats(); st.SlotsUsed != 0 || st.Snapshots != 0 {
		t.Errorf("after Reset: %d slots, %d snapshots", st.SlotsUsed, st.Snapshots)
	}
}

// TestSnapshotsWithoutState: a rank that holds none of a recurrent
// model's layers (Slots > 0, no state) keeps the same books, so it refuses
// and accepts what a rank with the layers does.
func TestSnapshotsWithoutState(t *testing.T) {
	with := mustNew(t, Config{Layers: 1, KVDim: 4, BlockSize: 4, Blocks: 16, State: []int{3}, Slots: 2})
	without := mustNew(t, Config{Layers: 1, KVDim: 4, BlockSize: 4, Blocks: 16, State: []int{0}, Slots: 2})
	if !without.Config().Recurrent() || without.Config().StateBytes() != 0 {
		t.Fatal("a stateless rank of a recurrent model: not recurrent, or holding state memory")
	}
	ops := []func(c *Cache) error{
		func(c *Cache) error { return c.Reserve(0, 6) },
		func(c *Cache) error { return c.Commit(0, 6) },
		func(c *Cache) error { return c.Snapshot(0, 8) },
		func(c *Cache) error { return c.Reserve(0, 10) },
		func(c *Cache) error { return c.Commit(0, 10) },
		func(c *Cache) error { return c.Truncate(0, 9) },  // no snapshot: refused
		func(c *Cache) error { return c.Snapshot(0, 12) }, // no slot left
		func(c *Cache) error { return c.Truncate(0, 8) },
		func(c *Cache) error { return c.CopyPrefix(1, 0, 5) },
	}
	for i, op := range ops {
		a, b := op(with), op(without)
		if (a == nil) != (b == nil) || a != nil && errors.Is(a, ErrFull) != errors.Is(b, ErrFull) {
			t.Errorf("operation %d: %v with the layers, %v without", i, a, b)
		}
	}
	if with.ResumePoint(0, 8) != without.ResumePoint(0, 8) || with.Len(0) != 8 || without.Len(0) != 8 {
		t.Errorf("the two ranks disagree on where sequence 0 stands")
	}
}
