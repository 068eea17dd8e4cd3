package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"braid/internal/kvcache"
	"braid/internal/sample"
)

// specState is a Generator's speculative decoding: the configuration and
// every buffer a step needs, sized once.
type specState struct {
	cfg    Spec
	hb     HiddenBackend // set when the drafter reads hidden states
	hd     HiddenDrafter
	width  int // hidden width
	ctl    *LengthControl
	reqs   []DraftRequest // one
	drafts []int32
	qprobs []float32 // [NMax x vocab] the drafter's distributions
	pprobs []float32 // [vocab] the target's distribution of a row
	resid  []float32 // [vocab]
	hidden []float32 // [rows x width]
	out    []int32   // the tokens a verification emits
	toks   []int32   // the sequence's tokens
	synth  *rand.Rand
	cond   []float64 // synthetic conditional acceptance per position
	chunk  int       // prompt tokens per step when every one is an output
}

// NewSpecGenerator makes a generator that decodes speculatively with
// spec's drafter. It refuses a configuration the backend cannot run (see
// Spec.Validate) at once, never in the middle of a generation.
func NewSpecGenerator(b Backend, spec Spec) (*Generator, error) {
	if err := spec.Validate(b); err != nil {
		return nil, err
	}
	V := b.Vocab()
	s := &specState{cfg: spec, ctl: NewLengthControl(spec.NMin, spec.NMax), reqs: make([]DraftRequest, 1),
		drafts: make([]int32, 0, spec.NMax), out: make([]int32, 0, spec.NMax+1),
		pprobs: make([]float32, V), resid: make([]float32, V), qprobs: make([]float32, spec.NMax*V)}
	rows := spec.NMax + 1
	if w := spec.Drafter.Hidden(); w > 0 {
		s.width = w
		s.hb = b.(HiddenBackend)
		s.hd = spec.Drafter.(HiddenDrafter)
		s.chunk = max(1, s.hd.PrefillChunk())
		rows = max(rows, s.chunk)
		s.hidden = make([]float32, rows*w)
	}
	if spec.SynthRates != nil {
		s.synth = rand.New(rand.NewPCG(spec.SynthSeed, spec.SynthSeed^0x5bd1e995))
		s.cond = synthCond(spec.SynthRates, nil)
	}
	return &Generator{b: b, logits: make([]float32, rows*V), spec: s}, nil
}

// Spec is the generator's speculative decoding configuration (nil for a
// plain generator).
func (g *Generator) Spec() *Spec {
	if g.spec == nil {
		return nil
	}
	return &g.spec.cfg
}

// forward runs a batch, with the hidden states when the drafter reads them.
func (g *Generator) forward(out Output, rows int) error {
	s := g.spec
	if s.hb != nil {
		return s.hb.ForwardHidden(&g.batch, out, g.logits, s.hidden[:rows*s.width])
	}
	return g.b.Forward(&g.batch, out, g.logits)
}

// generateSpec is Generate with speculative decoding.
func (g *Generator) generateSpec(ctx context.Context, r Request) (st Stats, err error) {
	s := g.spec
	st = Stats{PromptTokens: len(r.Prompt)}
	if len(r.Prompt) == 0 {
		return st, fmt.Errorf("engine: empty prompt")
	}
	if r.Context > 0 && len(r.Prompt) >= r.Context {
		return st, fmt.Errorf("engine: prompt of %d tokens leaves no room in a context of %d", len(r.Prompt), r.Context)
	}
	V := g.b.Vocab()
	g.b.Drop(r.Seq)
	defer g.b.Drop(r.Seq)
	recurrent := g.b.KVConfig().Recurrent()
	s.cfg.Drafter.End(r.Seq)
	defer s.cfg.Drafter.End(r.Seq)
	params := r.Sampler.Params()
	need := func(history int) Output { return NeedFor(params, history, false) }
	start := time.Now()
	// Prefill; a drafter reading hidden states gets every prompt
	// position's, so its own cache is warm from the first draft. The
	// prompt then goes in the steps a plain prefill takes (the backend's
	// MaxBatch), and the last row's logits are the head's over its state
	// alone, as a plain prefill computes them.
	P := len(r.Prompt)
	if s.hd != nil {
		for lo := 0; lo < P; lo += s.chunk {
			hi := min(lo+s.chunk, P)
			g.batch.Reset()
			for i := lo; i < hi; i++ {
				g.batch.Add(r.Prompt[i], int32(i), r.Seq, true)
			}
			if err := g.forward(need(P), hi-lo); err != nil {
				return st, err
			}
			if err := s.hd.Observe(r.Seq, r.Prompt, lo, s.hidden[:(hi-lo)*s.width]); err != nil {
				return st, err
			}
			if hi == P {
				if err := s.hb.Head(s.hidden[(hi-lo-1)*s.width:(hi-lo)*s.width], g.logits[:V]); err != nil {
					return st, err
				}
			}
		}
	} else {
		g.batch.Reset()
		for i, id := range r.Prompt {
			g.batch.Add(id, int32(i), r.Seq, i == P-1)
		}
		if err := g.b.Forward(&g.batch, need(P), g.logits); err != nil {
			return st, err
		}
	}
	st.Prefill = time.Since(start)
	for _, id := range r.Prompt {
		r.Sampler.Accept(id)
	}
	id := r.Sampler.Sample(g.logits[:V])
	r.Sampler.Accept(id)
	st.TTFT = time.Since(start)
	decodeStart := time.Now()
	defer func() { st.Decode = time.Since(decodeStart) }()
	if r.Stop != nil && r.Stop(id) {
		return st, nil
	}
	st.GenTokens++
	if r.Emit != nil {
		if err := r.Emit(id); err != nil {
			return st, err
		}
	}
	if st.GenTokens == r.MaxTokens || (r.Context > 0 && P+1 >= r.Context) {
		return st, nil
	}
	if cap(s.toks) < P+r.MaxTokens+s.cfg.NMax+1 {
		s.toks = make([]int32, 0, P+r.MaxTokens+s.cfg.NMax+1)
	}
	toks := append(append(s.toks[:0], r.Prompt...), id)
	var draftSampler *sample.Sampler
	if params.Temperature > 0 && s.synth == nil {
		// The drafter draws with its own stream, so the target's stays
		// what it is without drafts as long as no sampled draft is used.
		dp := params
		dp.Seed ^= 0xd1b54a32d192ed03
		dp.RepeatLastN = 0 // penalties shape the target's distribution; the draft's may differ
		if draftSampler, err = sample.New(dp, V); err != nil {
			return st, err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		stepStart := time.Now()
		n := len(toks) - 1 // position of the pending token
		k := s.ctl.Next()
		k = min(k, r.MaxTokens-st.GenTokens-1)
		if r.Context > 0 {
			k = min(k, r.Context-2-n)
		}
		s.drafts = s.drafts[:0]
		sampled := false
		if k > 0 {
			q := &s.reqs[0]
			*q = DraftRequest{Seq: r.Seq, Toks: toks, Max: k, Sampler: draftSampler, Out: s.drafts[:0]}
			if draftSampler != nil {
				q.Probs = s.qprobs[:k*V]
			}
			if err := s.cfg.Drafter.Draft(s.reqs); err != nil {
				return st, fmt.Errorf("engine: drafting: %w", err)
			}
			s.drafts, sampled = q.Out[:min(len(q.Out), k)], q.Sampled
			q.Toks = nil
		}
		if recurrent {
			// The state after the pending token and after each draft but
			// the last, the lengths a rejection rolls back to (1 + k
			// slots with the live state). Without a slot for one, the
			// drafts stop before it.
			for i := range s.drafts {
				if err := snapshot(g.b, r.Seq, n+1+i); err != nil {
					if !errors.Is(err, kvcache.ErrFull) {
						return st, fmt.Errorf("engine: keeping the state before verifying: %w", err)
					}
					s.drafts = s.drafts[:i]
					break
				}
			}
		}
		g.batch.Reset()
		g.batch.Add(toks[n], int32(n), r.Seq, true)
		for i, d := range s.drafts {
			g.batch.Add(d, int32(n+1+i), r.Seq, true)
		}
		kd := len(s.drafts)
		if s.cfg.Exact != nil && kd > 0 {
			s.cfg.Exact(kd + 1)
		}
		err := g.forward(need(len(toks)), kd+1)
		if s.cfg.Exact != nil && kd > 0 {
			s.cfg.Exact(0)
		}
		if err != nil {
			return st, err
		}
		accepted := s.verify(r.Sampler, g.logits, V, sampled)
		if s.cfg.Stats != nil {
			s.cfg.Stats.record(kd, accepted, len(s.out))
		}
		if accepted < kd {
			if err := g.b.Truncate(r.Seq, n+1+accepted); err != nil {
				if errors.Is(err, kvcache.ErrNotResumable) {
					return st, fmt.Errorf("engine: speculative decoding cannot roll back: %w", err)
				}
				return st, err
			}
		}
		if recurrent && kd > 0 {
			forget(g.b, r.Seq, n+1)
		}
		s.ctl.Update(kd, accepted, time.Since(stepStart))
		if s.hd != nil {
			known := append(toks, s.out...)
			if err := s.hd.Observe(r.Seq, known, n, s.hidden[:(accepted+1)*s.width]); err != nil {
				return st, err
			}
		}
		for j, id := range s.out {
			pos := n + 1 + j // where the token would be evaluated
			if r.Stop != nil && r.Stop(id) {
				return st, nil
			}
			st.GenTokens++
			if r.Emit != nil {
				if err := r.Emit(id); err != nil {
					return st, err
				}
			}
			if st.GenTokens == r.MaxTokens || (r.Context > 0 && pos+1 >= r.Context) {
				return st, nil
			}
		}
		toks = append(toks, s.out...)
	}
}

// verify decides what the target keeps of the drafts s.drafts given its
// rows of logits (row i follows the pending token and drafts [0, i)): the
// number of drafts accepted, and in s.out the tokens the step produces,
// those drafts and one token of the target's. The sampler accepts each
// (its penalty history grows as it would without drafts).
func (s *specState) verify(smp *sample.Sampler, logits []float32, V int, sampled bool) int {
	s.out = s.out[:0]
	row := func(i int) []float32 { return logits[i*V : (i+1)*V] }
	k := len(s.drafts)
	for i := 0; i < k; i++ {
		d := s.drafts[i]
		var tok int32
		ok := false
		switch {
		case s.synth != nil:
			// Benchmark only: the verdict is drawn, the draft kept
			// whatever the target says.
			if i < len(s.cond) && s.synth.Float64() < s.cond[i] {
				tok, ok = d, true
			} else {
				tok = smp.Sample(row(i))
			}
		case sampled:
			tok, ok = s.rejectionSample(smp, row(i), s.qprobs[i*V:(i+1)*V], d)
		default:
			// Deterministic drafts: the target's own sample either is the
			// draft or replaces it. At temperature 0 this is the greedy
			// comparison; above it, it accepts d with probability p(d),
			// as rejection sampling against a one-hot draft does.
			tok = smp.Sample(row(i))
			ok = tok == d
		}
		smp.Accept(tok)
		s.out = append(s.out, tok)
		if !ok {
			return i
		}
	}
	tok := smp.Sample(row(k))
	smp.Accept(tok)
	s.out = append(s.out, tok)
	return k
}

// rejectionSample is one position of Leviathan et al.'s speculative
// sampling: draft d, drawn from q, is kept with probability
// min(1, p(d)/q(d)); otherwise a token is drawn from the residual
// max(0, p-q), renormalised. Either way the token is distributed as p.
func (s *specState) rejectionSample(smp *sample.Sampler, row, q []float32, d int32) (int32, bool) {
	p := s.pprobs
	smp.Probs(row, p)
	if qd := q[d]; qd > 0 && smp.Uniform()*float64(qd) < float64(p[d]) {
		return d, true
	}
	for i := range p {
		s.resid[i] = max(0, p[i]-q[i])
	}
	if tok := smp.DrawWeights(s.resid); tok >= 0 {
		return tok, false
	}
	// p == q up to rounding: p itself is the residual's limit.
	return smp.DrawWeights(p), false
}
