package engine

import (
	"fmt"
	"math"
	"strings"
	"time"

	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/sample"
)

// Speculative decoding: a drafter proposes the next few tokens of a
// sequence, the target model evaluates the token it would have evaluated
// anyway plus those drafts in one step, and keeps the longest prefix of the
// drafts it agrees with plus one token of its own. The target's KV cache is
// then truncated past the first rejected draft. Decode is bound by reading
// the weights, so a step of 1+k tokens costs little more than a step of
// one: every accepted draft is a token for (almost) free.
//
// The output is the target's: at temperature 0 token for token what it
// generates without speculation; at a temperature > 0, with drafts sampled
// from a drafter's distribution, the rejection sampling of Leviathan et al.
// (2023) keeps the output distribution exactly the target's; with
// deterministic drafts (n-gram lookup) the target's own sample is compared
// with the draft, which is the same test and keeps a seeded run identical
// to the same run without speculation.

// Drafter proposes draft tokens. Implementations live in package spec:
// n-gram lookup, a smaller draft model, the target's own MTP head.
type Drafter interface {
	// Draft proposes, for every request, up to Max tokens that continue
	// its Toks, appending them to Out[:0]. One call carries every
	// sequence of a step, so that a model drafter runs them as one batch.
	// A drafter keeps what it needs per sequence between calls (its own
	// KV cache) and syncs it with Toks: a sequence's Toks only grow by
	// accepted tokens between calls, past which its earlier drafts are
	// void.
	Draft(reqs []DraftRequest) error
	// End forgets a sequence.
	End(seq kvcache.SeqID)
	// Hidden is the width of the target's hidden states the drafter reads
	// (an MTP head: the model's Embd), or 0 for none. A drafter with
	// Hidden > 0 implements HiddenDrafter.
	Hidden() int
}

// HiddenDrafter is a Drafter that reads the target's final-normed hidden
// states (the input of an MTP head).
type HiddenDrafter interface {
	Drafter
	// Observe hands over the target's hidden states of seq's positions
	// [pos, pos+len(hidden)/Hidden()): every prompt position during the
	// prefill (in chunks), then after each verification the positions it
	// accepted. toks is every token of the sequence known by then (the
	// prompt; after a verification, with the tokens it produced).
	Observe(seq kvcache.SeqID, toks []int32, pos int, hidden []float32) error
	// PrefillChunk is the tokens per step of a prompt whose every position
	// is an output: the backend's own step (MaxBatch), so that the prompt
	// is evaluated in the steps a plain prefill takes.
	PrefillChunk() int
}

// DraftRequest is one sequence's part of a Draft call.
type DraftRequest struct {
	Seq kvcache.SeqID
	// Toks is every token of the sequence so far: the prompt, then the
	// generated tokens; the target has evaluated all but the last, which
	// it evaluates next, together with the drafts.
	Toks []int32
	// Max is the most drafts wanted (at least 1).
	Max int
	// Sampler, when set (temperature > 0), asks a drafter that can for
	// drafts sampled from its own distribution (drawing with this
	// sampler's random stream; its parameters shape the distribution):
	// the drafter then writes draft i's distribution into row i of Probs
	// (Max rows of the vocabulary) and sets Sampled. A drafter whose
	// drafts are deterministic leaves Sampled false.
	Sampler *sample.Sampler
	Probs   []float32
	// Out receives the drafts (appended to Out[:0]; capacity Max).
	Out     []int32
	Sampled bool
}

// HiddenBackend is a Backend that can also return the final-normed hidden
// states of its output tokens (what an MTP head reads): a model on this
// node, or a cluster whose coordinator holds the head (cluster.Cluster
// with Config.MTP).
type HiddenBackend interface {
	Backend
	ForwardHidden(b *model.Batch, out Output, logits, hidden []float32) error
	// Head is the output head over hidden states, each row as a step that
	// outputs that token alone computes it.
	Head(hidden, logits []float32) error
}

// ForwardHidden is Forward that also writes each output token's
// final-normed hidden state (Cfg.Embd values) into hidden.
func (l *Local) ForwardHidden(b *model.Batch, _ Output, logits, hidden []float32) error {
	return l.M.ForwardHidden(l.Cache, b, logits, hidden)
}

// Head is the model's output head over final-normed hidden states.
func (l *Local) Head(hidden, logits []float32) error { return l.M.Head(hidden, logits) }

// MaxDrafts bounds --spec-n-max.
const MaxDrafts = 32

// Spec configures speculative decoding.
type Spec struct {
	Drafter Drafter
	// NMax is the most drafts per step (1..MaxDrafts); NMin the fewest
	// (0..NMax). With NMin < NMax the length adapts to the acceptance seen
	// and the measured cost of a step (see LengthControl); NMin == NMax
	// drafts that many every step.
	NMax, NMin int
	// SynthRates, for benchmarks only, replaces the verdict of the target:
	// draft position i (from 0) is accepted with probability SynthRates[i]
	// (positions past the list: never), whatever the target says, so the
	// speed of a drafter with that acceptance can be measured on any
	// model. The output is then NOT the model's.
	SynthRates []float64
	SynthSeed  uint64
	// Stats, when set, accumulates the counts.
	Stats *SpecStats
	// Exact, when set, is called with the tokens of a verification step
	// before it runs and with 0 after: kernels.Pool.SetExactColumns of the
	// target's pools (every rank's: a cluster's SetExactColumns carries it
	// to the workers in the step's frame), so that the step computes each
	// token bit for bit as a one-token step does. The kernels' fastest
	// multi-column tiles differ from the one-column dot in the order of
	// float operations; without this a greedy near tie can go the other
	// way than without speculation.
	Exact func(tokens int)
}

// Validate checks the configuration against a backend.
func (s *Spec) Validate(b Backend) error {
	if s.Drafter == nil {
		return fmt.Errorf("speculative decoding without a drafter")
	}
	if s.NMax < 1 || s.NMax > MaxDrafts {
		return fmt.Errorf("--spec-n-max %d: must be in [1, %d]", s.NMax, MaxDrafts)
	}
	if s.NMin < 0 || s.NMin > s.NMax {
		return fmt.Errorf("--spec-n-min %d: must be in [0, --spec-n-max %d]", s.NMin, s.NMax)
	}
	for i, r := range s.SynthRates {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("--spec-synth-rates: rate %d (%v) is not a probability in [0, 1]", i+1, r)
		}
	}
	if s.Drafter.Hidden() > 0 {
		if _, ok := s.Drafter.(HiddenDrafter); !ok {
			return fmt.Errorf("speculative decoding: the drafter reads hidden states but cannot be given them")
		}
		if _, ok := b.(HiddenBackend); !ok {
			return fmt.Errorf("speculative decoding: this drafter reads the model's hidden states, which this backend does not return")
		}
	}
	return CheckRollback(b.KVConfig(), s.NMax)
}

// CheckTruncate refuses a cache with recurrent-state layers (DeltaNet)
// where a sequence must be truncated to any length (a draft model's own
// cache): their one state per sequence holds the last position only. A
// target copes with snapshots: before each verification it keeps the
// state after the pending token and after each draft but the last, and a
// rejection makes the one it stops at the live state (kvcache.Snapshot).
func CheckTruncate(cfg kvcache.Config) error {
	if cfg.StateLayers() > 0 {
		return fmt.Errorf("its %d recurrent (DeltaNet) layers keep one state per sequence that cannot be rolled back past a rejected draft", cfg.StateLayers())
	}
	return nil
}

// CheckRollback says whether a cache can drop rejected drafts: a
// sliding-window ring holds the window plus the largest step, enough to
// resume after a step of at most MaxStep positions. (Recurrent state is
// rolled back to snapshots instead, see CheckTruncate.)
func CheckRollback(cfg kvcache.Config, nmax int) error {
	if cfg.WindowLayers() > 0 && cfg.MaxStep > 0 && nmax+1 > cfg.MaxStep {
		return fmt.Errorf("speculative decoding: a step of %d tokens exceeds the %d the sliding-window rings hold beyond their window (-b)", nmax+1, cfg.MaxStep)
	}
	return nil
}

// SpecStats are speculative decoding's counts.
type SpecStats struct {
	Steps    int64   // verification steps (with at least one draft)
	Plain    int64   // steps without drafts
	Drafted  []int64 // drafts proposed at each position (0 = first draft)
	Accepted []int64 // drafts accepted at each position
	Emitted  int64   // tokens produced by verification steps
}

// DraftedTotal is every draft proposed.
func (s *SpecStats) DraftedTotal() int64 { return sum64(s.Drafted) }

// AcceptedTotal is every draft accepted.
func (s *SpecStats) AcceptedTotal() int64 { return sum64(s.Accepted) }

// Acceptance is accepted over drafted at each position (the share of
// steps that reached and kept that draft).
func (s *SpecStats) Acceptance() []float64 {
	out := make([]float64, len(s.Drafted))
	for i, d := range s.Drafted {
		if d > 0 {
			out[i] = float64(s.Accepted[i]) / float64(d)
		}
	}
	return out
}

// MeanAccepted is the mean number of drafts accepted per verification step.
func (s *SpecStats) MeanAccepted() float64 {
	if s.Steps == 0 {
		return 0
	}
	return float64(s.AcceptedTotal()) / float64(s.Steps)
}

// Add adds o's counts.
func (s *SpecStats) Add(o *SpecStats) {
	s.Steps += o.Steps
	s.Plain += o.Plain
	s.Emitted += o.Emitted
	for i := range o.Drafted {
		s.count(i, o.Drafted[i], o.Accepted[i])
	}
}

func (s *SpecStats) count(pos int, drafted, accepted int64) {
	for len(s.Drafted) <= pos {
		s.Drafted = append(s.Drafted, 0)
		s.Accepted = append(s.Accepted, 0)
	}
	s.Drafted[pos] += drafted
	s.Accepted[pos] += accepted
}

// record counts one step of drafted drafts of which accepted were kept.
func (s *SpecStats) record(drafted, accepted, emitted int) {
	if drafted == 0 {
		s.Plain++
		return
	}
	s.Steps++
	s.Emitted += int64(emitted)
	for i := range drafted {
		a := int64(0)
		if i < accepted {
			a = 1
		}
		s.count(i, 1, a)
	}
}

// String is a one-line summary: drafted, accepted, acceptance per position.
func (s *SpecStats) String() string {
	var b strings.Builder
	d, a := s.DraftedTotal(), s.AcceptedTotal()
	rate := 0.0
	if d > 0 {
		rate = float64(a) / float64(d)
	}
	fmt.Fprintf(&b, "drafted %d, accepted %d (%.1f%%), %.2f accepted per step of %d", d, a, 100*rate, s.MeanAccepted(), s.Steps)
	if len(s.Drafted) > 0 {
		b.WriteString("; by position")
		for i, r := range s.Acceptance() {
			fmt.Fprintf(&b, " %d:%.0f%%", i+1, 100*r)
		}
	}
	return b.String()
}

func sum64(xs []int64) int64 {
	var t int64
	for _, x := range xs {
		t += x
	}
	return t
}

// LengthControl picks a sequence's draft length each step, between NMin
// and NMax, to maximise expected tokens per second: from the acceptance
// of each draft position seen so far (conditional on reaching it, a
// moving average) the expected tokens of a step with k drafts is
// E(k) = 1 + sum_{i<=k} prod_{j<=i} a_j; the time of such a step is
// measured (a moving average per k; a length not measured yet takes the
// line fitted over the k seen, a prior of 10% of a plain step per draft
// before that), and the k with the largest E(k)/T(k) wins. A measured
// length is compared by its own time, not the line's: a step with drafts
// pays costs a step without has not (the drafter's call, exact
// verification), which a line through k = 0 would spread over the
// drafts. When the best is 0 it still drafts one token now and then, so
// that a drafter that starts to agree is noticed; when it is not, a step
// without drafts comes now and then, so that T(0) stays measured (both
// after probeFirst steps, then twice as many each time the choice stays,
// up to probeMax).
type LengthControl struct {
	nmin, nmax int
	acc        []float64 // conditional acceptance of draft position j (from 0)
	nAcc       []int     // observations behind acc[j] (0: none, the prior stands)
	t          []float64 // moving average of a step's seconds with k drafts
	seenT      []bool
	zeros      int // steps without drafts since the last with
	zeroProbe  int // zeros that make the next one-draft step (0: probeFirst)
	drafting   int // steps with drafts since the last without
	plainProbe int // drafting steps that make the next step without (0: probeFirst)
	// Scale multiplies the per-draft cost (a batch of many sequences makes
	// drafts dearer); 0 means 1.
	Scale float64
}

const (
	accPrior  = 0.5
	costPrior = 0.1
	emaWeight = 0.1
)

// NewLengthControl makes a controller for lengths in [nmin, nmax].
func NewLengthControl(nmin, nmax int) *LengthControl {
	return &LengthControl{nmin: nmin, nmax: nmax, acc: make([]float64, nmax), nAcc: make([]int, nmax),
		t: make([]float64, nmax+1), seenT: make([]bool, nmax+1)}
}

// accept is the estimated conditional acceptance of position j.
func (c *LengthControl) accept(j int) float64 {
	for ; j >= 0; j-- {
		if c.nAcc[j] > 0 {
			return c.acc[j]
		}
	}
	return accPrior
}

// cost returns the time model: a step with k drafts takes t0*(1+slope*k).
func (c *LengthControl) cost() (t0, slope float64) {
	// Least squares over the measured points.
	var n, sk, st, skk, skt float64
	for k, ok := range c.seenT {
		if ok {
			x, y := float64(k), c.t[k]
			n++
			sk += x
			st += y
			skk += x * x
			skt += x * y
		}
	}
	switch {
	case n == 0:
		t0, slope = 1, costPrior
	case n == 1:
		k := sk
		t0 = st / (1 + costPrior*k)
		slope = costPrior
	default:
		b := (n*skt - sk*st) / (n*skk - sk*sk)
		a := (st - b*sk) / n
		if a <= 0 || b < 0 {
			// Noise: fall back to the mean step and the prior slope.
			t0, slope = st/n/(1+costPrior*sk/n), costPrior
		} else {
			t0, slope = a, b/a
		}
	}
	if c.Scale > 0 {
		slope *= c.Scale
	}
	return t0, slope
}

// Next is the draft length for the next step.
func (c *LengthControl) Next() int {
	if c.nmin == c.nmax {
		return c.nmax
	}
	t0, slope := c.cost()
	best, bestV := c.nmin, -1.0
	e, run := 1.0, 1.0
	for k := 0; k <= c.nmax; k++ {
		if k > 0 {
			run *= c.accept(k - 1)
			e += run
		}
		if k < c.nmin {
			continue
		}
		t := t0 * (1 + slope*float64(k))
		if c.seenT[k] && c.Scale <= 0 {
			t = c.t[k]
		}
		if v := e / t; v > bestV*(1+1e-9) {
			best, bestV = k, v
		}
	}
	if best == 0 {
		c.plainProbe, c.drafting = probeFirst, 0
		if c.zeroProbe == 0 {
			c.zeroProbe = probeFirst
		}
		if c.zeros++; c.zeros >= c.zeroProbe {
			c.zeros, c.zeroProbe = 0, min(2*c.zeroProbe, probeMax)
			return 1
		}
	} else if c.nmin == 0 {
		c.zeros, c.zeroProbe = 0, probeFirst
		if c.plainProbe == 0 {
			c.plainProbe = probeFirst
		}
		if c.drafting++; c.drafting >= c.plainProbe {
			c.drafting, c.plainProbe = 0, min(2*c.plainProbe, probeMax)
			return 0
		}
	}
	return best
}

// Update records a step: drafted drafts, accepted of them kept, in d.
func (c *LengthControl) Update(drafted, accepted int, d time.Duration) {
	for j := 0; j < drafted && j <= accepted; j++ {
		x := 0.0
		if j < accepted {
			x = 1
		}
		// The mean of the prior and the observations until there are
		// enough of them, then a moving average: a position reached
		// rarely (the plan keeps short of it) must not keep the verdict
		// of its first one or two drafts for long.
		if c.nAcc[j] == 0 {
			c.acc[j] = accPrior
		}
		c.nAcc[j]++
		c.acc[j] += max(emaWeight, 1/float64(c.nAcc[j]+1)) * (x - c.acc[j])
	}
	if d > 0 && drafted <= c.nmax {
		s := d.Seconds()
		if !c.seenT[drafted] {
			c.t[drafted], c.seenT[drafted] = s, true
		} else {
			c.t[drafted] += emaWeight * (s - c.t[drafted])
		}
	}
}

// Acceptance is the controller's current estimate of each position's
// conditional acceptance (for reports and tests).
func (c *LengthControl) Acceptance() []float64 {
	out := make([]float64, c.nmax)
	for j := range out {
		out[j] = c.accept(j)
	}
	return out
}

// inherit starts c's acceptance from from's, each position's weight
// capped at n observations so that c soon follows its own drafts.
func (c *LengthControl) inherit(from *LengthControl, n int) {
	copy(c.acc, from.acc)
	for j := range c.nAcc {
		c.nAcc[j] = min(from.nAcc[j], n)
	}
}

// synthCond turns per-position acceptance rates (the share of steps whose
// draft i is accepted) into the conditional probability of accepting
// draft i once drafts 0..i-1 were.
func synthCond(rates []float64, dst []float64) []float64 {
	dst = dst[:0]
	prev := 1.0
	for _, r := range rates {
		c := 0.0
		if prev > 0 {
			c = math.Min(1, r/prev)
		}
		dst = append(dst, c)
		prev = r
	}
	return dst
}
