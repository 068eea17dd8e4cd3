package engine

import (
	"testing"

	"braid/internal/kvcache"
)

// TestSpecPlan: the batch planner drafts less as the batch grows (a step's
// tokens get dearer relative to its fixed cost), down to none when a
// draft's chance is below the rate the step already makes, and every
// plan's expected tokens per second is at least the plain step's.
func TestSpecPlan(t *testing.T) {
	const a, b = 10e-3, 0.5e-3 // a step of N tokens: 10 ms + 0.5 ms per token
	prev := 1 << 30
	for _, B := range []int{1, 4, 16, 64, 200} {
		s := &Scheduler{cfg: SchedulerConfig{Context: 4096}}
		s.spec = &schedSpec{cfg: Spec{NMin: 0, NMax: 8}, global: NewLengthControl(0, 8), seqs: map[kvcache.SeqID]*seqSpec{}}
		for _, n := range []int{1, 8, 32, 128, 256} {
			for range 3 {
				s.spec.cost.add(n, a+b*float64(n))
			}
		}
		for i := range B {
			q := &seq{id: kvcache.SeqID(i), st: &Stream{job: Job{MaxTokens: 1000}}, limit: 4096, toks: make([]int32, 10)}
			st := s.spec.seq(q.id)
			for j := range st.lc.acc {
				st.lc.acc[j], st.lc.seenAcc[j] = 0.8, true
			}
			s.spec.dec = append(s.spec.dec, q)
		}
		s.spec.plan(s)
		drafts := 0
		expTok := float64(B)
		for _, q := range s.spec.dec {
			k := s.spec.seqs[q.id].k
			drafts += k
			p := 1.0
			for range k {
				p *= 0.8
				expTok += p
			}
		}
		per := float64(drafts) / float64(B)
		rate, plain := expTok/(a+b*float64(B+drafts)), float64(B)/(a+b*float64(B))
		t.Logf("batch %d: %.2f drafts per sequence, %.0f tok/s expected, %.0f without drafts", B, per, rate, plain)
		if drafts > prev*B {
			t.Errorf("batch %d: %d drafts per sequence, more than the smaller batch's %d", B, drafts/B, prev)
		}
		if rate < plain*(1-1e-9) {
			t.Errorf("batch %d: the plan's %.0f tok/s is below the plain step's %.0f", B, rate, plain)
		}
		prev = (drafts + B - 1) / B
		if B == 1 && per < 5 {
			t.Errorf("one sequence, cheap drafts of 80%%: %.1f drafts", per)
		}
		if B == 200 && drafts != 0 {
			t.Errorf("200 sequences: %d drafts, want none (a step's tokens cost more than a draft's chance)", drafts)
		}
	}
}
