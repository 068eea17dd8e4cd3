package server

// /slots' view of the requests running: the scheduler admits waiting
// requests in arrival order into its --parallel sequences, and the server,
// which sees each request from its submission to its end, numbers them
// the same way: a request takes the lowest free slot number when one is
// free, else waits (in order) for the next one freed. Each slot shows its
// request's id, prompt tokens, tokens generated so far and speed.

import (
	"context"
	"sync"
	"time"

	"braid/internal/sample"
)

// slotBoard holds the slot numbers and who has them.
type slotBoard struct {
	mu      sync.Mutex
	slots   []*slotUse // by number; nil when idle
	waiting []*slotUse // submitted, no number yet, in order
}

// slotUse is one request (one choice of a fanned-out one) from its
// submission to its end.
type slotUse struct {
	board     *slotBoard
	prompt    int
	maxTokens int
	params    sample.Params
	submitted time.Time

	// under board.mu
	slot   int // -1 while waiting
	id     string
	choice int // -1 unless one choice of several
	gen    int
	first  time.Time // the first token's
	last   time.Time
	done   bool
}

// take registers a request on a board of n slots.
func (sb *slotBoard) take(n int, prompt, maxTokens int, params sample.Params) *slotUse {
	u := &slotUse{board: sb, prompt: prompt, maxTokens: maxTokens, params: params, submitted: time.Now(), slot: -1, choice: -1}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for len(sb.slots) < n {
		sb.slots = append(sb.slots, nil)
	}
	for i, s := range sb.slots {
		if s == nil {
			sb.slots[i], u.slot = u, i
			return u
		}
	}
	sb.waiting = append(sb.waiting, u)
	return u
}

// release ends u, giving its number to the oldest waiting request; a
// second call does nothing.
func (u *slotUse) release() {
	if u == nil {
		return
	}
	sb := u.board
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if u.done {
		return
	}
	u.done = true
	if u.slot < 0 {
		for i, w := range sb.waiting {
			if w == u {
				sb.waiting = append(sb.waiting[:i], sb.waiting[i+1:]...)
				break
			}
		}
		return
	}
	i := u.slot
	sb.slots[i] = nil
	if len(sb.waiting) > 0 {
		next := sb.waiting[0]
		sb.waiting = sb.waiting[1:]
		sb.slots[i], next.slot = next, i
	}
}

// name sets the request id (and choice index) /slots shows.
func (u *slotUse) name(ctx context.Context, id string) {
	if u == nil {
		return
	}
	u.board.mu.Lock()
	defer u.board.mu.Unlock()
	u.id = id
	if fi, ok := fannedOut(ctx); ok {
		u.id, u.choice = fi.id, fi.choice
	}
}

// token counts a generated token.
func (u *slotUse) token(at time.Time) {
	if u == nil {
		return
	}
	u.board.mu.Lock()
	defer u.board.mu.Unlock()
	u.gen++
	if u.gen == 1 {
		u.first = at
	}
	u.last = at
}

// slotState is what /slots shows of a busy slot.
type slotState struct {
	id          string
	choice      int
	prompt, gen int
	remain      int
	speed       float64 // generated tokens/s since the first one
	params      sample.Params
	age         time.Duration
}

// busy returns the state of each of n slots (nil: idle).
func (sb *slotBoard) busy(n int) []*slotState {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := make([]*slotState, n)
	now := time.Now()
	for i := 0; i < n && i < len(sb.slots); i++ {
		u := sb.slots[i]
		if u == nil {
			continue
		}
		st := &slotState{id: u.id, choice: u.choice, prompt: u.prompt, gen: u.gen, remain: u.maxTokens - u.gen, params: u.params, age: now.Sub(u.submitted)}
		// As llama-server's predicted_per_second: the tokens after the
		// first over the time since it.
		if d := u.last.Sub(u.first).Seconds(); u.gen > 1 && d > 0 {
			st.speed = float64(u.gen-1) / d
		}
		out[i] = st
	}
	return out
}
