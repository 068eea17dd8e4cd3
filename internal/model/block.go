package model

import (
	"fmt"
	"math"

	"braid/internal/kernels"
	"braid/internal/kvcache"
)

// layer runs transformer block l (a global index) over the step's n tokens
// in m.s.x. Each collective runs on every rank, also on a rank whose slice of
// that part is empty: the group's all-reduces pair up in order.
func (m *Model) layer(cache *kvcache.Cache, b *Batch, l int) error {
	c, s, w := &m.Cfg, &m.s, &m.w.layers[l-m.sh.First]
	n, E := len(b.Tokens), c.Embd
	if err := m.attentionBlock(cache, b, l, w); err != nil {
		return err
	}
	if err := m.comm.AllReduceSum(s.tmp[:n*E]); err != nil {
		return fmt.Errorf("model: layer %d attention all-reduce: %w", l, err)
	}
	kernels.Add(s.x[:n*E], s.tmp[:n*E])

	for i := 0; i < n; i++ {
		kernels.RMSNorm(s.h[i*E:(i+1)*E], s.x[i*E:(i+1)*E], w.ffnNorm, c.NormEps)
	}
	switch {
	case c.Experts > 0 && m.sh.ExpFFHi > m.sh.ExpFFLo:
		m.moe(w, n)
	case c.Experts == 0 && m.sh.FFHi > m.sh.FFLo:
		m.ffn(&w.gate, &w.up, &w.down, s.h[:n*E], s.tmp[:n*E], n)
	default:
		clear(s.tmp[:n*E])
	}
	if err := m.comm.AllReduceSum(s.tmp[:n*E]); err != nil {
		return fmt.Errorf("model: layer %d FFN all-reduce: %w", l, err)
	}
	kernels.Add(s.x[:n*E], s.tmp[:n*E])
	return nil
}

// attentionBlock writes this rank's share of the attention output projection
// of layer l into m.s.tmp: the sum over its heads.
func (m *Model) attentionBlock(cache *kvcache.Cache, b *Batch, l int, w *layer) error {
	c, s := &m.Cfg, &m.s
	n, E := len(b.Tokens), c.Embd
	hd := c.HeadDim
	nh, nkv := m.sh.Heads(), m.sh.KVHeads()
	qdim, kvdim := nh*hd, nkv*hd
	half := c.Rope.Dims / 2
	if nh == 0 {
		clear(s.tmp[:n*E])
		return nil
	}
	cl := l - m.sh.First // the cache holds this stage's layers only

	for i := 0; i < n; i++ {
		kernels.RMSNorm(s.h[i*E:(i+1)*E], s.x[i*E:(i+1)*E], w.attnNorm, c.NormEps)
	}
	m.pool.MatMulShared(s.h[:n*E], n, kernels.MatOut{Dst: s.q[:n*qdim], W: &w.q},
		kernels.MatOut{Dst: s.k[:n*kvdim], W: &w.k}, kernels.MatOut{Dst: s.v[:n*kvdim], W: &w.v})
	for i := 0; i < n; i++ {
		q, k, v := s.q[i*qdim:(i+1)*qdim], s.k[i*kvdim:(i+1)*kvdim], s.v[i*kvdim:(i+1)*kvdim]
		if w.qBias != nil {
			kernels.Add(q, w.qBias)
			kernels.Add(k, w.kBias)
			kernels.Add(v, w.vBias)
		}
		cos, sin := s.cos[i*half:(i+1)*half], s.sin[i*half:(i+1)*half]
		for h := 0; h < nh; h++ {
			qh := q[h*hd : (h+1)*hd]
			if w.qNorm != nil {
				kernels.RMSNorm(qh, qh, w.qNorm, c.NormEps)
			}
			m.rope.Apply(qh, cos, sin)
		}
		for h := 0; h < nkv; h++ {
			kh := k[h*hd : (h+1)*hd]
			if w.kNorm != nil {
				kernels.RMSNorm(kh, kh, w.kNorm, c.NormEps)
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

	m.cur.layer = cl
	m.growScores(b)
	m.pool.For(len(s.slots), m.attnFn)

	m.pool.MatMul(s.tmp[:n*E], &w.o, s.att[:n*qdim], n)
	return nil
}

// ffn is the SwiGLU feed-forward: down(silu(gate·h) * up·h), h [n x embd]
// into out [n x embd].
func (m *Model) ffn(gate, up, down *kernels.Matrix, h, out []float32, n int) {
	s := &m.s
	ff := gate.Rows
	m.pool.MatMulShared(h, n, kernels.MatOut{Dst: s.gate[:n*ff], W: gate}, kernels.MatOut{Dst: s.up[:n*ff], W: up})
	m.pool.SwiGLU(s.gate[:n*ff], s.gate[:n*ff], s.up[:n*ff])
	m.pool.MatMul(out, down, s.gate[:n*ff], n)
}

// moe routes each token to its top experts: softmax over the router's
// logits, the ExpertsUsed largest (lowest index first on ties), weights
// renormalised when the model says so; each expert then runs once over all
// the tokens routed to it.
func (m *Model) moe(w *layer, n int) {
	c, s := &m.Cfg, &m.s
	E, X, K := c.Embd, c.Experts, c.ExpertsUsed
	m.pool.MatMul(s.probs[:n*X], &w.router, s.h[:n*E], n)
	for i := 0; i < n; i++ {
		p := s.probs[i*X : (i+1)*X]
		kernels.Softmax(p)
		sel, selW := s.sel[i*K:(i+1)*K], s.selW[i*K:(i+1)*K]
		for k := 0; k < K; k++ {
			best := -1
			for e := 0; e < X; e++ {
				if taken(sel[:k], e) {
					continue
				}
				if best < 0 || p[e] > p[best] {
					best = e
				}
			}
			sel[k], selW[k] = int32(best), p[best]
		}
		if c.NormTopKProb {
			var sum float32
			for _, v := range selW {
				sum += v
			}
			for k := range selW {
				selW[k] /= sum
			}
		}
	}
	out := s.tmp[:n*E]
	clear(out)
	for e := 0; e < X; e++ {
		cnt := 0
		for i := 0; i < n; i++ {
			for k := 0; k < K; k++ {
				if s.sel[i*K+k] == int32(e) {
					s.expTok[cnt] = int32(i*K + k)
					copy(s.hx[cnt*E:(cnt+1)*E], s.h[i*E:(i+1)*E])
					cnt++
				}
			}
		}
		if cnt == 0 {
			continue
		}
		m.ffn(&w.gateExps[e], &w.upExps[e], &w.downExps[e], s.hx[:cnt*E], s.ex[:cnt*E], cnt)
		for j := 0; j < cnt; j++ {
			ik := int(s.expTok[j])
			i := ik / K
			kernels.AxpyF32(out[i*E:(i+1)*E], s.selW[ik], s.ex[j*E:(j+1)*E])
		}
	}
}

func taken(sel []int32, e int) bool {
	for _, s := range sel {
		if int(s) == e {
			return true
		}
	}
	return false
}

// growScores makes every slot's score buffer long enough for the longest
// sequence in the batch (allocating only when contexts grow).
func (m *Model) growScores(b *Batch) {
	longest := 0
	for _, p := range b.Pos {
		longest = max(longest, int(p)+1)
	}
	for i := range m.s.slots {
		if len(m.s.slots[i].scores) < longest {
			m.s.slots[i].scores = make([]float32, max(longest, 2*len(m.s.slots[i].scores)))
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
func (m *Model) attention(lo, hi int) {
	c, s := &m.Cfg, &m.s
	cache, b, l := m.cur.cache, m.cur.batch, m.cur.layer
	n := m.cur.n
	hd := c.HeadDim
	group := c.Heads / c.KVHeads
	nh, h0, kv0 := m.sh.Heads(), m.sh.HeadLo, m.sh.KVLo
	kvdim := m.sh.KVHeads() * hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	items := n * nh
	slots := len(s.slots)
	f32 := cache.Config().F32
	bs := cache.Config().BlockSize
	for slot := lo; slot < hi; slot++ {
		sc := &s.slots[slot]
		for it := slot * items / slots; it < (slot+1)*items/slots; it++ {
			i, h := it/nh, it%nh
			kvh := (h0+h)/group - kv0 // this rank's KV heads start at KV head kv0
			seq, pos := b.Seq[i], int(b.Pos[i])
			q := s.q[i*nh*hd+h*hd : i*nh*hd+(h+1)*hd]
			table := cache.Blocks(seq)
			scores := sc.scores[:pos+1]
			// Block by block: one block lookup per BlockSize positions,
			// then this head's rows at a fixed stride.
			if f32 {
				for b0 := 0; b0 <= pos; b0 += bs {
					kb := cache.KF32(l, table[b0/bs])
					for t, o := b0, kvh*hd; t < min(b0+bs, pos+1); t, o = t+1, o+kvdim {
						scores[t] = kernels.DotF32(kb[o:o+hd], q) * scale
					}
				}
			} else {
				kernels.F32ToF16Row(sc.qh16, q)
				kernels.F16ToF32Row(sc.qh, sc.qh16)
				for b0 := 0; b0 <= pos; b0 += bs {
					kb := cache.KF16(l, table[b0/bs])
					kernels.DotF16Rows(scores[b0:min(b0+bs, pos+1)], kb[kvh*hd:], kvdim, sc.qh, scale)
				}
			}
			kernels.Softmax(scores)
			out := s.att[i*nh*hd+h*hd : i*nh*hd+(h+1)*hd]
			clear(out)
			if f32 {
				for b0 := 0; b0 <= pos; b0 += bs {
					vb := cache.VF32(l, table[b0/bs])
					for t, o := b0, kvh*hd; t < min(b0+bs, pos+1); t, o = t+1, o+kvdim {
						kernels.AxpyF32(out, scores[t], vb[o:o+hd])
					}
				}
			} else {
				// The probabilities at half precision, as ggml's F16
				// product rounds them (exact through the row converters).
				kernels.F32ToF16Row(sc.scores16[:pos+1], scores)
				kernels.F16ToF32Row(scores, sc.scores16[:pos+1])
				for b0 := 0; b0 <= pos; b0 += bs {
					vb := cache.VF16(l, table[b0/bs])
					kernels.AxpyF16Rows(out, scores[b0:min(b0+bs, pos+1)], vb[kvh*hd:], kvdim)
				}
			}
		}
	}
}
