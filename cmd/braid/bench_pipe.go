package main

import (
	"math/rand/v2"
	"time"

	"braid/internal/engine"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// overlapPipe is the backend's Pipeline when the decode test of np
// sequences should overlap steps (a layer split, several sequences, not
// turned off with --no-overlap), else nil.
func overlapPipe(be engine.Backend, np int, off bool) engine.Pipeline {
	p, ok := be.(engine.Pipeline)
	if !ok || off || np < 2 || p.Depth() < 2 {
		return nil
	}
	return p
}

// decodeOverlapped is the decode test on a Pipeline, as the scheduler runs
// it: the np sequences in min(Depth, np) groups (the cut of Forward's
// micro-batches), each group's next step launched as soon as its last one
// is collected, so that the stages work on different groups at once. Every
// sequence decodes n tokens from position depth; the tokens are random, as
// in the test that does not overlap.
func decodeOverlapped(p engine.Pipeline, np, n, depth int, rng *rand.Rand, vocab int, logits []float32) (time.Duration, error) {
	groups := min(p.Depth(), np)
	batches := make([]model.Batch, groups)
	next := make([]int, groups) // each group's next position
	launch := func(g int) error {
		b := &batches[g]
		b.Reset()
		for s := g * np / groups; s < (g+1)*np/groups; s++ {
			b.Add(int32(rng.IntN(vocab)), int32(next[g]), kvcache.SeqID(s), true)
		}
		next[g]++
		return p.Launch(b, engine.Output{TopK: 1}, false)
	}
	start := time.Now()
	for g := range groups {
		next[g] = depth
		if err := launch(g); err != nil {
			return 0, err
		}
	}
	// Groups are launched, and so collected, in turn.
	for g := 0; p.InFlight() > 0; g = (g + 1) % groups {
		if err := p.Collect(logits); err != nil {
			return 0, err
		}
		if next[g] < depth+n {
			if err := launch(g); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}
