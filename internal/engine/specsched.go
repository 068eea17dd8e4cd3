package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/kvcache"
	"braid/internal/sample"
)

// Speculative decoding inside continuous batching: every decoding sequence
// of a step gets its own drafts (one Draft call for all of them), the step
// verifies them all together with the prompt chunks, and each sequence
// keeps what its target rows accept. How many drafts each gets is planned
// per step for the whole batch (schedSpec.plan) from measured costs: a
// step without drafts, one with drafts (verified in the configured
// exactness mode) and the drafter's Draft call are three different lines
// (specCost), and draft j of a sequence is worth the probability that it
// is reached and accepted. Drafts are taken best first and the plan is the
// number of them whose expected tokens per second, drafter included, is
// highest, zero drafts being one of the choices: a large batch makes a
// step's tokens dear (decode turns compute-bound) and a slow drafter makes
// every draft step dear, and the drafts go away by themselves. While none
// are planned a sequence still drafts one token now and then (at growing
// intervals) so that the acceptance and the costs stay measured.

// schedSpec is the scheduler's speculative decoding.
type schedSpec struct {
	cfg    Spec
	v      *specState // the verifier's buffers (its drafts and qprobs point at a sequence's)
	global *LengthControl
	seqs   map[kvcache.SeqID]*seqSpec
	spare  []*seqSpec
	dec    []*seq
	reqs   []DraftRequest
	owner  []*seqSpec
	cands  []draftCand
	qprobs []float32 // [Parallel x NMax x vocab], per decoding slot
	cost   specCost
	// Steps planned with drafts since the last without (sincePlain), and
	// how many make the next plain probe (plainProbe, 0: probeFirst).
	sincePlain, plainProbe int
	// Steps planned without any draft in a row (zeros), and how many make
	// the next probe of one draft for every sequence (probe, 0: probeFirst).
	zeros, probe int
	// Steps planned with drafts since the last one draft deeper than the
	// plan (sinceDeep), and how many make the next (deepProbe, 0:
	// probeFirst).
	sinceDeep, deepProbe int
	// probing: this step is a probe of the zero regime; stepTok counts the
	// tokens the step's verifications make.
	probing bool
	stepTok int
	probeN  int // zero-regime probes so far

	// A drafter of hidden states (mtp): every prompt token is an output,
	// and the states of the prompt chunks and of the kept tokens go to it.
	hb     HiddenBackend
	hd     HiddenDrafter
	width  int
	hidden []float32 // [rows x width]
	chunks []promptChunk

	// published for Counters
	mu    sync.Mutex
	stats SpecStats
	steps atomic.Int64
}

type seqSpec struct {
	lc      *LengthControl // this sequence's acceptance
	drafts  []int32
	k       int
	zeros   int // steps with drafts planned for others but not this one, in a row
	sampler *sample.Sampler
	req     int // its request in the step, -1 when none
	rows    int // output rows in the step
}

// promptChunk is a sequence's prompt tokens [start, start+n) in a step,
// output rows from row.
type promptChunk struct {
	q             *seq
	start, n, row int
}

type draftCand struct {
	sp *seqSpec
	j  int     // draft position (1-based)
	p  float64 // probability that it is reached and accepted
}

// stepCost is a time as a line in a count (a step's rows, the drafter's
// sequential draft steps), fitted with forgetting over the observations.
type stepCost struct {
	n, sx, sy, sxx, sxy float64
}

func (c *stepCost) add(x int, secs float64) {
	const keep = 0.97
	fx := float64(x)
	c.n, c.sx, c.sy, c.sxx, c.sxy = keep*c.n+1, keep*c.sx+fx, keep*c.sy+secs, keep*c.sxx+fx*fx, keep*c.sxy+fx*secs
}

// line is the fit: x takes a + b*x. Without a spread of x yet, b is the
// prior share of a one-token step.
func (c *stepCost) line() (a, b float64) {
	if c.n < 1 {
		return 1, costPrior
	}
	mx, my := c.sx/c.n, c.sy/c.n
	if a, b, ok := c.slope(); ok {
		return a, b
	}
	// b as the prior share of a one-token step; a + b*mx = my.
	a = my / (1 + costPrior*(1+mx))
	return a, costPrior * a
}

// slope is the least-squares line when x has a spread and the line is
// plausible (both terms positive).
func (c *stepCost) slope() (a, b float64, ok bool) {
	if c.n < 1 {
		return 0, 0, false
	}
	mx, my := c.sx/c.n, c.sy/c.n
	// The spread of x, as the weighted sum of squared deviations: about
	// one recent observation at another size is enough (the deeper drafts
	// the plan probes now and then are what spreads a one-sequence plan's
	// rows).
	if vx := c.sxx/c.n - mx*mx; vx*c.n >= 0.5 {
		b = (c.sxy/c.n - mx*my) / vx
		a = my - b*mx
		if a > 0 && b > 0 {
			return a, b, true
		}
	}
	return 0, 0, false
}

func (c *stepCost) mean() (x, y float64) { return c.sx / c.n, c.sy / c.n }

// specCost is what the planner knows of a step's time: the target's step
// without drafts (plain) and with them (drafted: the verification rows in
// the configured exactness mode, and the verification itself), each as a
// line in the step's rows, and the drafter's Draft call as a line in its
// sequential draft steps (the most drafts any sequence gets). They are
// separate because they differ: exact verification may cost more per row
// than decoding, and a draft model runs a batched step of its own, head
// included, for every draft position.
type specCost struct {
	plain, drafted, drafter stepCost
}

// plainTime is a step of n rows without drafts.
func (c *specCost) plainTime(n int) float64 {
	if c.plain.n < 1 && c.drafted.n >= 1 {
		a, b := c.drafted.line()
		return a + b*float64(n)
	}
	a, b := c.plain.line()
	return a + b*float64(n)
}

// draftedTime is a step of n rows with drafts, the drafter not included.
func (c *specCost) draftedTime(n int) float64 {
	if c.drafted.n < 1 {
		return c.plainTime(n)
	}
	if a, b, ok := c.drafted.slope(); ok {
		return a + b*float64(n)
	}
	// The drafted steps seen so far have one size: their mean, with the
	// slope through the plain steps' mean when those are smaller (that
	// slope includes what turning to verification costs: an estimate on
	// the dear side), else the plain steps' own slope.
	dx, dy := c.drafted.mean()
	var b float64
	if c.plain.n >= 1 {
		px, py := c.plain.mean()
		if dx > px+0.5 && dy > py {
			b = (dy - py) / (dx - px)
		} else {
			_, b = c.plain.line()
		}
	} else {
		_, b = c.drafted.line()
	}
	return max(0, dy+b*(float64(n)-dx))
}

// drafterTime is a Draft call of k sequential draft steps (0 for none).
func (c *specCost) drafterTime(k int) float64 {
	if k == 0 || c.drafter.n < 1 {
		return 0
	}
	if a, b, ok := c.drafter.slope(); ok {
		return a + b*float64(k)
	}
	x, y := c.drafter.mean()
	return y / max(x, 1) * float64(k)
}

// choose is how many of cands (best first, each a sequence's next draft)
// to take on top of base: the prefix with the most expected tokens per
// second, with n decoding sequences, baseRows rows and baseTok expected
// tokens already in the step and baseK sequential draft steps; zero when
// no prefix beats the base step.
func (c *specCost) choose(n, baseRows, baseK int, baseTok float64, cands []draftCand, take func(draftCand) bool) int {
	stepTime := func(rows, k int) float64 {
		if rows > n {
			return c.draftedTime(rows) + c.drafterTime(k)
		}
		return c.plainTime(rows)
	}
	bestM, bestRate := 0, baseTok/stepTime(baseRows, baseK)
	rows, k, tok, m := baseRows, baseK, baseTok, 0
	for _, d := range cands {
		if !take(d) {
			continue
		}
		m++
		rows++
		k = max(k, d.j)
		tok += d.p
		if r := tok / stepTime(rows, k); r > bestRate*(1+1e-9) {
			bestM, bestRate = m, r
		}
	}
	return bestM
}

// Probes: after probeFirst steps planned without any draft, every
// sequence drafts one token in the same step (one drafter call, one step
// of verification: probing one sequence at a time would pay those per
// sequence), then after twice as many each time the plan still declines,
// up to probeMax, so that a drafter that does not pay costs almost nothing
// while its acceptance and costs stay measured. A sequence left without
// drafts in steps that draft for others drafts one every probeFirst such
// steps (a row more in a step that verifies anyway).
const (
	probeFirst = 8
	probeMax   = 64
	// inheritObs caps the weight of the batch's acceptance in a new
	// sequence's own estimate (observations).
	inheritObs = 4
)

func (s *Scheduler) initSpec() error {
	sp := s.cfg.Spec
	if err := sp.Validate(s.b); err != nil {
		return err
	}
	V, P := s.b.Vocab(), s.cfg.Parallel
	if need := P * (sp.NMax + 1); need > s.cfg.StepTokens {
		return fmt.Errorf("engine: %d slots with up to %d drafts each need steps of %d tokens, the step budget is %d", P, sp.NMax, need, s.cfg.StepTokens)
	}
	st := &specState{cfg: *sp, pprobs: make([]float32, V), resid: make([]float32, V), out: make([]int32, 0, sp.NMax+1)}
	if sp.SynthRates != nil {
		st.synth = rand.New(rand.NewPCG(sp.SynthSeed, sp.SynthSeed^0x5bd1e995))
		st.cond = synthCond(sp.SynthRates, nil)
	}
	s.spec = &schedSpec{cfg: *sp, v: st, global: NewLengthControl(sp.NMin, sp.NMax), seqs: map[kvcache.SeqID]*seqSpec{},
		qprobs: make([]float32, P*sp.NMax*V)}
	s.spec.stats.Drafted = make([]int64, sp.NMax)
	s.spec.stats.Accepted = make([]int64, sp.NMax)
	s.logits = make([]float32, P*(sp.NMax+1)*V)
	if w := sp.Drafter.Hidden(); w > 0 {
		// Every prompt token is an output (its state goes to the head):
		// rows for a whole step. A reused prefix would come without its
		// states, so prefixes are not reused.
		rows := P*(sp.NMax+1) + s.cfg.StepTokens
		s.spec.hb, s.spec.hd, s.spec.width = s.b.(HiddenBackend), sp.Drafter.(HiddenDrafter), w
		s.logits = make([]float32, rows*V)
		s.spec.hidden = make([]float32, rows*w)
		s.cfg.PrefixCache = -1
	}
	return nil
}

// SpecStats is speculative decoding's counts so far (nil without it).
func (s *Scheduler) SpecStats() *SpecStats {
	sp := s.spec
	if sp == nil {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	c := sp.stats
	c.Drafted, c.Accepted = slices.Clone(c.Drafted), slices.Clone(c.Accepted)
	return &c
}

func (sp *schedSpec) seq(id kvcache.SeqID) *seqSpec {
	q := sp.seqs[id]
	if q == nil {
		if n := len(sp.spare); n > 0 {
			q, sp.spare = sp.spare[n-1], sp.spare[:n-1]
		} else {
			q = &seqSpec{lc: NewLengthControl(sp.cfg.NMin, sp.cfg.NMax), drafts: make([]int32, 0, sp.cfg.NMax)}
		}
		// A new sequence starts from what the others' drafts did.
		q.lc.inherit(sp.global, inheritObs)
		q.zeros, q.sampler = 0, nil
		sp.seqs[id] = q
	}
	return q
}

// end forgets a sequence.
func (sp *schedSpec) end(id kvcache.SeqID) {
	sp.cfg.Drafter.End(id)
	if q := sp.seqs[id]; q != nil {
		delete(sp.seqs, id)
		sp.spare = append(sp.spare, q)
	}
}

// room is how many drafts q may have: one token fewer than it may still
// generate, and positions inside its reservation and the context.
func (s *Scheduler) room(q *seq) int {
	n := min(q.st.job.MaxTokens-q.gen-1, q.limit-1-len(q.toks), s.cfg.Context-1-len(q.toks))
	return max(0, min(n, s.spec.cfg.NMax))
}

// plan sets each decoding sequence's draft count.
func (sp *schedSpec) plan(s *Scheduler) {
	nmin, nmax := sp.cfg.NMin, sp.cfg.NMax
	sp.cands = sp.cands[:0]
	n := len(sp.dec)
	rows, k, tok := n, 0, float64(n)
	for _, q := range sp.dec {
		st := sp.seq(q.id)
		st.k = 0
		r := s.room(q)
		if q.st.job.Constraint != nil || r == 0 {
			continue
		}
		if nmin == nmax {
			st.k = min(nmax, r)
			continue
		}
		st.k = min(nmin, r)
		rows += st.k
		k = max(k, st.k)
		p := 1.0
		for j := 1; j <= min(nmax, r); j++ {
			p *= st.lc.accept(j - 1)
			if j > st.k {
				sp.cands = append(sp.cands, draftCand{sp: st, j: j, p: p})
			} else {
				tok += p
			}
		}
	}
	if nmin == nmax {
		return
	}
	slices.SortFunc(sp.cands, func(x, y draftCand) int {
		switch {
		case x.p > y.p:
			return -1
		case x.p < y.p:
			return 1
		}
		return x.j - y.j
	})
	// A draft whose earlier draft was not taken cannot be (the order puts
	// a sequence's drafts in position order, p falling with j); the first
	// pass counts which, the second takes them.
	taken := func(c draftCand) bool {
		if c.j != c.sp.k+1 {
			return false
		}
		c.sp.k = c.j
		return true
	}
	m := sp.cost.choose(n, rows, k, tok, sp.cands, taken)
	if m > 0 && rows == n {
		// Now and then a step without drafts, so that what they would
		// make stays measured (a planner that has only ever seen steps
		// of drafts has no line for the plain step to be compared with).
		if sp.plainProbe == 0 {
			sp.plainProbe = probeFirst
		}
		if sp.sincePlain++; sp.sincePlain >= sp.plainProbe {
			m, sp.sincePlain, sp.plainProbe = 0, 0, min(2*sp.plainProbe, probeMax)
		}
	} else if m == 0 {
		sp.sincePlain, sp.plainProbe = 0, probeFirst
	}
	for _, c := range sp.cands {
		if c.sp.k >= c.j {
			c.sp.k = c.j - 1 // undo the counting pass
		}
	}
	for _, c := range sp.cands {
		if m == 0 {
			break
		}
		if taken(c) {
			m--
		}
	}
	drafting := false
	var deepest *seqSpec
	for _, q := range sp.dec {
		st := sp.seqs[q.id]
		drafting = drafting || st.k > 0
		if st.k > 0 && st.k < s.room(q) && q.st.job.Constraint == nil && (deepest == nil || st.k > deepest.k) {
			deepest = st
		}
	}
	// Now and then one draft more than planned for the sequence with the
	// most: the next position's acceptance and what a longer step costs
	// (the drafter's further step, a row more to verify) are only learnt
	// by drafting it, and a plan that never goes past what it has measured
	// keeps the verdict of a first unlucky draft, or a cost line through
	// one length, for good.
	if deepest != nil {
		if sp.deepProbe == 0 {
			sp.deepProbe = probeFirst
		}
		if sp.sinceDeep++; sp.sinceDeep >= sp.deepProbe {
			deepest.k++
			sp.sinceDeep, sp.deepProbe = 0, min(2*sp.deepProbe, probeMax)
		}
	}
	if sp.probe == 0 {
		sp.probe = probeFirst
	}
	probe := false
	sp.probing = false
	if drafting {
		sp.zeros, sp.probe = 0, probeFirst
	} else if sp.zeros++; sp.zeros >= sp.probe {
		// Is the drafter agreeing, or cheaper, now?
		probe, sp.zeros, sp.probe = true, 0, min(2*sp.probe, probeMax)
		sp.probing = true
	}
	deep := false
	if probe {
		sp.probeN++
	}
	for _, q := range sp.dec {
		st := sp.seqs[q.id]
		if st.k > 0 || q.st.job.Constraint != nil || s.room(q) == 0 {
			st.zeros = 0
			continue
		}
		if probe {
			// Every other probe, one sequence drafts as far as it may:
			// where one draft loses but several pay (a step with drafts
			// costs a fixed part more), only a longer step shows it.
			st.k = 1
			if sp.probeN%2 == 0 && !deep {
				st.k, deep = s.room(q), true
			}
		} else if drafting {
			if st.zeros++; st.zeros >= probeFirst {
				st.k, st.zeros = 1, 0
			}
		}
	}
}

// probed takes the outcome of a step of n decoding sequences that made
// rate tokens per second: when it was a probe of the zero regime and beat
// the plain step, the next probe comes after probeFirst steps again
// instead of twice as many (a drafter that pays is found back quickly,
// where the plan's acceptance estimate had fallen below the break-even
// point by chance).
func (sp *schedSpec) probed(n int, rate float64) {
	if sp.probing && rate > float64(n)/sp.cost.plainTime(n) {
		sp.probe = probeFirst
	}
	sp.probing = false
}

// draftSampler is q's sampler for drafts drawn from the drafter's
// distribution (temperature > 0), nil for greedy.
func (sp *schedSpec) draftSampler(st *seqSpec, p sample.Params) *sample.Sampler {
	if p.Temperature <= 0 || sp.v.synth != nil {
		return nil
	}
	if st.sampler == nil {
		p.Seed ^= 0xd1b54a32d192ed03
		p.RepeatLastN = 0
		st.sampler, _ = sample.New(p, len(sp.v.pprobs))
	}
	return st.sampler
}

// stepSpec is step with speculative decoding.
func (s *Scheduler) stepSpec() {
	sp := s.spec
	V := s.b.Vocab()
	sp.dec = sp.dec[:0]
	for _, q := range s.active {
		q.logits = -1
		if q.fed == len(q.prompt) {
			sp.dec = append(sp.dec, q)
		}
	}
	sp.plan(s)
	// One Draft call for every sequence with drafts.
	sp.reqs, sp.owner = sp.reqs[:0], sp.owner[:0]
	draftSteps := 0
	for i, q := range sp.dec {
		st := sp.seqs[q.id]
		st.req, st.drafts = -1, st.drafts[:0]
		if st.k == 0 {
			continue
		}
		st.req = len(sp.reqs)
		r := DraftRequest{Seq: q.id, Toks: q.toks, Max: st.k, Out: st.drafts[:0], Sampler: sp.draftSampler(st, q.st.job.Sampler.Params())}
		if r.Sampler != nil {
			r.Probs = sp.qprobs[i*sp.cfg.NMax*V : (i*sp.cfg.NMax+st.k)*V]
		}
		sp.reqs = append(sp.reqs, r)
		sp.owner = append(sp.owner, st)
		draftSteps = max(draftSteps, st.k)
	}
	var drafterSecs float64
	if len(sp.reqs) > 0 {
		t := time.Now()
		err := sp.cfg.Drafter.Draft(sp.reqs)
		drafterSecs = time.Since(t).Seconds()
		if err != nil {
			// A drafter that fails costs the drafts, not the requests.
			for i := range sp.reqs {
				sp.reqs[i].Out = sp.reqs[i].Out[:0]
			}
		} else {
			sp.cost.drafter.add(draftSteps, drafterSecs)
		}
		for i := range sp.reqs {
			r := &sp.reqs[i]
			st := sp.owner[i]
			st.drafts = r.Out[:min(len(r.Out), st.k)]
			if !r.Sampled {
				r.Probs = nil
			}
			r.Toks = nil
		}
	}
	// A model with recurrent layers keeps the state after each pending
	// token and each draft but the last, where a rejection rolls back to
	// (1 + k slots per sequence with the live state); without a slot for
	// one, even after evicting cached sequences, the drafts stop before it.
	if s.b.KVConfig().Recurrent() {
		for _, q := range sp.dec {
			st := sp.seqs[q.id]
			n := len(q.toks) - 1
			for i := range st.drafts {
				if err := s.snapshotRetry(q.id, n+1+i); err != nil {
					st.drafts = st.drafts[:i]
					break
				}
			}
		}
	}
	// The batch: every decoding sequence's pending token and drafts, then
	// prompt chunks under what is left of the budget.
	start := time.Now()
	s.batch.Reset()
	budget := s.cfg.StepTokens
	outs, verified := 0, 0
	for _, q := range sp.dec {
		st := sp.seqs[q.id]
		pos := len(q.toks) - 1
		s.batch.Add(q.toks[pos], int32(pos), q.id, true)
		for i, d := range st.drafts {
			s.batch.Add(d, int32(pos+1+i), q.id, true)
		}
		st.rows = 1 + len(st.drafts)
		q.logits = outs
		outs += st.rows
		verified += st.rows
		budget -= st.rows
	}
	prompt := 0
	sp.chunks = sp.chunks[:0]
	for _, q := range s.active {
		if q.fed == len(q.prompt) || budget <= 0 {
			continue
		}
		n := min(len(q.prompt)-q.fed, budget)
		if sp.hd != nil {
			sp.chunks = append(sp.chunks, promptChunk{q: q, start: q.fed, n: n, row: outs})
		}
		for i := q.fed; i < q.fed+n; i++ {
			last := i == len(q.prompt)-1
			s.batch.Add(q.prompt[i], int32(i), q.id, last || sp.hd != nil)
			if last {
				q.logits = outs
			}
			if last || sp.hd != nil {
				outs++
			}
		}
		q.fed += n
		budget -= n
		prompt += n
		s.promptToks.Add(int64(n))
	}
	var out Output
	for _, q := range s.active {
		if q.logits >= 0 {
			out = out.Merge(s.need(q))
		}
	}
	exact := sp.cfg.Exact != nil && verified > len(sp.dec)
	if exact {
		sp.cfg.Exact(verified)
	}
	var err error
	if sp.hd != nil {
		err = sp.hb.ForwardHidden(&s.batch, out, s.logits, sp.hidden[:outs*sp.width])
	} else {
		err = s.b.Forward(&s.batch, out, s.logits)
	}
	if exact {
		sp.cfg.Exact(0)
	}
	now := time.Now()
	s.countStep(len(sp.dec))
	if err != nil && errors.Is(err, ErrUnavailable) {
		why := err.Error()
		s.degraded.Store(&why)
	} else if err == nil && s.degraded.Load() != nil {
		s.degraded.Store(nil)
	}
	if err != nil {
		s.failStep(err)
		return
	}
	// The prompt chunks' states to the head (before any sequence of the
	// step can end and be forgotten by it).
	for _, c := range sp.chunks {
		E := sp.width
		if err := sp.hd.Observe(c.q.id, c.q.prompt, c.start, sp.hidden[c.row*E:(c.row+c.n)*E]); err != nil {
			c.q.logits, c.q.failed = -2, err // ended below
		}
	}
	a := s.active[:0]
	sp.stepTok = 0
	sp.mu.Lock()
	for _, q := range s.active {
		if q.logits == -2 {
			s.end(q, FinishError, fmt.Errorf("engine: handing the prompt's states to the drafter failed: %w", q.failed), false)
			continue
		}
		if q.logits < 0 {
			a = append(a, q)
			continue
		}
		st := sp.seqs[q.id]
		if st == nil || st.rows == 0 {
			// The prompt's last chunk: its first token, as without drafts.
			row := s.logits[q.logits*V : (q.logits+1)*V]
			if f := s.sampleInto(q, row, now); f != FinishNone {
				s.end(q, f, nil, true)
				continue
			}
			a = append(a, q)
			continue
		}
		if f, err := s.verifyInto(q, st, now); f != FinishNone {
			s.end(q, f, err, err == nil)
			continue
		}
		a = append(a, q)
	}
	sp.mu.Unlock()
	// The step's time, its verification included, fits the line of its
	// kind; steps with prompt chunks do not (their tokens cost otherwise).
	if prompt == 0 && len(sp.dec) > 0 {
		secs := time.Since(start).Seconds()
		if verified > len(sp.dec) {
			sp.cost.drafted.add(verified, secs)
		} else {
			sp.cost.plain.add(verified, secs)
		}
		sp.probed(len(sp.dec), float64(sp.stepTok)/(secs+drafterSecs))
	}
	clear(s.active[len(a):])
	s.active = a
	s.busy.Store(int64(len(s.active)))
}

// verifyInto checks q's drafts against its rows, emits what they accept
// and one token of the target's, and drops the rest from the cache; it
// returns why q ends, or FinishNone. The caller holds sp.mu.
func (s *Scheduler) verifyInto(q *seq, st *seqSpec, now time.Time) (Finish, error) {
	sp, V := s.spec, s.b.Vocab()
	j := q.st.job
	rows := s.logits[q.logits*V : (q.logits+st.rows)*V]
	n := len(q.toks) - 1 // the pending token's position
	if len(st.drafts) == 0 || j.Constraint != nil {
		st.rows = 0
		if sp.hd != nil {
			E := sp.width
			if err := sp.hd.Observe(q.id, q.toks, n, sp.hidden[q.logits*E:(q.logits+1)*E]); err != nil {
				return FinishError, fmt.Errorf("engine: handing states to the drafter: %w", err)
			}
		}
		sp.stepTok++
		return s.sampleInto(q, rows[:V], now), nil
	}
	v := sp.v
	v.drafts = st.drafts
	sampled := st.req >= 0 && sp.reqs[st.req].Probs != nil
	if sampled {
		v.qprobs = sp.reqs[st.req].Probs
	}
	kd := len(st.drafts)
	if j.IgnoreEOG {
		for r := range st.rows {
			s.ban(rows[r*V : (r+1)*V])
		}
	}
	accepted := v.verify(j.Sampler, rows, V, sampled)
	sp.stats.record(kd, accepted, len(v.out))
	sp.stepTok += len(v.out)
	sp.steps.Add(1)
	st.lc.Update(kd, accepted, 0)
	sp.global.Update(kd, accepted, 0)
	if sp.hd != nil {
		// The kept positions' states; their tokens reach the drafter with
		// the next Draft.
		E := sp.width
		if err := sp.hd.Observe(q.id, q.toks, n, sp.hidden[q.logits*E:(q.logits+accepted+1)*E]); err != nil {
			return FinishError, fmt.Errorf("engine: handing states to the drafter: %w", err)
		}
	}
	if accepted < kd {
		if err := s.b.Truncate(q.id, n+1+accepted); err != nil {
			return FinishError, fmt.Errorf("engine: dropping rejected drafts: %w", err)
		}
	}
	forget(s.b, q.id, n+1)
	st.rows = 0
	for i, id := range v.out {
		if f := s.emit(q, id, rows[i*V:(i+1)*V], now); f != FinishNone {
			return f, nil
		}
	}
	return FinishNone, nil
}

// emit is sampleInto for a token already chosen (and accepted by the
// sampler): it ends the sequence at an end-of-generation token, reports
// logprobs from its row, and stops at the limits.
func (s *Scheduler) emit(q *seq, id int32, row []float32, now time.Time) Finish {
	j := q.st.job
	if !j.IgnoreEOG && s.cfg.IsEOG != nil && s.cfg.IsEOG(id) {
		return FinishStop
	}
	t := Token{ID: id, At: now}
	if j.TopLogprobs >= 0 {
		var logZ float32
		if j.TopLogprobs > 0 {
			t.Top, logZ = sample.TopLogprobs(row, j.TopLogprobs, nil)
		} else {
			logZ = sample.LogSumExp(row)
		}
		t.Logprob = row[id] - logZ
	}
	q.gen++
	s.genToks.Add(1)
	q.toks = append(q.toks, id)
	q.st.push(t)
	if q.gen >= j.MaxTokens || len(q.toks) >= q.limit || len(q.toks) >= s.cfg.Context {
		return FinishLength
	}
	return FinishNone
}

// failStep ends every running sequence after a failed step, as step does.
func (s *Scheduler) failStep(err error) {
	for _, q := range s.active {
		s.end(q, FinishError, fmt.Errorf("engine: step failed: %w", err), false)
	}
	clear(s.active)
	s.active = s.active[:0]
	s.busy.Store(0)
	for i := range s.lru {
		s.b.Drop(s.lru[i].id)
	}
	clear(s.lru)
	s.lru = s.lru[:0]
	s.cachedN.Store(0)
}
