package model

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopPositions: the indexer's selection is min(k, n) distinct
// positions in ascending order, and a true top-k: no position left out
// scores above one kept. Scores drawn from a few values make ties at the
// cut common (which of them are kept is llama.cpp's heap order, checked
// against its logits by the golden tests).
func TestTopPositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct{ n, k, levels int }{
		{1, 1, 0}, {5, 8, 0}, {9, 8, 0}, {100, 7, 3}, {3000, 2048, 0}, {3000, 2048, 5}, {8192, 2048, 40},
	} {
		scores := make([]float32, c.n)
		for i := range scores {
			if c.levels > 0 {
				scores[i] = float32(rng.IntN(c.levels))
			} else {
				scores[i] = float32(rng.NormFloat64())
			}
		}
		sel := make([]int32, c.k)
		got := sel[:topPositions(scores, sel)]
		if want := min(c.n, c.k); len(got) != want {
			t.Fatalf("n=%d k=%d: %d positions, want %d", c.n, c.k, len(got), want)
		}
		kept := make([]bool, c.n)
		minKept := float32(1e30)
		for i, p := range got {
			if i > 0 && p <= got[i-1] {
				t.Fatalf("n=%d k=%d: positions %d, %d at %d not strictly ascending", c.n, c.k, got[i-1], p, i)
			}
			kept[p] = true
			minKept = min(minKept, scores[p])
		}
		for p, s := range scores {
			if !kept[p] && s > minKept {
				t.Fatalf("n=%d k=%d: position %d (score %g) left out, a kept one scores %g", c.n, c.k, p, s, minKept)
			}
		}
		if c.levels == 0 {
			// Distinct scores: exactly the k best.
			order := make([]int32, c.n)
			for i := range order {
				order[i] = int32(i)
			}
			slices.SortFunc(order, func(a, b int32) int {
				switch {
				case scores[a] > scores[b]:
					return -1
				case scores[a] < scores[b]:
					return 1
				}
				return 0
			})
			want := order[:min(c.n, c.k)]
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d k=%d: selected %v, want %v", c.n, c.k, got[:min(8, len(got))], want[:min(8, len(want))])
			}
		}
	}
}
