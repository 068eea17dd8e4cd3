package engine

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"braid/internal/model"
)

// healing is a Local backend that also answers Heal as the test says.
type healing struct {
	*Local
	err   atomic.Pointer[error]
	calls atomic.Int64
}

func (h *healing) Heal() error {
	h.calls.Add(1)
	if p := h.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestSchedulerHeals: an idle scheduler asks a Healer backend how it is:
// an unavailable answer makes the scheduler degraded with its reason, a
// good one clears it, as a step's outcome would.
func TestSchedulerHeals(t *testing.T) {
	m := loadStories(t)
	cache, err := m.NewCache(model.CacheSize{Positions: 64, Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	h := &healing{Local: NewLocal(m, cache)}
	down := fmt.Errorf("%w: rank 1 (w1:7000) left the cluster", ErrUnavailable)
	h.err.Store(&down)
	s, err := NewScheduler(h, SchedulerConfig{Parallel: 1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * HealInterval)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v (%d Heal calls, degraded %q)", what, 20*HealInterval, h.calls.Load(), s.Degraded())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("degraded after an unavailable Heal", func() bool { return strings.Contains(s.Degraded(), "rank 1 (w1:7000) left") })
	h.err.Store(nil)
	waitFor("healthy after a good Heal", func() bool { return s.Degraded() == "" })
}
