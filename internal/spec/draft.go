package spec

import (
	"fmt"
	"math"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// DraftModel drafts with a smaller model that shares the target's
// vocabulary (Qwen3-0.6B for Qwen3-32B, Llama-3.2-1B for Llama-3.3-70B),
// run on this node with its own KV cache. Each sequence's draft cache
// follows the sequence: a call truncates it to what the target accepted
// and evaluates the new tokens together with the first draft step, so a
// step costs k small forward passes, every sequence of the call in the
// same batch.
type DraftModel struct {
	m      *model.Model
	cache  *kvcache.Cache
	vocab  int // the target's vocabulary: the rows the engine reads
	dvocab int // the draft model's logits row
	seqs   map[kvcache.SeqID]*draftSeq
	spare  []*draftSeq
	batch  model.Batch
	logits []float32 // [requests x dvocab]
	wide   []float32 // a draft row widened to the target's vocabulary
	rows   []int     // request -> output row of the step, -1 when not in it
}

type draftSeq struct {
	toks []int32 // the tokens in the draft cache, by position
}

var _ engine.Drafter = (*DraftModel)(nil)

// NewDraftModel drafts with m on its own cache (sized like the target's:
// the same context per sequence, as many sequences) for a target with a
// vocabulary of targetVocab tokens (see CheckVocab). A draft model whose
// cache cannot roll back (recurrent layers) is refused.
func NewDraftModel(m *model.Model, cache *kvcache.Cache, targetVocab int) (*DraftModel, error) {
	if err := engine.CheckTruncate(cache.Config()); err != nil {
		return nil, fmt.Errorf("a draft model must roll back its own cache after every step: %w", err)
	}
	return &DraftModel{m: m, cache: cache, vocab: targetVocab, dvocab: m.Cfg.Vocab,
		seqs: map[kvcache.SeqID]*draftSeq{}, wide: make([]float32, targetVocab)}, nil
}

// Hidden is 0: a draft model reads tokens only.
func (d *DraftModel) Hidden() int { return 0 }

// End drops seq's draft cache.
func (d *DraftModel) End(seq kvcache.SeqID) {
	d.cache.Drop(seq)
	if s := d.seqs[seq]; s != nil {
		s.toks = s.toks[:0]
		d.spare = append(d.spare, s)
		delete(d.seqs, seq)
	}
}

func (d *DraftModel) seq(id kvcache.SeqID) *draftSeq {
	s := d.seqs[id]
	if s == nil {
		if n := len(d.spare); n > 0 {
			s, d.spare = d.spare[n-1], d.spare[:n-1]
		} else {
			s = &draftSeq{}
		}
		d.seqs[id] = s
	}
	return s
}

// Draft runs the draft model over every request: the first step evaluates
// each sequence's tokens its cache lacks and picks the first draft, each
// later step one draft per sequence still short of its Max.
func (d *DraftModel) Draft(reqs []engine.DraftRequest) error {
	if cap(d.rows) < len(reqs) {
		d.rows = make([]int, len(reqs))
		d.logits = make([]float32, len(reqs)*d.dvocab)
	}
	d.rows = d.rows[:len(reqs)]
	d.batch.Reset()
	outs := 0
	for i := range reqs {
		r := &reqs[i]
		r.Out, r.Sampled = r.Out[:0], false
		d.rows[i] = -1
		L := len(r.Toks)
		if L == 0 || r.Max <= 0 {
			continue
		}
		s := d.seq(r.Seq)
		// Keep what the cache holds of Toks[:L-1]; the last token is
		// always evaluated (its logits give the first draft).
		c := 0
		for c < min(len(s.toks), L-1) && s.toks[c] == r.Toks[c] {
			c++
		}
		c = d.cache.ResumePoint(r.Seq, c)
		switch {
		case c == 0:
			d.cache.Drop(r.Seq)
		case c < d.cache.Len(r.Seq):
			if err := d.cache.Truncate(r.Seq, c); err != nil {
				return fmt.Errorf("draft model: %w", err)
			}
		}
		s.toks = append(s.toks[:c], r.Toks[c:]...)
		for j := c; j < L; j++ {
			d.batch.Add(r.Toks[j], int32(j), r.Seq, j == L-1)
		}
		d.rows[i] = outs
		outs++
	}
	for step := 0; outs > 0; step++ {
		if err := d.m.Forward(d.cache, &d.batch, d.logits[:outs*d.dvocab]); err != nil {
			return fmt.Errorf("draft model: %w", err)
		}
		d.batch.Reset()
		outs = 0
		for i := range reqs {
			r := &reqs[i]
			if d.rows[i] < 0 {
				continue
			}
			row := d.logits[d.rows[i]*d.dvocab : (d.rows[i]+1)*d.dvocab]
			tok := d.pick(r, row, step)
			r.Out = append(r.Out, tok)
			d.rows[i] = -1
			if len(r.Out) < r.Max {
				// Feed the draft for the next one.
				pos := len(r.Toks) + step
				d.batch.Add(tok, int32(pos), r.Seq, true)
				s := d.seqs[r.Seq]
				s.toks = append(s.toks, tok)
				d.rows[i] = outs
				outs++
			}
		}
	}
	return nil
}

// pick chooses draft i of r from a row of the draft model's logits: its
// argmax, or with a sampler a draw from the distribution the sampler's
// parameters make of it (written to r.Probs). Ids the target lacks are
// never drafted.
func (d *DraftModel) pick(r *engine.DraftRequest, row []float32, i int) int32 {
	n := min(d.vocab, d.dvocab)
	if r.Sampler == nil {
		best := 0
		for j := 1; j < n; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		return int32(best)
	}
	w := d.wide
	copy(w, row[:n])
	for j := n; j < len(w); j++ {
		w[j] = float32(math.Inf(-1))
	}
	q := r.Probs[i*d.vocab : (i+1)*d.vocab]
	r.Sampler.Probs(w, q)
	r.Sampled = true
	return r.Sampler.DrawWeights(q)
}

// CheckVocab refuses a draft model whose vocabulary is not the target's:
// the same tokenizer, the same token at every id both have, sizes that
// differ by at most 128 ids (padding, as llama.cpp allows), the same BOS
// and EOS.
func CheckVocab(target, draft *gguf.Model) error {
	tp, dp := target.Files[0].Path, draft.Files[0].Path
	tt, ok := target.Strings("tokenizer.ggml.tokens")
	if !ok {
		return fmt.Errorf("the target %s has no vocabulary (tokenizer.ggml.tokens) to compare a draft model with", tp)
	}
	dt, ok := draft.Strings("tokenizer.ggml.tokens")
	if !ok {
		return fmt.Errorf("the draft model %s has no vocabulary (tokenizer.ggml.tokens)", dp)
	}
	if diff := len(tt) - len(dt); diff > 128 || diff < -128 {
		return fmt.Errorf("the draft model %s has a vocabulary of %d tokens, the target %s one of %d: a draft model must share the target's vocabulary", dp, len(dt), tp, len(tt))
	}
	tm, _ := target.String("tokenizer.ggml.model")
	dm, _ := draft.String("tokenizer.ggml.model")
	if tm != dm {
		return fmt.Errorf("the draft model %s has a %q tokenizer, the target %s a %q one: a draft model must share the target's vocabulary", dp, dm, tp, tm)
	}
	for i := range min(len(tt), len(dt)) {
		if tt[i] != dt[i] {
			return fmt.Errorf("token %d is %q in the target %s but %q in the draft model %s: a draft model must share the target's vocabulary", i, tt[i], tp, dt[i], dp)
		}
	}
	for _, k := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"} {
		a, aok := target.Uint(k)
		b, bok := draft.Uint(k)
		if aok != bok || a != b {
			return fmt.Errorf("%s is %d in the target %s but %d in the draft model %s: a draft model must share the target's vocabulary", k, a, tp, b, dp)
		}
	}
	return nil
}
