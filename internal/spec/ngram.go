// Package spec holds the drafters of speculative decoding (engine.Drafter):
// n-gram lookup in the sequence itself, a smaller draft model with the
// target's vocabulary, and the target's own MTP (NextN) head.
package spec

import (
	"braid/internal/engine"
	"braid/internal/kvcache"
)

// NGram drafts by lookup, without a model: it finds the latest earlier
// occurrence of the sequence's last N tokens (N from Max down to Min, the
// longest that occurs) and proposes the tokens that followed it, read on
// through its own drafts when the match runs into the end (so a repeating
// pattern continues). It pays off where the output repeats its input:
// code edits, extraction, "repeat the text", loops of a small model.
type NGram struct {
	Min, Max int // n-gram sizes; 0 means 2 and 4
}

var _ engine.Drafter = (*NGram)(nil)

// Hidden is 0: n-gram lookup reads tokens only.
func (g *NGram) Hidden() int { return 0 }

// End does nothing: nothing is kept per sequence.
func (g *NGram) End(kvcache.SeqID) {}

// Draft looks every request up.
func (g *NGram) Draft(reqs []engine.DraftRequest) error {
	lo, hi := g.Min, g.Max
	if lo <= 0 {
		lo = 2
	}
	if hi <= 0 {
		hi = 4
	}
	for i := range reqs {
		r := &reqs[i]
		r.Out, r.Sampled = Lookup(r.Out[:0], r.Toks, lo, hi, r.Max), false
	}
	return nil
}

// Lookup appends to dst up to k tokens continuing toks after the latest
// earlier occurrence of its longest suffix of hi..lo tokens, nothing when
// no such suffix occurs earlier.
func Lookup(dst, toks []int32, lo, hi, k int) []int32 {
	L, base := len(toks), len(dst)
	for n := min(hi, L-1); n >= lo; n-- {
		suf := toks[L-n:]
		// Latest j < L-n with toks[j:j+n] == suf.
		for j := L - n - 1; j >= 0; j-- {
			if toks[j] != suf[0] || !equal(toks[j:j+n], suf) {
				continue
			}
			for i := 0; i < k; i++ {
				src := j + n + i
				if src < L {
					dst = append(dst, toks[src])
				} else {
					dst = append(dst, dst[base+src-L])
				}
			}
			return dst
		}
	}
	return dst
}

func equal(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
