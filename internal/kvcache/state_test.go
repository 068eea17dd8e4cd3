package kvcache

import (
	"errors"
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
