package model

import (
	"math"

	"braid/internal/kernels"
	"braid/internal/kvcache"
)

// AttnOpts are the variants of grouped-query attention the families use.
type AttnOpts struct {
	QKVBias bool // biases on the Q, K and V projections
	OutBias bool // a bias on the output projection (added by one rank)
	// QKNorm normalises each query and key head (RMS, one weight per head
	// dimension) before the rotation.
	QKNorm bool
	// Sinks adds a learned logit per head to every softmax row: it takes
	// probability mass and contributes no value.
	Sinks bool
	// Window is the sliding window (0: every earlier position).
	Window int
	// OutGate: attn_q yields, per head, the query and then an output gate;
	// each head's output is multiplied by sigmoid(gate) (Qwen3.5).
	OutGate bool
}

// Attention is grouped-query (or multi-head, or multi-query) attention over
// this rank's heads: column-parallel Q, K, V (the rank's query heads and the
// KV heads they read), rotary embedding, causal softmax attention against
// the KV cache, and the row-parallel output projection.
type Attention struct {
	opt                 AttnOpts
	q, k, v, o          kernels.Matrix
	qBias, kBias, vBias []float32
	oBias               []float32 // on the group's rank 0 only
	qNorm, kNorm        []float32
	sinks               []float32 // this rank's heads
}

// attention binds layer l's attention block.
func (b *binder) attention(l int, opt AttnOpts) *Attention {
	c, sh := b.c, b.sh
	hd := c.HeadDim
	qdim, kvdim := c.Heads*hd, c.KVHeads*hd
	q0, q1, k0, k1 := sh.HeadLo*hd, sh.HeadHi*hd, sh.KVLo*hd, sh.KVHi*hd
	a := &Attention{opt: opt}
	if opt.OutGate {
		a.q = b.column(blk(l, "attn_q.weight"), c.Embd, 2*qdim, 2*q0, 2*q1)
	} else {
		a.q = b.column(blk(l, "attn_q.weight"), c.Embd, qdim, q0, q1)
	}
	a.k = b.column(blk(l, "attn_k.weight"), c.Embd, kvdim, k0, k1)
	a.v = b.column(blk(l, "attn_v.weight"), c.Embd, kvdim, k0, k1)
	a.o = b.row(blk(l, "attn_output.weight"), qdim, c.Embd, q0, q1)
	if opt.QKVBias {
		a.qBias = b.vector(blk(l, "attn_q.bias"), qdim, false, q0, q1)
		a.kBias = b.vector(blk(l, "attn_k.bias"), kvdim, false, k0, k1)
		a.vBias = b.vector(blk(l, "attn_v.bias"), kvdim, false, k0, k1)
	}
	if opt.OutBias {
		a.oBias = b.rowBias(blk(l, "attn_output.bias"), c.Embd)
	}
	if opt.QKNorm {
		a.qNorm = b.norm(blk(l, "attn_q_norm.weight"), hd)
		a.kNorm = b.norm(blk(l, "attn_k_norm.weight"), hd)
	}
	if opt.Sinks {
		a.sinks = b.vector(blk(l, "attn_sinks.weight"), c.Heads, false, sh.HeadLo, sh.HeadHi)
	}
	return a
}

// mix writes this rank's share of the attention output of layer l into out:
// the sum over its heads (plus the output bias on rank 0).
func (a *Attention) mix(m *Model, cache *kvcache.Cache, b *Batch, l int, h, out []float32) {
	c, s := &m.Cfg, &m.s
	n, E := len(b.Tokens), c.Embd
	hd := c.HeadDim
	nh, nkv := m.sh.Heads(), m.sh.KVHeads()
	qdim, kvdim := nh*hd, nkv*hd
	half := c.Rope.Dims / 2
	if nh == 0 {
		clear(out)
		a.addOutBias(out, n, E)
		return
	}
	cl := l - m.sh.First // the cache holds this stage's layers only

	if a.opt.OutGate {
		// Per head [query | gate]: the queries to s.q, the gates aside.
		m.pool.MatMulShared(h, n, kernels.MatOut{Dst: s.qraw[:2*n*qdim], W: &a.q},
			kernels.MatOut{Dst: s.k[:n*kvdim], W: &a.k}, kernels.MatOut{Dst: s.v[:n*kvdim], W: &a.v})
		for i := 0; i < n*nh; i++ {
			copy(s.q[i*hd:(i+1)*hd], s.qraw[2*i*hd:(2*i+1)*hd])
			copy(s.qgate[i*hd:(i+1)*hd], s.qraw[(2*i+1)*hd:(2*i+2)*hd])
		}
	} else {
		m.pool.MatMulShared(h, n, kernels.MatOut{Dst: s.q[:n*qdim], W: &a.q},
			kernels.MatOut{Dst: s.k[:n*kvdim], W: &a.k}, kernels.MatOut{Dst: s.v[:n*kvdim], W: &a.v})
	}
	for i := 0; i < n; i++ {
		q, k, v := s.q[i*qdim:(i+1)*qdim], s.k[i*kvdim:(i+1)*kvdim], s.v[i*kvdim:(i+1)*kvdim]
		if a.qBias != nil {
			kernels.Add(q, a.qBias)
			kernels.Add(k, a.kBias)
			kernels.Add(v, a.vBias)
		}
		cos, sin := s.cos[i*half:(i+1)*half], s.sin[i*half:(i+1)*half]
		for h := 0; h < nh; h++ {
			qh := q[h*hd : (h+1)*hd]
			if a.qNorm != nil {
				kernels.RMSNorm(qh, qh, a.qNorm, c.NormEps)
			}
			m.rope.Apply(qh, cos, sin)
		}
		for h := 0; h < nkv; h++ {
			kh := k[h*hd : (h+1)*hd]
			if a.kNorm != nil {
				kernels.RMSNorm(kh, kh, a.kNorm, c.NormEps)
			}
			m.rope.Apply(kh, cos, sin)
		}
		// The step's keys and values go to the cache first, so attention
		// reads every position, this step's included, from one place.
		if cache.Config().F32 {
			kr, vr := cache.RowF32(cl, b.Seq[i], int(b.Pos[i]))
			copy(kr, k)
			copy(vr, v)
		} else {
			kr, vr := cache.RowF16(cl, b.Seq[i], int(b.Pos[i]))
			kernels.F32ToF16Row(kr, k)
			kernels.F32ToF16Row(vr, v)
		}
	}

	m.cur.layer, m.cur.window, m.cur.sinks, m.cur.scale, m.cur.sparse = cl, a.opt.Window, a.sinks, float32(1/math.Sqrt(float64(hd))), false
	m.growScores(b)
	m.pool.For(len(s.slots), m.attnFn)
	if a.opt.OutGate {
		for i, g := range s.qgate[:n*qdim] {
			s.att[i] *= sigmoid32(g)
		}
	}

	m.pool.MatMul(out, &a.o, s.att[:n*qdim], n)
	a.addOutBias(out, n, E)
}

func (a *Attention) addOutBias(out []float32, n, E int) {
	if a.oBias == nil {
		return
	}
	for i := 0; i < n; i++ {
		kernels.Add(out[i*E:(i+1)*E], a.oBias)
	}
}

// growScores makes every slot's score buffer long enough for the longest
// sequence in the batch, plus one for a sink logit (allocating only when
// contexts grow).
func (m *Model) growScores(b *Batch) {
	longest := 0
	for _, p := range b.Pos {
		longest = max(longest, int(p)+2)
	}
	for i := range m.s.slots {
		if len(m.s.slots[i].scores) < longest {
			m.s.slots[i].scores = make([]float32, max(longest, 2*len(m.s.slots[i].scores)))
			m.s.slots[i].scores1 = make([]float32, len(m.s.slots[i].scores))
			m.s.slots[i].scores16 = make([]uint16, len(m.s.slots[i].scores))
		}
	}
}

// attention computes the attention output of a share of the (token, head)
// pairs of the step; slot indices [lo, hi) come from Pool.For, so each slot's
// scratch is used by one thread at a time.
//
// With an F16 cache it rounds the query and the probabilities to half
// precision as ggml's F16 matrix products do, so results track llama.cpp's.
// A sliding window starts each row at the window's first position (the
// positions before it are masked to -Inf in llama.cpp, which adds nothing);
// a sink is one more logit at the end of the row, in the softmax only.
func (m *Model) attention(lo, hi int) {
	c, s := &m.Cfg, &m.s
	cache, b, l := m.cur.cache, m.cur.batch, m.cur.layer
	n := m.cur.n
	hd, vd := c.HeadDim, c.ValueDim
	group := c.Heads / c.KVHeads
	nh, h0, kv0 := m.sh.Heads(), m.sh.HeadLo, m.sh.KVLo
	kvdim := m.sh.KVHeads() * hd
	scale, sinks := m.cur.scale, m.cur.sinks
	items := n * nh
	slots := len(s.slots)
	f32 := cache.Config().F32
	bs := cache.Config().BlockSize
	window := m.cur.window
	sparse, topK := m.cur.sparse, 0
	if sparse {
		topK = c.MLA.Indexer.TopK
	}
	// Two heads that share a KV head run their scores together on an F16
	// cache (each key row converted once for both, each head's bits as
	// alone); the probabilities and values stay per head.
	per := 1
	if attnPairs && !f32 && !sparse && group%2 == 0 && h0%2 == 0 && nh%2 == 0 {
		per = 2
	}
	units := items / per
	for slot := lo; slot < hi; slot++ {
		sc := &s.slots[slot]
		for u := slot * units / slots; u < (slot+1)*units/slots; u++ {
			i, h := u/(nh/per), u%(nh/per)*per
			kvh := (h0+h)/group - kv0 // this rank's KV heads start at KV head kv0
			seq, pos := b.Seq[i], int(b.Pos[i])
			start := 0
			if window > 0 {
				start = max(0, pos-window+1)
			}
			q := s.q[i*nh*hd+h*hd : i*nh*hd+(h+1)*hd]
			table, ring := cache.Table(l, seq)
			out := s.att[i*nh*vd+h*vd : i*nh*vd+(h+1)*vd]
			if sparse {
				m.sparseHead(sc, cache, l, table, ring, kvh*hd, m.s.dsa.sel[i*topK:i*topK+int(m.s.dsa.cnt[i])], q, out, scale, f32)
				continue
			}
			// Block by block: one block lookup per BlockSize positions,
			// then this head's rows at a fixed stride.
			first := start - start%bs
			switch {
			case f32:
				for b0 := first; b0 <= pos; b0 += bs {
					kb := cache.KF32(l, blockOf(table, ring, b0/bs))
					t0 := max(b0, start)
					for t, o := t0, (t0-b0)*kvdim+kvh*hd; t < min(b0+bs, pos+1); t, o = t+1, o+kvdim {
						sc.scores[t] = kernels.DotF32(kb[o:o+hd], q) * scale
					}
				}
			case per == 2:
				q1 := s.q[i*nh*hd+(h+1)*hd : i*nh*hd+(h+2)*hd]
				kernels.F32ToF16Row(sc.qh16, q)
				kernels.F16ToF32Row(sc.qh, sc.qh16)
				kernels.F32ToF16Row(sc.qh16, q1)
				kernels.F16ToF32Row(sc.qh1, sc.qh16)
				for b0 := first; b0 <= pos; b0 += bs {
					kb := cache.KF16(l, blockOf(table, ring, b0/bs))
					t0, t1 := max(b0, start), min(b0+bs, pos+1)
					kernels.DotF16Rows2(sc.scores[t0:t1], sc.scores1[t0:t1], kb[(t0-b0)*kvdim+kvh*hd:], kvdim, sc.qh, sc.qh1, scale)
				}
			default:
				kernels.F32ToF16Row(sc.qh16, q)
				kernels.F16ToF32Row(sc.qh, sc.qh16)
				for b0 := first; b0 <= pos; b0 += bs {
					kb := cache.KF16(l, blockOf(table, ring, b0/bs))
					t0 := max(b0, start)
					kernels.DotF16Rows(sc.scores[t0:min(b0+bs, pos+1)], kb[(t0-b0)*kvdim+kvh*hd:], kvdim, sc.qh, scale)
				}
			}
			hr := headRows{cache: cache, l: l, table: table, ring: ring, first: first, start: start, pos: pos, voff: kvh * hd, f32: f32}
			hr.values(sc, sc.scores, sinks, h, out)
			if per == 2 {
				hr.values(sc, sc.scores1, sinks, h+1, s.att[i*nh*vd+(h+1)*vd:i*nh*vd+(h+2)*vd])
			}
		}
	}
}

// attnPairs lets heads run in pairs (TestAttentionPairsBits turns it off
// to compare).
var attnPairs = true

// headRows is where one (token, head)'s cached rows lie: the sequence's
// block table in layer l, the first block's position, the row's first and
// last positions, and the head's offset in a value row.
type headRows struct {
	cache             *kvcache.Cache
	l                 int
	table             []int32
	ring              int
	first, start, pos int
	voff              int
	f32               bool
}

// values turns a head's scores[start:pos+1] (and its sink, if any, at
// pos+1) into probabilities and sets out to their weighted sum of the
// cached value rows.
func (r *headRows) values(sc *attnScratch, scores []float32, sinks []float32, h int, out []float32) {
	cache, l, table, ring, first, start, pos := r.cache, r.l, r.table, r.ring, r.first, r.start, r.pos
	bs, kvdim, vd := cache.Config().BlockSize, cache.Config().KVDim, len(out)
	row := scores[start : pos+1]
	if sinks != nil {
		scores[pos+1] = sinks[h]
		kernels.Softmax(scores[start : pos+2])
	} else {
		kernels.Softmax(row)
	}
	clear(out)
	if r.f32 {
		for b0 := first; b0 <= pos; b0 += bs {
			vb := cache.VF32(l, blockOf(table, ring, b0/bs))
			t0 := max(b0, start)
			for t, o := t0, (t0-b0)*kvdim+r.voff; t < min(b0+bs, pos+1); t, o = t+1, o+kvdim {
				kernels.AxpyF32(out, scores[t], vb[o:o+vd])
			}
		}
		return
	}
	// The probabilities at half precision, as ggml's F16 product rounds
	// them (exact through the row converters).
	kernels.F32ToF16Row(sc.scores16[start:pos+1], row)
	kernels.F16ToF32Row(row, sc.scores16[start:pos+1])
	for b0 := first; b0 <= pos; b0 += bs {
		vb := cache.VF16(l, blockOf(table, ring, b0/bs))
		t0 := max(b0, start)
		kernels.AxpyF16Rows(out, scores[t0:min(b0+bs, pos+1)], vb[(t0-b0)*kvdim+r.voff:], kvdim)
	}
}

// blockOf is block i of a sequence in a table from kvcache.Table: a ring
// (windowed layers) wraps.
func blockOf(table []int32, ring, i int) int32 {
	if ring > 0 {
		i %= ring
	}
	return table[i]
}

// sparseHead is one (token, head) of sparse attention: only the positions
// sel (ascending, from the indexer) are read. The result equals the dense
// computation with every other position masked to -Inf: those add exact
// zeros to the softmax sum and to the value sum.
func (m *Model) sparseHead(sc *attnScratch, cache *kvcache.Cache, l int, table []int32, ring, koff int, sel []int32, q, out []float32, scale float32, f32 bool) {
	bs := cache.Config().BlockSize
	kvdim := cache.Config().KVDim
	hd := len(q)
	scores := sc.scores[:len(sel)]
	if !f32 {
		kernels.F32ToF16Row(sc.qh16, q)
		kernels.F16ToF32Row(sc.qh, sc.qh16)
	}
	for j, t := range sel {
		blk := blockOf(table, ring, int(t)/bs)
		o := int(t)%bs*kvdim + koff
		if f32 {
			scores[j] = kernels.DotF32(cache.KF32(l, blk)[o:o+hd], q) * scale
		} else {
			scores[j] = kernels.DotF16(cache.KF16(l, blk)[o:o+hd], sc.qh) * scale
		}
	}
	kernels.Softmax(scores)
	clear(out)
	vd := len(out)
	if !f32 {
		kernels.F32ToF16Row(sc.scores16[:len(sel)], scores)
		kernels.F16ToF32Row(scores, sc.scores16[:len(sel)])
	}
	for j, t := range sel {
		blk := blockOf(table, ring, int(t)/bs)
		o := int(t)%bs*kvdim + koff
		if f32 {
			kernels.AxpyF32(out, scores[j], cache.VF32(l, blk)[o:o+vd])
		} else {
			kernels.AxpyF16(out, scores[j], cache.VF16(l, blk)[o:o+vd])
		}
	}
}
