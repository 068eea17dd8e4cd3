package spec

import (
	"fmt"

	"braid/internal/engine"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// MTP drafts with the target's own MTP (NextN) head (glm4moe, deepseek2's
// GLM-4.7-Flash, qwen35): for the token x at position p and the target's
// final-normed hidden state h of position p-1 the head predicts the token
// after x. Its own one-layer KV cache holds a row per position, filled
// from the prompt's hidden states during the prefill (a cold cache after a
// long prompt is what makes llama.cpp's MTP lose acceptance) and from the
// accepted positions after each verification. Draft i > 1 chains: it
// feeds draft i-1 with the head's own post-norm state in place of the
// target's, and those chained rows are dropped from the head's cache after
// the call, to be recomputed from the target's states once verified.
type MTP struct {
	m        *model.Model
	cache    *kvcache.Cache
	E, V     int
	maxBatch int
	seqs     map[kvcache.SeqID]*mtpSeq
	spare    []*mtpSeq
	batch    model.Batch
	hprev    []float32 // [maxBatch x E] the batch's input states
	logits   []float32 // [rows x V] output rows of a call
	hout     []float32 // [rows x E] their post-norm states
	chain    []float32 // [requests x E] the states of their last drafts
	rows     []int     // request -> its output row, -1 when none
	outs     int       // output rows of the call so far
	zeros    []float32 // h of position -1
}

type mtpSeq struct {
	n    int       // positions in the head's cache (true inputs only)
	hpos int       // position of the first row of pend
	pend []float32 // the target's hidden states of positions hpos, hpos+1, ...
}

var _ engine.HiddenDrafter = (*MTP)(nil)

// flushRows is the pending hidden states past which Observe runs the head
// at once (the prompt's chunks) rather than with the next draft.
const flushRows = 16

// NewMTP drafts with m's MTP head on its own cache (m.NewMTPCache, sized
// like the target's); maxBatch is m's MaxBatch. m is the whole model on
// this node loaded with Options.MTP, or, for a split model, the head alone
// on the coordinator (model.NewMTPHead) while the trunk's hidden states
// come from the ranks that compute them.
func NewMTP(m *model.Model, cache *kvcache.Cache, maxBatch int) (*MTP, error) {
	if !m.HasMTP() {
		return nil, fmt.Errorf("--spec mtp: the model has no MTP head loaded (a model with nextn_predict_layers, loaded with it)")
	}
	if sh := m.Shard(); sh.TPSize != 1 || !sh.LastStage(&m.Cfg) || sh.Vocab() != m.Cfg.Vocab {
		return nil, fmt.Errorf("--spec mtp runs the head whole on one rank, but this one holds a slice (%s); load it with model.NewMTPHead", sh.String())
	}
	E := m.Cfg.Embd
	return &MTP{m: m, cache: cache, E: E, V: m.Cfg.Vocab, maxBatch: maxBatch, seqs: map[kvcache.SeqID]*mtpSeq{},
		hprev: make([]float32, maxBatch*E), zeros: make([]float32, E)}, nil
}

// PrefillChunk is the model's MaxBatch: the prompt goes in the steps a
// plain prefill takes.
func (d *MTP) PrefillChunk() int { return d.maxBatch }

// Hidden is the model's embedding width: the head reads the target's
// hidden states.
func (d *MTP) Hidden() int { return d.E }

// End drops seq's head cache and states.
func (d *MTP) End(seq kvcache.SeqID) {
	d.cache.Drop(seq)
	if s := d.seqs[seq]; s != nil {
		s.n, s.hpos, s.pend = 0, 0, s.pend[:0]
		d.spare = append(d.spare, s)
		delete(d.seqs, seq)
	}
}

func (d *MTP) seq(id kvcache.SeqID) *mtpSeq {
	s := d.seqs[id]
	if s == nil {
		if n := len(d.spare); n > 0 {
			s, d.spare = d.spare[n-1], d.spare[:n-1]
		} else {
			s = &mtpSeq{}
		}
		d.seqs[id] = s
	}
	return s
}

// known is the number of positions whose hidden states s holds from 0:
// one past the last.
func (s *mtpSeq) known(E int) int { return s.hpos + len(s.pend)/E }

// h is the input state of position j (the target's state of j-1).
func (d *MTP) h(s *mtpSeq, j int) []float32 {
	if j == 0 {
		return d.zeros
	}
	o := (j - 1 - s.hpos) * d.E
	return s.pend[o : o+d.E]
}

// Observe keeps the target's states of seq's positions [pos, ...) and,
// when many are pending (the prompt), runs the head over them.
func (d *MTP) Observe(seq kvcache.SeqID, toks []int32, pos int, hidden []float32) error {
	s := d.seq(seq)
	if pos > s.known(d.E) {
		return fmt.Errorf("mtp: sequence %d: hidden states from position %d, but only %d known", seq, pos, s.known(d.E))
	}
	if skip := s.hpos - pos; skip > 0 {
		// States the head no longer needs.
		if skip*d.E >= len(hidden) {
			return nil
		}
		hidden, pos = hidden[skip*d.E:], s.hpos
	}
	s.pend = append(s.pend[:(pos-s.hpos)*d.E], hidden...)
	if len(s.pend)/d.E < flushRows {
		return nil
	}
	// Every input whose token and state are known (j-1 < known) but the
	// last token of toks: a caller that hands over the tokens a
	// verification produced (the Generator) includes the pending one,
	// whose output row the next Draft needs, so Draft evaluates it.
	J := min(len(toks)-1, s.known(d.E)+1)
	if J <= s.n {
		return nil
	}
	d.batch.Reset()
	d.outs = 0
	for j := s.n; j < J; j++ {
		if err := d.add(s, seq, toks[j], j, false); err != nil {
			return err
		}
	}
	if err := d.exec(); err != nil {
		return err
	}
	d.consumed(s, J)
	return nil
}

// consumed marks inputs [.., J) done: the head's cache holds them and only
// the states from J-1 on are still needed.
func (d *MTP) consumed(s *mtpSeq, J int) {
	s.n = J
	if drop := J - 1 - s.hpos; drop > 0 {
		rest := copy(s.pend, s.pend[min(drop*d.E, len(s.pend)):])
		s.pend = s.pend[:rest]
		s.hpos = J - 1
	}
}

// add appends one input to the batch (running it first when full).
func (d *MTP) add(s *mtpSeq, seq kvcache.SeqID, tok int32, j int, out bool) error {
	return d.addState(seq, tok, j, out, d.h(s, j))
}

func (d *MTP) addState(seq kvcache.SeqID, tok int32, j int, out bool, h []float32) error {
	if len(d.batch.Tokens) == d.maxBatch {
		if err := d.exec(); err != nil {
			return err
		}
	}
	i := len(d.batch.Tokens)
	copy(d.hprev[i*d.E:(i+1)*d.E], h)
	d.batch.Add(tok, int32(j), seq, out)
	return nil
}

// exec runs the batch, its output rows after the call's earlier ones.
func (d *MTP) exec() error {
	if len(d.batch.Tokens) == 0 {
		return nil
	}
	no := d.batch.Outputs()
	d.logits = grow(d.logits, (d.outs+no)*d.V)
	d.hout = grow(d.hout, (d.outs+no)*d.E)
	err := d.m.ForwardMTPHidden(d.cache, &d.batch, d.hprev[:len(d.batch.Tokens)*d.E],
		d.logits[d.outs*d.V:(d.outs+no)*d.V], d.hout[d.outs*d.E:(d.outs+no)*d.E])
	d.outs += no
	d.batch.Reset()
	if err != nil {
		return fmt.Errorf("mtp: %w", err)
	}
	return nil
}

// Draft runs the head: the first step evaluates, for every request, the
// positions whose states arrived since the last call and the pending
// token, the later steps one chained draft per request.
func (d *MTP) Draft(reqs []engine.DraftRequest) error {
	if cap(d.rows) < len(reqs) {
		d.rows = make([]int, len(reqs))
	}
	d.rows = d.rows[:len(reqs)]
	d.batch.Reset()
	d.outs = 0
	live := false
	for i := range reqs {
		r := &reqs[i]
		r.Out, r.Sampled = r.Out[:0], false
		d.rows[i] = -1
		L := len(r.Toks)
		if L == 0 || r.Max <= 0 {
			continue
		}
		s := d.seqs[r.Seq]
		if s == nil || s.n > L-1 || s.known(d.E) < L-1 {
			known := 0
			if s != nil {
				known = s.known(d.E)
			}
			return fmt.Errorf("mtp: sequence %d of %d tokens: the head holds %d positions and states up to %d (the target's hidden states were not handed over)", r.Seq, L, d.cache.Len(r.Seq), known)
		}
		for j := s.n; j < L; j++ {
			if err := d.add(s, r.Seq, r.Toks[j], j, j == L-1); err != nil {
				return err
			}
		}
		d.rows[i] = d.outs + d.batch.Outputs() - 1
		live = true
	}
	if !live {
		return nil
	}
	if err := d.exec(); err != nil {
		return err
	}
	for i := range reqs {
		if d.rows[i] >= 0 {
			d.consumed(d.seqs[reqs[i].Seq], len(reqs[i].Toks))
		}
	}
	d.chain = grow(d.chain, len(reqs)*d.E)
	for step := 0; ; step++ {
		// Pick this step's drafts and keep the states they were drawn
		// with (the next exec overwrites the rows), then feed each one
		// that is to be followed.
		more := false
		for i := range reqs {
			r := &reqs[i]
			if d.rows[i] < 0 {
				continue
			}
			row := d.rows[i]
			tok := pickRow(r, d.logits[row*d.V:(row+1)*d.V], step)
			r.Out = append(r.Out, tok)
			d.rows[i] = -1
			if len(r.Out) < r.Max {
				copy(d.chain[i*d.E:(i+1)*d.E], d.hout[row*d.E:(row+1)*d.E])
				d.rows[i] = 0
				more = true
			}
		}
		if !more {
			break
		}
		d.batch.Reset()
		d.outs = 0
		for i := range reqs {
			r := &reqs[i]
			if d.rows[i] < 0 {
				continue
			}
			if err := d.addState(r.Seq, r.Out[step], len(r.Toks)+step, true, d.chain[i*d.E:(i+1)*d.E]); err != nil {
				return err
			}
			d.rows[i] = d.outs + d.batch.Outputs() - 1
		}
		if err := d.exec(); err != nil {
			return err
		}
	}
	// The chained rows were computed from the head's own states: drop them.
	for i := range reqs {
		r := &reqs[i]
		if s := d.seqs[r.Seq]; s != nil && d.cache.Len(r.Seq) > s.n {
			if err := d.cache.Truncate(r.Seq, s.n); err != nil {
				return fmt.Errorf("mtp: %w", err)
			}
		}
	}
	return nil
}

// pickRow chooses draft i of r from a row of logits over the target's
// vocabulary: the argmax (lowest id on ties), or with a sampler a draw
// from the distribution its parameters make (written to r.Probs).
func pickRow(r *engine.DraftRequest, row []float32, i int) int32 {
	if r.Sampler == nil {
		best := 0
		for j := 1; j < len(row); j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		return int32(best)
	}
	V := len(row)
	q := r.Probs[i*V : (i+1)*V]
	r.Sampler.Probs(row, q)
	r.Sampled = true
	return r.Sampler.DrawWeights(q)
}

// grow returns b with length n and its contents, reallocated only when
// too small.
func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		nb := make([]float32, n, n+n/4)
		copy(nb, b)
		return nb
	}
	return b[:n]
}
