package model

import (
	"braid/internal/kernels"
	"braid/internal/kvcache"
)

// MLA is multi-head latent attention in the absorbed form (DeepSeek-V2/V3):
//
//	q      = q_b · rms(q_a · h)  (or attn_q · h), per head nope | rope dims
//	c | kr = kv_a · h;  c = rms(c)·kv_a_norm;  kr = rope(kr)  (one per token)
//	score  = (k_b[h]·q_nope) · c_s + rope(q_rope) · kr_s, times Scale
//	o[h]   = v_b[h] · Σ_s p_s c_s;   out = attn_output · concat_h o[h]
//
// The cache keeps the one row c | kr per token (a shared K/V row: V is its
// first KVLora values), so the attention itself is multi-query attention
// over rows of KVLora+Rope values. Tensor parallel: the latent path (q_a,
// kv_a, their norms) and the latent cache are replicated on every rank;
// the heads split (q_b rows, k_b and v_b per head, attn_output columns).
type MLA struct {
	qa, qb, q kernels.Matrix // q through the low-rank path, or directly
	qaNorm    []float32
	kva       kernels.Matrix
	kvaNorm   []float32
	kb, vb    []kernels.Matrix // this rank's heads
	o         kernels.Matrix
	// DSA: the layer's own indexer (a full layer), and whether it attends
	// only to the selection (every layer of a DSA model).
	ix     *Indexer
	sparse bool
}

// mlaScratch is the latent path's step buffers.
type mlaScratch struct {
	qa, qfull, kv, qn, qabs, olat, vo, o []float32
}

func mlaScratchLen(c *Config, heads, B int) int {
	a := c.MLA
	return B * (a.QLora + heads*(a.Nope+a.Rope) + a.KVLora + a.Rope + a.Nope + 2*a.KVLora + a.VDim + heads*a.VDim)
}

func (ms *mlaScratch) alloc(c *Config, heads, B int) {
	a := c.MLA
	ms.qa = make([]float32, B*a.QLora)
	ms.qfull = make([]float32, B*heads*(a.Nope+a.Rope))
	ms.kv = make([]float32, B*(a.KVLora+a.Rope))
	ms.qn = make([]float32, B*a.Nope)
	ms.qabs = make([]float32, B*a.KVLora)
	ms.olat = make([]float32, B*a.KVLora)
	ms.vo = make([]float32, B*a.VDim)
	ms.o = make([]float32, B*heads*a.VDim)
}

// mla binds layer l's latent attention.
func (b *binder) mla(l int) *MLA {
	c, sh := b.c, b.sh
	a := c.MLA
	qk := a.Nope + a.Rope
	h0, h1 := sh.HeadLo, sh.HeadHi
	at := &MLA{}
	if a.QLora > 0 {
		at.qa = b.replicated(blk(l, "attn_q_a.weight"), c.Embd, a.QLora)
		at.qaNorm = b.norm(blk(l, "attn_q_a_norm.weight"), a.QLora)
		at.qb = b.column(blk(l, "attn_q_b.weight"), a.QLora, c.Heads*qk, h0*qk, h1*qk)
	} else {
		at.q = b.column(blk(l, "attn_q.weight"), c.Embd, c.Heads*qk, h0*qk, h1*qk)
	}
	at.kva = b.replicated(blk(l, "attn_kv_a_mqa.weight"), c.Embd, a.KVLora+a.Rope)
	at.kvaNorm = b.norm(blk(l, "attn_kv_a_norm.weight"), a.KVLora)
	at.kb = b.heads(blk(l, "attn_k_b.weight"), a.Nope, a.KVLora, c.Heads, h0, h1)
	at.vb = b.heads(blk(l, "attn_v_b.weight"), a.KVLora, a.VDim, c.Heads, h0, h1)
	at.o = b.row(blk(l, "attn_output.weight"), c.Heads*a.VDim, c.Embd, h0*a.VDim, h1*a.VDim)
	if x := a.Indexer; x != nil {
		at.sparse = true
		if x.Full[l] {
			at.ix = b.indexer(l)
		}
	}
	return at
}

// heads binds matrices [lo, hi) of a 3D per-head tensor [in, out, n],
// each a linear layer of its own (repacked where the kernels want it: a
// prompt's tokens meet each head's matrix together).
func (b *binder) heads(name string, in, out, n, lo, hi int) []kernels.Matrix {
	t := b.linearTensor(name, in, out, n)
	if t == nil {
		return nil
	}
	per := t.Size / int64(n)
	mats := make([]kernels.Matrix, hi-lo)
	for i := range mats {
		h := int64(lo + i)
		mats[i] = b.linear(rowsSrc(name, t.Type, h*per, in, 0, out), b.rowsOf(name, t.Type, t.Data[h*per:(h+1)*per], in, 0, out))
	}
	return mats
}

func (at *MLA) mix(m *Model, cache *kvcache.Cache, b *Batch, l int, h, out []float32) {
	c, s, ms := &m.Cfg, &m.s, &m.s.mla
	a := c.MLA
	n, E := len(b.Tokens), c.Embd
	nh := m.sh.Heads()
	if nh == 0 {
		clear(out)
		return
	}
	cl := l - m.sh.First
	qk, W, L := a.Nope+a.Rope, a.KVLora+a.Rope, a.KVLora
	half := c.Rope.Dims / 2

	// The queries of this rank's heads.
	if a.QLora > 0 {
		m.pool.MatMul(ms.qa[:n*a.QLora], &at.qa, h, n)
		for i := 0; i < n; i++ {
			r := ms.qa[i*a.QLora : (i+1)*a.QLora]
			kernels.RMSNorm(r, r, at.qaNorm, c.NormEps)
		}
		m.pool.MatMul(ms.qfull[:n*nh*qk], &at.qb, ms.qa[:n*a.QLora], n)
	} else {
		m.pool.MatMul(ms.qfull[:n*nh*qk], &at.q, h, n)
	}
	// The latent row of each token: normalised c, rotated k_rope; into
	// the cache (one row, shared by K and V; a DSA layer's indexer key
	// follows it).
	m.pool.MatMul(ms.kv[:n*W], &at.kva, h, n)
	for i := 0; i < n; i++ {
		row := ms.kv[i*W : (i+1)*W]
		kernels.RMSNorm(row[:L], row[:L], at.kvaNorm, c.NormEps)
		cos, sin := s.cos[i*half:(i+1)*half], s.sin[i*half:(i+1)*half]
		m.rope.Apply(row[L:], cos, sin)
		for hh := 0; hh < nh; hh++ {
			m.rope.Apply(ms.qfull[(i*nh+hh)*qk+a.Nope:(i*nh+hh+1)*qk], cos, sin)
		}
		if cache.Config().F32 {
			kr, _ := cache.RowF32(cl, b.Seq[i], int(b.Pos[i]))
			copy(kr[:W], row)
		} else {
			kr, _ := cache.RowF16(cl, b.Seq[i], int(b.Pos[i]))
			kernels.F32ToF16Row(kr[:W], row)
		}
	}
	if at.ix != nil {
		at.ix.keys(m, cache, b, cl, h, W)
		at.ix.selectPositions(m, cache, b, cl, ms.qa[:n*a.QLora], h, W)
	}
	// Absorb k_b into each head's query: q = (k_b[h]·q_nope) | q_rope, a
	// query against the latent rows. One token (decode): every head in
	// one job, reading q_nope from qfull and writing the queries in place.
	if n == 1 {
		m.pool.MatVecHeads(s.q[:nh*W], W, at.kb, ms.qfull[:nh*qk], qk)
		for hh := 0; hh < nh; hh++ {
			copy(s.q[hh*W+L:(hh+1)*W], ms.qfull[hh*qk+a.Nope:(hh+1)*qk])
		}
	} else {
		for hh := 0; hh < nh; hh++ {
			for i := 0; i < n; i++ {
				src := ms.qfull[(i*nh+hh)*qk:]
				copy(ms.qn[i*a.Nope:(i+1)*a.Nope], src[:a.Nope])
			}
			m.pool.MatMul(ms.qabs[:n*L], &at.kb[hh], ms.qn[:n*a.Nope], n)
			for i := 0; i < n; i++ {
				q := s.q[(i*nh+hh)*W : (i*nh+hh+1)*W]
				copy(q[:L], ms.qabs[i*L:(i+1)*L])
				copy(q[L:], ms.qfull[(i*nh+hh)*qk+a.Nope:(i*nh+hh+1)*qk])
			}
		}
	}
	m.cur.layer, m.cur.window, m.cur.sinks, m.cur.scale, m.cur.sparse = cl, 0, nil, a.Scale, at.sparse && !m.denseDSA
	m.growScores(b)
	m.pool.For(len(s.slots), m.attnFn)
	// s.att holds each head's Σ p·c (KVLora wide); v_b makes it a value.
	if n == 1 {
		m.pool.MatVecHeads(ms.o[:nh*a.VDim], a.VDim, at.vb, s.att[:nh*L], L)
	} else {
		for hh := 0; hh < nh; hh++ {
			for i := 0; i < n; i++ {
				copy(ms.olat[i*L:(i+1)*L], s.att[(i*nh+hh)*L:(i*nh+hh+1)*L])
			}
			m.pool.MatMul(ms.vo[:n*a.VDim], &at.vb[hh], ms.olat[:n*L], n)
			for i := 0; i < n; i++ {
				copy(ms.o[(i*nh+hh)*a.VDim:(i*nh+hh+1)*a.VDim], ms.vo[i*a.VDim:(i+1)*a.VDim])
			}
		}
	}
	m.pool.MatMul(out[:n*E], &at.o, ms.o[:n*nh*a.VDim], n)
}
