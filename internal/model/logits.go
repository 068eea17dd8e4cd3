package model

import "fmt"

// With a vocabulary-parallel output head each rank of the last stage holds
// the logits of its vocabulary slice [Shard.VocabLo, Shard.VocabHi). Greedy
// and top-k sampling need only each rank's best few: every rank sends
// TopK(k) of its slice (k*8 bytes per token instead of a whole row) and the
// coordinator merges them with MergeTopK. Full rows (logprobs, `braid
// logits`) are assembled with PutVocabSlice.

// Candidate is one vocabulary entry and its logit.
type Candidate struct {
	ID    int32
	Logit float32
}

// better orders candidates: larger logit first, lower id first among equal
// logits (the argmax over a whole row picks the lowest id on ties, so the
// merged winner is the same as on a single node).
func better(a, b Candidate) bool {
	return a.Logit > b.Logit || a.Logit == b.Logit && a.ID < b.ID
}

// TopK appends to dst[:0] the k best entries of row, the logits of a
// vocabulary slice starting at id lo, best first. It allocates nothing when
// dst has room for k.
func TopK(dst []Candidate, row []float32, lo int32, k int) []Candidate {
	dst = dst[:0]
	if k <= 0 {
		return dst
	}
	for i, v := range row {
		if v == v { // NaN never wins
			dst = insertTop(dst, k, Candidate{ID: lo + int32(i), Logit: v})
		}
	}
	return dst
}

// insertTop inserts c into dst, the at most k best so far in order.
func insertTop(dst []Candidate, k int, c Candidate) []Candidate {
	if len(dst) == k && !better(c, dst[k-1]) {
		return dst
	}
	if len(dst) < k {
		dst = append(dst, c)
	}
	j := len(dst) - 1
	for j > 0 && better(c, dst[j-1]) {
		dst[j] = dst[j-1]
		j--
	}
	dst[j] = c
	return dst
}

// MergeTopK appends to dst[:0] the k best of the candidates of all lists
// (each as TopK returns it), best first. The k best of a whole row are among
// the k best of its slices, so merging per-rank TopK lists gives the row's
// TopK exactly.
func MergeTopK(dst []Candidate, k int, lists ...[]Candidate) []Candidate {
	dst = dst[:0]
	if k <= 0 {
		return dst
	}
	for _, l := range lists {
		for _, c := range l {
			dst = insertTop(dst, k, c)
		}
	}
	return dst
}

// PutVocabSlice copies a rank's logits, rows of hi-lo values for vocabulary
// ids [lo, hi), into the rows of full, rows of vocab values each.
func PutVocabSlice(full []float32, vocab int, part []float32, lo, hi int) error {
	w := hi - lo
	if lo < 0 || hi > vocab || w <= 0 {
		if w == 0 && lo >= 0 && hi <= vocab {
			return nil
		}
		return fmt.Errorf("model: vocabulary slice [%d,%d) is not inside [0,%d)", lo, hi, vocab)
	}
	if len(part)%w != 0 || len(full) < len(part)/w*vocab {
		return fmt.Errorf("model: %d logits are not whole rows of %d, or do not fit %d rows of %d", len(part), w, len(full)/vocab, vocab)
	}
	for r := 0; r < len(part)/w; r++ {
		copy(full[r*vocab+lo:r*vocab+hi], part[r*w:(r+1)*w])
	}
	return nil
}
