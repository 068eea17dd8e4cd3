// Package sample picks the next token from a row of logits.
//
// The chain and its semantics follow llama.cpp's default sampler chain so that a
// request tuned against llama.cpp behaves the same here:
//
//	penalties -> top_k -> (typical: not implemented) -> top_p -> min_p -> temperature -> dist
//
// Temperature 0 short-circuits everything after the penalties into an argmax
// (the lowest token id wins ties, as llama.cpp's greedy sampler does).
//
// Notable consequences of that order, all deliberate:
//   - top_p and min_p look at probabilities at temperature 1 (the temperature is
//     applied after them), renormalised over what top_k left;
//   - top_p keeps the token that makes the cumulative probability reach p;
//   - min_p keeps tokens whose probability is at least min_p times the largest.
//
// The random stream is not llama.cpp's (mt19937); only the distribution matches.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Params configures a Sampler. The zero value is not valid (TopP must be in
// (0, 1]); start from DefaultParams.
type Params struct {
	// Temperature divides the logits before the final softmax; 0 means greedy.
	Temperature float32
	// TopK keeps the K most likely tokens; 0 disables it.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability mass
	// reaches TopP; 1 disables it. Must be in (0, 1].
	TopP float32
	// MinP drops tokens whose probability is below MinP times the largest one;
	// 0 disables it. Must be in [0, 1].
	MinP float32
	// RepeatPenalty divides positive logits and multiplies negative ones of
	// tokens seen in the window; 1 disables it. Must be > 0.
	RepeatPenalty float32
	// FrequencyPenalty is subtracted once per occurrence in the window (OpenAI
	// semantics; may be negative).
	FrequencyPenalty float32
	// PresencePenalty is subtracted once from every token present in the window
	// (OpenAI semantics; may be negative).
	PresencePenalty float32
	// RepeatLastN is the penalty window in accepted tokens: 0 disables the
	// penalties, -1 means the whole history.
	RepeatLastN int
	// Seed seeds the PRNG. Equal seeds and inputs give equal outputs; callers that
	// want fresh randomness must pick a random seed themselves.
	Seed uint64
}

// DefaultParams returns llama.cpp's defaults (temperature 0.8, top_k 40,
// top_p 0.95, min_p 0.05, penalties off with a 64-token window).
func DefaultParams() Params {
	return Params{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1,
		RepeatLastN:   64,
	}
}

// Validate reports the first invalid field, by its wire (snake_case) name, so a
// server can hand the message back to the client unchanged.
func (p Params) Validate() error {
	bad := func(name string, v any, want string) error {
		return fmt.Errorf("sample: invalid %s %v: %s", name, v, want)
	}
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return bad("temperature", p.Temperature, "must be >= 0")
	case p.TopK < 0:
		return bad("top_k", p.TopK, "must be >= 0 (0 disables)")
	case !(p.TopP > 0 && p.TopP <= 1):
		return bad("top_p", p.TopP, "must be in (0, 1]")
	case !(p.MinP >= 0 && p.MinP <= 1):
		return bad("min_p", p.MinP, "must be in [0, 1]")
	case !finite(p.RepeatPenalty) || p.RepeatPenalty <= 0:
		return bad("repeat_penalty", p.RepeatPenalty, "must be > 0 (1 disables)")
	case !finite(p.FrequencyPenalty):
		return bad("frequency_penalty", p.FrequencyPenalty, "must be finite")
	case !finite(p.PresencePenalty):
		return bad("presence_penalty", p.PresencePenalty, "must be finite")
	case p.RepeatLastN < -1:
		return bad("repeat_last_n", p.RepeatLastN, "must be >= -1 (-1: whole history, 0 disables)")
	}
	return nil
}

// penaltiesOn mirrors llama.cpp: a zero window or all-neutral values skip the
// whole penalty stage (and we then do not even record history).
func (p Params) penaltiesOn() bool {
	return p.RepeatLastN != 0 && (p.RepeatPenalty != 1 || p.FrequencyPenalty != 0 || p.PresencePenalty != 0)
}

// cand is one surviving candidate; logit is overwritten in place by each stage.
type cand struct {
	id    int32
	logit float32
}

// tokCount is one distinct token of the penalty window.
type tokCount struct {
	id    int32
	count int32
	logit float32 // penalised logit, filled per Sample
}

// Sampler samples tokens for one sequence. It keeps the penalty history and the
// PRNG state, so use one per sequence; it is not safe for concurrent use.
type Sampler struct {
	p     Params
	vocab int
	rng   *rand.Rand

	// cand is sized lazily: greedy never needs it, top_k needs only K entries.
	cand []cand

	// The penalty window: a ring of the last RepeatLastN accepted tokens, or
	// the whole history when RepeatLastN is -1.
	hist    []int32
	histPos int
	histLen int
	// win and pen are per-Sample scratch sized with the window.
	win []int32
	pen []tokCount
}

// New validates p and returns a Sampler for a vocabulary of vocab tokens.
func New(p Params, vocab int) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if vocab <= 0 {
		return nil, fmt.Errorf("sample: invalid vocab size %d: must be > 0", vocab)
	}
	s := &Sampler{
		p:     p,
		vocab: vocab,
		rng:   rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15)),
	}
	if p.penaltiesOn() && p.RepeatLastN > 0 {
		s.hist = make([]int32, p.RepeatLastN)
		s.win = make([]int32, 0, p.RepeatLastN)
		s.pen = make([]tokCount, 0, p.RepeatLastN)
	}
	return s, nil
}

// Params returns the parameters the sampler was built with.
func (s *Sampler) Params() Params { return s.p }

// Accept records a token in the penalty history: every generated token that is
// kept, and the prompt's tokens if the prompt should count (llama.cpp's server
// counts them). Sample does not call Accept itself, so that speculative
// decoding can sample drafts and record only what it keeps. Ids outside the
// vocabulary are ignored.
func (s *Sampler) Accept(id int32) {
	if !s.p.penaltiesOn() || id < 0 || int(id) >= s.vocab {
		return
	}
	if s.p.RepeatLastN < 0 {
		// Whole history: grow here so that Sample itself never allocates.
		s.hist = append(s.hist, id)
		s.histLen = len(s.hist)
		if cap(s.win) < len(s.hist) {
			s.win = make([]int32, 0, cap(s.hist))
			s.pen = make([]tokCount, 0, cap(s.hist))
		}
		return
	}
	s.hist[s.histPos] = id
	s.histPos++
	if s.histPos == len(s.hist) {
		s.histPos = 0
	}
	if s.histLen < len(s.hist) {
		s.histLen++
	}
}

// Reset forgets the history and reseeds the PRNG with Params.Seed, so the
// sampler behaves as if freshly created.
func (s *Sampler) Reset() {
	s.histPos, s.histLen = 0, 0
	if s.p.RepeatLastN < 0 {
		s.hist = s.hist[:0]
	}
	s.rng = rand.New(rand.NewPCG(s.p.Seed, s.p.Seed^0x9e3779b97f4a7c15))
}

// prepPenalties fills s.pen with the distinct window tokens sorted by id and
// their penalised logits (looked up by logitOf). It returns false when there is
// nothing to penalise.
func (s *Sampler) prepPenalties() bool {
	if !s.p.penaltiesOn() || s.histLen == 0 {
		s.pen = s.pen[:0]
		return false
	}
	w := append(s.win[:0], s.hist[:s.histLen]...)
	slices.Sort(w)
	pen := s.pen[:0]
	for i := 0; i < len(w); {
		j := i + 1
		for j < len(w) && w[j] == w[i] {
			j++
		}
		pen = append(pen, tokCount{id: w[i], count: int32(j - i)})
		i = j
	}
	s.win, s.pen = w, pen
	return true
}

// penalize applies llama.cpp's penalty formula to one logit seen count times.
func (s *Sampler) penalize(l float32, count int32) float32 {
	if l <= 0 {
		l *= s.p.RepeatPenalty
	} else {
		l /= s.p.RepeatPenalty
	}
	return l - float32(count)*s.p.FrequencyPenalty - s.p.PresencePenalty
}

// Sample picks a token from a full row of logits (len == vocab). The logits are
// not modified. It does not record the token; call Accept for that.
// It panics if len(logits) != vocab.
func (s *Sampler) Sample(logits []float32) int32 {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("sample: %d logits for a vocabulary of %d", len(logits), s.vocab))
	}
	pen := s.pen[:0]
	if s.prepPenalties() {
		pen = s.pen
		for i := range pen {
			pen[i].logit = s.penalize(logits[pen[i].id], pen[i].count)
		}
	}
	if s.p.Temperature == 0 {
		return argmax(logits, pen)
	}
	return s.draw(s.filter(s.prepare(logits, pen)))
}

// prepare builds the candidate list for a full row: the top_k survivors
// (sorted) or the whole vocabulary (in id order), penalties applied.
func (s *Sampler) prepare(logits []float32, pen []tokCount) (c []cand, sorted bool) {
	n := s.vocab
	if k := s.p.TopK; k > 0 && k < n {
		if cap(s.cand) < k {
			s.cand = make([]cand, k)
		}
		c = heapTopK(s.cand[:0], k, logits, pen)
		slices.SortFunc(c, cmpCand)
		return c, true
	}
	if cap(s.cand) < n {
		s.cand = make([]cand, n)
	}
	c = s.cand[:n]
	for i, l := range logits {
		if l != l {
			l = float32(math.Inf(-1))
		}
		c[i] = cand{int32(i), l}
	}
	for _, t := range pen {
		c[t.id].logit = t.logit
	}
	return c, false
}

// SampleCandidates samples from a partial candidate list: ids[i] has logit
// logits[i] (raw, before penalties); ids must be distinct. This is how the
// coordinator samples when each tensor-parallel rank returns only its local
// best candidates from its slice of the vocabulary. Penalties are applied here,
// by id.
//
// With P the number of distinct penalised tokens in a rank's slice, the result
// is exactly what Sample over the full row would return (same token for the
// same PRNG state) when
//   - greedy (Temperature 0): each rank sent its 1+P best raw logits;
//   - TopK > 0: each rank sent its TopK+P best raw logits, because the global
//     top K lies inside the union of the local top Ks, and top_p, min_p and
//     temperature act only on those K;
//
// and the penalties only lower logits (RepeatPenalty >= 1, FrequencyPenalty
// and PresencePenalty >= 0; otherwise a boosted token outside a rank's list is
// missed). Without penalties P is 0. With TopK == 0 and a non-zero temperature
// it is an approximation: the probability mass outside the union is dropped.
// It returns -1 for an empty list and panics if the lengths differ.
func (s *Sampler) SampleCandidates(ids []int32, logits []float32) int32 {
	if len(ids) != len(logits) {
		panic(fmt.Sprintf("sample: %d candidate ids but %d logits", len(ids), len(logits)))
	}
	n := len(ids)
	if n == 0 {
		return -1
	}
	if cap(s.cand) < n {
		s.cand = make([]cand, n)
	}
	c := s.cand[:n]
	for i, l := range logits {
		if l != l {
			l = float32(math.Inf(-1))
		}
		c[i] = cand{ids[i], l}
	}
	if s.prepPenalties() {
		for i := range c {
			if j, ok := slices.BinarySearchFunc(s.pen, c[i].id, func(t tokCount, id int32) int {
				return int(t.id) - int(id)
			}); ok {
				c[i].logit = s.penalize(c[i].logit, s.pen[j].count)
			}
		}
	}
	if s.p.Temperature == 0 {
		best := 0
		for i := 1; i < n; i++ {
			if cmpCand(c[i], c[best]) < 0 {
				best = i
			}
		}
		return c[best].id
	}
	sorted := false
	if k := s.p.TopK; k > 0 && k < n {
		selectTop(c, k)
		c = c[:k]
		slices.SortFunc(c, cmpCand)
		sorted = true
	}
	return s.draw(s.filter(c, sorted))
}

// filter runs top_p, min_p and temperature over c (non-empty).
func (s *Sampler) filter(c []cand, sorted bool) []cand {
	if p := s.p.TopP; p < 1 && len(c) > 1 {
		c, sorted = topP(c, sorted, float64(p))
	}
	if p := s.p.MinP; p > 0 && len(c) > 1 {
		c = minP(c, sorted, p)
	}
	t := s.p.Temperature
	for i := range c {
		c[i].logit /= t
	}
	return c
}

// draw samples from softmax(c). It overwrites the logits with unnormalised
// probabilities (last use). Like llama.cpp it scales a uniform draw by the sum
// instead of normalising first.
func (s *Sampler) draw(c []cand) int32 {
	if len(c) == 1 {
		return c[0].id
	}
	mx := maxLogit(c)
	if math.IsInf(float64(mx), -1) {
		return c[0].id // everything masked out: nothing better to do
	}
	var sum float64
	for i := range c {
		e := float32(math.Exp(float64(c[i].logit - mx)))
		c[i].logit = e
		sum += float64(e)
	}
	target := s.rng.Float64() * sum
	var run float64
	last := 0
	for i := range c {
		if c[i].logit == 0 {
			continue
		}
		last = i
		run += float64(c[i].logit)
		// Strictly greater: a zero draw must not pick a zero-probability token.
		if run > target {
			return c[i].id
		}
	}
	return c[last].id // rounding left target just above the running sum
}

// cmpCand orders candidates best first: higher logit, then lower id. The id
// tie-break makes every selection deterministic and matches llama.cpp's greedy.
func cmpCand(a, b cand) int {
	switch {
	case a.logit > b.logit:
		return -1
	case a.logit < b.logit:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

func maxLogit(c []cand) float32 {
	mx := c[0].logit
	for _, x := range c[1:] {
		if x.logit > mx {
			mx = x.logit
		}
	}
	return mx
}

// argmax scans the raw logits with the penalised ones substituted. pen is
// sorted by id, so the scan runs in plain segments between penalised ids and
// the hot loop stays a bare compare. NaN never wins (it compares false).
func argmax(logits []float32, pen []tokCount) int32 {
	best, bv := int32(0), float32(math.Inf(-1))
	if len(pen) == 0 || pen[0].id != 0 {
		if l := logits[0]; l == l {
			bv = l
		}
	}
	lo := 1
	for _, t := range pen {
		for i := lo; i < int(t.id); i++ {
			if logits[i] > bv {
				best, bv = int32(i), logits[i]
			}
		}
		if t.logit > bv {
			best, bv = t.id, t.logit
		}
		lo = int(t.id) + 1
	}
	for i := lo; i < len(logits); i++ {
		if logits[i] > bv {
			best, bv = int32(i), logits[i]
		}
	}
	return best
}

// heapTopK returns the k best candidates (unordered) of the raw logits with the
// penalised ones substituted, using a min-heap of size k (worst at the root).
// One pass with a single compare per token beats any sort of the vocabulary.
// Tokens come in increasing id order, so a newcomer that merely ties the root
// loses the id tie-break: a strict > suffices.
func heapTopK(h []cand, k int, logits []float32, pen []tokCount) []cand {
	n := len(logits)
	pi := 0
	id := 0
	// Fill phase: the first k tokens in id order, whatever their values.
	for ; len(h) < k; id++ {
		l := logits[id]
		if pi < len(pen) && int(pen[pi].id) == id {
			l = pen[pi].logit
			pi++
		}
		if l != l {
			l = float32(math.Inf(-1))
		}
		h = append(h, cand{int32(id), l})
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	root := h[0].logit
	for ; pi <= len(pen); pi++ {
		end := n
		if pi < len(pen) {
			end = int(pen[pi].id)
		}
		for ; id < end; id++ {
			if l := logits[id]; l > root {
				h[0] = cand{int32(id), l}
				siftDown(h, 0)
				root = h[0].logit
			}
		}
		if pi < len(pen) {
			if l := pen[pi].logit; l > root {
				h[0] = cand{int32(id), l}
				siftDown(h, 0)
				root = h[0].logit
			}
			id++
		}
	}
	return h
}

// siftDown restores the min-heap (by cmpCand: the worst candidate at the root)
// below i.
func siftDown(h []cand, i int) {
	n := len(h)
	for {
		w := i
		l, r := 2*i+1, 2*i+2
		if l < n && cmpCand(h[l], h[w]) > 0 {
			w = l
		}
		if r < n && cmpCand(h[r], h[w]) > 0 {
			w = r
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// selectTop rearranges c so that c[:k] holds its k best candidates (unordered)
// and c[k:] the rest: quickselect with a median-of-three pivot under the total
// order cmpCand, so equal logits cannot degrade it.
func selectTop(c []cand, k int) {
	lo, hi := 0, len(c)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// Median of three into c[hi] as the pivot.
		if cmpCand(c[mid], c[lo]) < 0 {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if cmpCand(c[hi], c[lo]) < 0 {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if cmpCand(c[mid], c[hi]) < 0 {
			c[mid], c[hi] = c[hi], c[mid]
		}
		pv := c[hi]
		p := lo
		for i := lo; i < hi; i++ {
			if cmpCand(c[i], pv) < 0 {
				c[i], c[p] = c[p], c[i]
				p++
			}
		}
		c[p], c[hi] = c[hi], c[p]
		switch {
		case p == k-1 || p == k:
			return
		case p < k:
			lo = p + 1
		default:
			hi = p - 1
		}
	}
}

// topP keeps the shortest best-first prefix whose probability (softmax of c at
// temperature 1) reaches p, including the token that crosses p. It reports
// whether the result is sorted.
func topP(c []cand, sorted bool, p float64) ([]cand, bool) {
	mx := maxLogit(c)
	if math.IsInf(float64(mx), -1) {
		return c[:1], sorted
	}
	if !sorted && len(c) > 1024 {
		return topPBuckets(c, mx, p), false
	}
	var sum float64
	for _, x := range c {
		sum += math.Exp(float64(x.logit - mx))
	}
	if !sorted {
		slices.SortFunc(c, cmpCand)
	}
	var cum float64
	for i, x := range c {
		cum += math.Exp(float64(x.logit-mx)) / sum
		if cum >= p {
			return c[:i+1], true
		}
	}
	return c, true
}

const (
	nBuckets    = 512
	bucketScale = 16 // buckets per nat below the max: the last one catches d >= 32
)

func bucketOf(l, mx float32) int {
	d := float64(mx-l) * bucketScale
	if !(d < nBuckets-1) {
		return nBuckets - 1
	}
	return int(d)
}

// topPBuckets is topP for a large unsorted list. Sorting a whole vocabulary
// (or even growing sorted chunks: the nucleus of a flat distribution holds
// thousands of tokens) costs milliseconds, yet the cut only depends on order
// within the one logit bucket where the cumulative mass crosses p. So: one
// pass for the mass per bucket, one to gather the buckets above the crossing
// one (kept whole, unsorted) followed by the crossing bucket, and a sort of
// that bucket alone. The kept set is the sorted walk's, up to float rounding
// of the cumulative sum.
func topPBuckets(c []cand, mx float32, p float64) []cand {
	var mass [nBuckets]float64
	var sum float64
	for _, x := range c {
		e := math.Exp(float64(x.logit - mx))
		mass[bucketOf(x.logit, mx)] += e
		sum += e
	}
	target := p * sum
	var above float64 // mass of buckets before the crossing one
	cross := nBuckets - 1
	for b := range nBuckets {
		if above+mass[b] >= target {
			cross = b
			break
		}
		above += mass[b]
	}
	front := 0
	for i, x := range c {
		if bucketOf(x.logit, mx) < cross {
			c[i], c[front] = c[front], x
			front++
		}
	}
	end := front
	for i := front; i < len(c); i++ {
		if x := c[i]; bucketOf(x.logit, mx) == cross {
			c[i], c[end] = c[end], x
			end++
		}
	}
	slices.SortFunc(c[front:end], cmpCand)
	cum := above / sum
	for i := front; i < end; i++ {
		cum += math.Exp(float64(c[i].logit-mx)) / sum
		if cum >= p {
			return c[:i+1]
		}
	}
	return c[:end]
}

// minP keeps the candidates whose logit is at least max + ln(p), i.e. whose
// probability is at least p times the largest. Unsorted input keeps its order.
func minP(c []cand, sorted bool, p float32) []cand {
	thr := float32(math.Log(float64(p)))
	if sorted {
		thr += c[0].logit
		i := 1
		for i < len(c) && c[i].logit >= thr {
			i++
		}
		return c[:i]
	}
	thr += maxLogit(c)
	j := 0
	for _, x := range c {
		if x.logit >= thr {
			c[j] = x
			j++
		}
	}
	return c[:j]
}

// Logprob is one entry of the OpenAI logprobs field.
type Logprob struct {
	ID      int32
	Logprob float32
}

// TopLogprobs returns the k most likely tokens of the raw logits (ties: lower
// id first) with their log-softmax values, best first, written into dst (which
// is reallocated only if its capacity is below k), and logZ, the log of the
// softmax normaliser, so that any other token's logprob is logits[id] - logZ
// (the sampled token's, typically). Penalties and temperature are not applied:
// OpenAI reports the model's own distribution.
func TopLogprobs(logits []float32, k int, dst []Logprob) (top []Logprob, logZ float32) {
	logZ = LogSumExp(logits)
	k = min(k, len(logits))
	if k <= 0 {
		return dst[:0], logZ
	}
	if cap(dst) < k {
		dst = make([]Logprob, 0, k)
	}
	top = dst[:0]
	// Sorted insertion: with k ~ 20 and a strict > against the current k-th,
	// insertions are rare and the scan is one compare per token.
	for i, l := range logits {
		if l != l {
			continue
		}
		if len(top) == k && !(l > top[k-1].Logprob) {
			continue
		}
		if len(top) < k {
			top = append(top, Logprob{})
		}
		j := len(top) - 1
		for j > 0 && l > top[j-1].Logprob {
			top[j] = top[j-1]
			j--
		}
		top[j] = Logprob{int32(i), l}
	}
	for i := range top {
		top[i].Logprob -= logZ
	}
	return top, logZ
}

// LogSumExp returns log(sum(exp(logits))), computed stably in float64; NaNs
// are skipped.
func LogSumExp(logits []float32) float32 {
	mx := float32(math.Inf(-1))
	for _, l := range logits {
		if l > mx {
			mx = l
		}
	}
	if math.IsInf(float64(mx), 0) {
		return mx
	}
	var sum float64
	for _, l := range logits {
		if l == l {
			sum += math.Exp(float64(l - mx))
		}
	}
	return mx + float32(math.Log(sum))
}

// MergeLogSumExp combines the LogSumExp of two disjoint slices of the
// vocabulary. Ranks that return only local top candidates can also return the
// LogSumExp of their slice; merging those gives the exact logZ for logprobs.
func MergeLogSumExp(a, b float32) float32 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(float64(a), -1) {
		return a
	}
	return a + float32(math.Log1p(math.Exp(float64(b-a))))
}
