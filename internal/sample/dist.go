package sample

import (
	"fmt"
	"math"
)

// Probs writes into dst (len == vocab) the distribution Sample draws from
// for this row: penalties, top_k, top_p, min_p and temperature applied,
// zero outside the survivors. At temperature 0 it is one-hot at the token
// Sample would return. Speculative decoding's rejection sampling compares
// it with a drafter's distribution. It allocates nothing once the sampler
// has sampled a full row; it panics if the lengths are not vocab.
func (s *Sampler) Probs(logits, dst []float32) {
	if len(logits) != s.vocab || len(dst) != s.vocab {
		panic(fmt.Sprintf("sample: %d logits and %d probabilities for a vocabulary of %d", len(logits), len(dst), s.vocab))
	}
	pen := s.pen[:0]
	if s.prepPenalties() {
		pen = s.pen
		for i := range pen {
			pen[i].logit = s.penalize(logits[pen[i].id], pen[i].count)
		}
	}
	clear(dst)
	if s.p.Temperature == 0 {
		dst[argmax(logits, pen)] = 1
		return
	}
	c := s.filter(s.prepare(logits, pen))
	mx := maxLogit(c)
	if math.IsInf(float64(mx), -1) {
		dst[c[0].id] = 1 // everything masked out: what draw picks
		return
	}
	var sum float64
	for i := range c {
		e := math.Exp(float64(c[i].logit - mx))
		c[i].logit = float32(e)
		sum += e
	}
	for _, x := range c {
		dst[x.id] = float32(float64(x.logit) / sum)
	}
}

// Uniform is the next draw in [0, 1) from the sampler's random stream (the
// stream Sample draws from, so a seed fixes both).
func (s *Sampler) Uniform() float64 { return s.rng.Float64() }

// DrawWeights picks an index with probability proportional to w (non-negative
// weights, not necessarily normalised), from the sampler's random stream. It
// returns -1 when every weight is zero.
func (s *Sampler) DrawWeights(w []float32) int32 {
	var sum float64
	for _, x := range w {
		sum += float64(x)
	}
	if !(sum > 0) {
		return -1
	}
	target := s.rng.Float64() * sum
	var run float64
	last := int32(-1)
	for i, x := range w {
		if x <= 0 {
			continue
		}
		last = int32(i)
		run += float64(x)
		if run > target {
			return int32(i)
		}
	}
	return last // rounding left target just above the running sum
}
