package model

import (
	"fmt"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/quant"
)

// The MTP (NextN) head some families append after the trunk (glm4moe,
// qwen35, deepseek2-style GLM-4.7-Flash): a draft of the token after next,
// for speculative decoding. For input token x_k at position k and the
// trunk's final-normed hidden state h of position k-1 (zeros at k = 0):
//
//	z = eh_proj · concat(rms(embed(x_k))·enorm, rms(h)·hnorm)
//	z = the NextN decoder block (its own KV cache)
//	logits = head · rms(z)·shared_head_norm
//
// embed and head are nextn.embed_tokens / nextn.shared_head_head when the
// file has them, else the trunk's token_embd and output.
type mtpHead struct {
	layer        int // the block's GGUF index (after the trunk)
	embed        *gguf.Tensor
	embedRow     int64
	enorm, hnorm []float32
	ehProj       kernels.Matrix // replicated: [2E -> E]
	block        *Layer
	headNorm     []float32
	head         kernels.Matrix // this rank's vocabulary rows
	in           []float32      // [MaxBatch x 2E] scratch
}

// bindMTP binds the first NextN block (the last stage only: it reads the
// trunk's final state).
func bindMTP(b *binder, fam *family, w *weights) *mtpHead {
	c, sh := b.c, b.sh
	l := c.Layers
	h := &mtpHead{layer: l}
	name := func(s string) string { return blk(l, "nextn."+s) }
	if b.has(name("embed_tokens.weight")) {
		h.embed = b.tensor(name("embed_tokens.weight"), false, c.Embd, c.Vocab)
		if h.embed != nil {
			b.bytes += h.embed.Size
			h.embedRow, _ = h.embed.Type.RowBytes(int64(c.Embd))
		}
	} else {
		h.embed, h.embedRow = w.embed, w.embedRow
	}
	h.enorm = b.norm(name("enorm.weight"), c.Embd)
	h.hnorm = b.norm(name("hnorm.weight"), c.Embd)
	h.ehProj = b.replicated(name("eh_proj.weight"), 2*c.Embd, c.Embd)
	h.block = fam.layer(b, l)
	h.headNorm = b.norm(name("shared_head_norm.weight"), c.Embd)
	if b.has(name("shared_head_head.weight")) {
		h.head = b.column(name("shared_head_head.weight"), c.Embd, c.Vocab, sh.VocabLo, sh.VocabHi)
	} else {
		h.head = w.output
	}
	return h
}

// Head is the output head alone over final-normed hidden states (as
// ForwardHidden returns them, Cfg.Embd values each): this rank's
// vocabulary slice of each row's logits, one product per row, so a row's
// logits are bit for bit those of a Forward that outputs that token alone.
// (A drafter that reads every prompt position's state has the prompt
// evaluated with every row an output; this gives its last row the logits
// a plain prefill gives.)
func (m *Model) Head(hidden, logits []float32) error {
	E, V := m.Cfg.Embd, m.sh.Vocab()
	if len(hidden)%E != 0 || len(logits) < len(hidden)/E*V {
		return fmt.Errorf("%w: %d hidden values and %d logits for rows of %d and %d", ErrBadBatch, len(hidden), len(logits), E, V)
	}
	if !m.sh.LastStage(&m.Cfg) || m.w.output.Rows == 0 {
		return nil
	}
	for r := 0; r < len(hidden)/E; r++ {
		m.pool.MatMul(logits[r*V:(r+1)*V], &m.w.output, hidden[r*E:(r+1)*E], 1)
	}
	return nil
}

// HasMTP reports whether the model was loaded with its MTP head.
func (m *Model) HasMTP() bool { return m.mtp != nil }

// NewMTPCache makes the MTP block's own KV cache.
func (m *Model) NewMTPCache(sz CacheSize) (*kvcache.Cache, error) {
	if m.mtp == nil {
		return nil, fmt.Errorf("model: no MTP head loaded (Options.MTP, on a model with nextn_predict_layers)")
	}
	return kvcache.New(mtpCacheConfig(&m.Cfg, &m.sh, sz))
}

func mtpCacheConfig(c *Config, sh *Shard, sz CacheSize) kvcache.Config {
	const bs = 32
	return kvcache.Config{Layers: 1, KVDim: max(sh.KVHeads()*c.HeadDim, 1), BlockSize: bs,
		Blocks: (sz.Positions + bs - 1) / bs, F32: sz.F32}
}

// headShard is the MTP head alone: every head, FFN column and logit, and
// no trunk layer (First = Last = Layers, so the stage is the last one and
// not the first).
func headShard(c *Config) Shard {
	sh := FullShard(c)
	sh.First = c.Layers
	return sh
}

// NewMTPHead binds f's MTP head whole, without the trunk: the NextN block,
// its embedding and shared head (or the trunk's token_embd and output,
// read whole) and the output head over every logit. A split model's
// coordinator drafts with it while the trunk's layers and vocabulary are
// spread over the ranks: the head then needs only the trunk's final-normed
// hidden states. ForwardMTP, ForwardMTPHidden, Head and NewMTPCache run
// on it; Forward refuses (it holds no trunk layer).
func NewMTPHead(f *gguf.Model, pool *kernels.Pool, maxBatch int) (*Model, error) {
	c, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	if c.NextN <= 0 {
		return nil, fmt.Errorf("model: %s (%s) has no MTP head (no nextn_predict_layers)", f.Files[0].Path, c.Arch)
	}
	sh := headShard(c)
	w, _, err := bindWeights(f, c, &sh, false, true)
	if err != nil {
		return nil, err
	}
	if w.mtp == nil || w.output.Rows != c.Vocab {
		return nil, fmt.Errorf("model: %s: the MTP head or the output head did not bind", f.Files[0].Path)
	}
	return assemble(f, c, pool, Single{}, Options{MaxBatch: maxBatch}, sh, w), nil
}

// MTPHeadSize is what NewMTPHead adds to a rank that holds shard on (the
// first stage: it holds the token embedding, which the head's input and a
// tied output head read): the head's weights, except the rows of the
// output head that on's vocabulary slice holds already; its KV cache for
// sz; and its step scratch for maxBatch tokens with threads threads, plus
// the drafter's rows of logits and states.
type MTPHeadSize struct {
	Weights, KV, Scratch int64
}

// MTPHeadBytes sizes the MTP head NewMTPHead binds on a rank holding on,
// binding nothing.
func MTPHeadBytes(f *gguf.Model, c *Config, on *Shard, sz CacheSize, maxBatch, threads int) (MTPHeadSize, error) {
	if c.NextN <= 0 {
		return MTPHeadSize{}, fmt.Errorf("model: %s has no MTP head (no nextn_predict_layers)", c.Arch)
	}
	if !on.FirstStage() {
		return MTPHeadSize{}, fmt.Errorf("model: the MTP head goes with the first stage (it reads the token embedding), not %s", on.String())
	}
	sh := headShard(c)
	cc := *c
	w, n, err := bindWeights(f, &cc, &sh, true, true)
	if err != nil {
		return MTPHeadSize{}, err
	}
	if w.mtp == nil {
		return MTPHeadSize{}, fmt.Errorf("model: the MTP head of %s did not bind", c.Arch)
	}
	// The output head's rows already resident on the rank: all of a
	// tied head (the embedding), on's slice of an untied one.
	head := "output.weight"
	lo, hi := 0, 0
	if _, ok := f.Tensor(head); !ok {
		head, lo, hi = "token_embd.weight", 0, c.Vocab
	} else if on.LastStage(c) {
		lo, hi = on.VocabLo, on.VocabHi
	}
	if t, ok := f.Tensor(head); ok && hi > lo {
		if rb, err := t.Type.RowBytes(int64(c.Embd)); err == nil {
			n -= rb * int64(hi-lo)
		}
	}
	B := int64(maxBatch)
	if B <= 0 {
		B = 512
	}
	drafter := 4 * B * (int64(c.Vocab) + 4*int64(c.Embd)) // logits, states in and out, chained states
	return MTPHeadSize{
		Weights: n,
		KV:      KVBytes(mtpCacheConfig(c, &sh, sz)),
		Scratch: ScratchBytes(c, &sh, int(B), threads, sz.Ctx) + 4*B*2*int64(c.Embd) + drafter,
	}, nil
}

// ForwardMTP runs the MTP head over b (at most MaxBatch tokens, positions
// continuing cache, the MTP cache): b.Tokens[i] with hprev[i] (Cfg.Embd
// values, the trunk's final-normed state of the position before), writing
// the logits of the output tokens (this rank's vocabulary slice).
func (m *Model) ForwardMTP(cache *kvcache.Cache, b *Batch, hprev, logits []float32) error {
	return m.ForwardMTPHidden(cache, b, hprev, logits, nil)
}

// ForwardMTPHidden is ForwardMTP that also writes, when hidden is not nil,
// each output token's post-norm state (rms(z)·shared_head_norm, what the
// head multiplies; Cfg.Embd values): the hprev of a chained draft.
func (m *Model) ForwardMTPHidden(cache *kvcache.Cache, b *Batch, hprev, logits, hidden []float32) error {
	h := m.mtp
	if h == nil {
		return fmt.Errorf("model: no MTP head loaded")
	}
	c, s := &m.Cfg, &m.s
	n, E := len(b.Tokens), c.Embd
	if n > m.maxBatch || len(b.Pos) != n || len(b.Seq) != n || len(b.Output) != n || len(hprev) < n*E {
		return fmt.Errorf("%w: MTP batch of %d tokens (at most %d), %d positions, %d hidden values", ErrBadBatch, n, m.maxBatch, len(b.Pos), len(hprev))
	}
	if want := b.Outputs() * m.sh.Vocab(); len(logits) < want {
		return fmt.Errorf("%w: logits buffer holds %d values, need %d", ErrBadBatch, len(logits), want)
	}
	if want := b.Outputs() * E; hidden != nil && len(hidden) < want {
		return fmt.Errorf("%w: hidden-state buffer holds %d values, need %d", ErrBadBatch, len(hidden), want)
	}
	if err := m.checkBatch(cache, b); err != nil {
		return err
	}
	if err := reserveStep(cache, b); err != nil {
		return fmt.Errorf("model: MTP head: %w", err)
	}
	half := c.Rope.Dims / 2
	for i, tok := range b.Tokens {
		in := h.in[i*2*E : (i+1)*2*E]
		row := h.embed.Data[int64(tok)*h.embedRow : int64(tok+1)*h.embedRow]
		if err := quant.Dequantize(h.embed.Type, row, in[:E]); err != nil {
			return fmt.Errorf("model: MTP embedding of token %d: %w", tok, err)
		}
		kernels.RMSNorm(in[:E], in[:E], h.enorm, c.NormEps)
		kernels.RMSNorm(in[E:], hprev[i*E:(i+1)*E], h.hnorm, c.NormEps)
		m.ropeAt(int(b.Pos[i]), s.cos[i*half:(i+1)*half], s.sin[i*half:(i+1)*half])
	}
	m.pool.MatMul(s.x[:n*E], &h.ehProj, h.in[:n*2*E], n)
	// The block's cache is layer 0 of the MTP cache: run it as if this
	// shard started at the block.
	first := m.sh.First
	m.sh.First = h.layer
	m.cur.cache, m.cur.n, m.cur.batch = cache, n, b
	err := m.runLayer(cache, b, h.layer, h.block)
	m.sh.First = first
	if err != nil {
		return err
	}
	out := 0
	for i, o := range b.Output {
		if o {
			kernels.RMSNorm(s.h[out*E:(out+1)*E], s.x[i*E:(i+1)*E], h.headNorm, c.NormEps)
			out++
		}
	}
	if out > 0 && h.head.Rows > 0 {
		m.pool.MatMul(logits, &h.head, s.h, out)
	}
	if hidden != nil {
		copy(hidden, s.h[:out*E])
	}
	return m.commit(cache, b)
}
