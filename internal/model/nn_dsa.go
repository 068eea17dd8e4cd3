package model

import (
	"math"
	"math/bits"
	"slices"

	"braid/internal/kernels"
	"braid/internal/kvcache"
)

// IndexerConfig is DeepSeek sparse attention's lightning indexer (GLM-5,
// DeepSeek-V3.2): per query token it scores every earlier position and the
// attention reads only the TopK best.
type IndexerConfig struct {
	Heads, Dim, TopK int
	// Full marks the layers that run their own indexer; the others
	// ("shared") reuse the selection of the last full layer before them.
	Full []bool
	Eps  float32 // of the key's LayerNorm
}

// Indexer is one full layer's indexer:
//
//	iq = hadamard(rope(indexer.attn_q_b · qr))  per indexer head (qr: the
//	     MLA query's normalised low-rank vector)
//	ik = hadamard(rope(LayerNorm(indexer.attn_k · h)))  cached per token
//	w  = indexer.proj · h / sqrt(Dim·Heads)
//	score[t,s] = Σ_j relu(iq[t,j]·ik[s])·w[t,j]  over s <= t; keep the TopK
//
// rope rotates the first rope dims ("rope | nope" layout); hadamard is the
// orthonormal Walsh-Hadamard matrix in Sylvester order. Replicated on
// every rank: it is small, and splitting it would add a round trip.
type Indexer struct {
	qb, k, proj  kernels.Matrix
	kNorm, kBias []float32
}

// dsaScratch is the indexer's step buffers and the selection it leaves for
// the layers after it.
type dsaScratch struct {
	iq, ik, w []float32
	sel       []int32 // [n x TopK] selected positions, ascending
	cnt       []int32 // per token: how many of sel are valid
	hadamard  []float32
}

func dsaScratchLen(c *Config, B int) int {
	x := c.MLA.Indexer
	return B*(x.Heads*x.Dim+x.Dim+x.Heads+x.TopK+1) + x.Dim*x.Dim
}

func (d *dsaScratch) alloc(c *Config, B int) {
	x := c.MLA.Indexer
	d.iq = make([]float32, B*x.Heads*x.Dim)
	d.ik = make([]float32, B*x.Dim)
	d.w = make([]float32, B*x.Heads)
	d.sel = make([]int32, B*x.TopK)
	d.cnt = make([]int32, B)
	d.hadamard = make([]float32, x.Dim*x.Dim)
	scale := float32(1 / math.Sqrt(float64(x.Dim)))
	for i := 0; i < x.Dim; i++ {
		for j := 0; j < x.Dim; j++ {
			v := scale
			if bits.OnesCount(uint(i&j))%2 == 1 {
				v = -scale
			}
			d.hadamard[i*x.Dim+j] = v
		}
	}
}

// indexer binds layer l's indexer (a full layer's).
func (b *binder) indexer(l int) *Indexer {
	c := b.c
	x := c.MLA.Indexer
	return &Indexer{
		qb:    b.replicated(blk(l, "indexer.attn_q_b.weight"), c.MLA.QLora, x.Heads*x.Dim),
		k:     b.replicated(blk(l, "indexer.attn_k.weight"), c.Embd, x.Dim),
		kNorm: b.norm(blk(l, "indexer.k_norm.weight"), x.Dim),
		kBias: b.norm(blk(l, "indexer.k_norm.bias"), x.Dim),
		proj:  b.replicated(blk(l, "indexer.proj.weight"), c.Embd, x.Heads),
	}
}

// keys computes the step's indexer keys and writes them into each token's
// cache row after the latent part (columns [off, off+Dim)).
func (ix *Indexer) keys(m *Model, cache *kvcache.Cache, b *Batch, cl int, h []float32, off int) {
	c, d := &m.Cfg, &m.s.dsa
	x := c.MLA.Indexer
	n := len(b.Tokens)
	half := c.Rope.Dims / 2
	m.pool.MatMul(d.ik[:n*x.Dim], &ix.k, h, n)
	var tmp [512]float32
	for i := 0; i < n; i++ {
		k := d.ik[i*x.Dim : (i+1)*x.Dim]
		layerNorm(k, ix.kNorm, ix.kBias, x.Eps)
		m.rope.Apply(k, m.s.cos[i*half:(i+1)*half], m.s.sin[i*half:(i+1)*half])
		d.hadamardInPlace(k, tmp[:x.Dim])
		if cache.Config().F32 {
			kr, _ := cache.RowF32(cl, b.Seq[i], int(b.Pos[i]))
			copy(kr[off:off+x.Dim], k)
		} else {
			kr, _ := cache.RowF16(cl, b.Seq[i], int(b.Pos[i]))
			kernels.F32ToF16Row(kr[off:off+x.Dim], k)
		}
	}
}

// selectPositions computes the queries and weights from qr [n x QLora] and
// h, scores every earlier position against the cached keys and keeps each
// token's TopK in m.s.dsa.
func (ix *Indexer) selectPositions(m *Model, cache *kvcache.Cache, b *Batch, cl int, qr, h []float32, off int) {
	c, d := &m.Cfg, &m.s.dsa
	x := c.MLA.Indexer
	n := len(b.Tokens)
	half := c.Rope.Dims / 2
	// While every token's context fits in the top-k, the selection is
	// every position (dsaScore) and the queries and weights would go
	// unused: a decode step skips a matrix of Heads*Dim rows a layer.
	scored := false
	for _, p := range b.Pos {
		scored = scored || int(p)+1 > x.TopK
	}
	if scored {
		m.pool.MatMul(d.iq[:n*x.Heads*x.Dim], &ix.qb, qr, n)
		m.pool.MatMul(d.w[:n*x.Heads], &ix.proj, h, n)
		wscale := float32(1 / math.Sqrt(float64(x.Dim*x.Heads)))
		var tmp [512]float32
		for i := 0; i < n; i++ {
			// The query stays float32 against F16 keys too: llama.cpp's
			// CPU lightning-indexer op (GGML_OP_LIGHTNING_INDEXER, which
			// it uses whenever the backend has it) widens each cached key
			// to float32 and takes a float32 dot product with the query;
			// only the unfused matmul path would round the query to half.
			for j := 0; j < x.Heads; j++ {
				q := d.iq[(i*x.Heads+j)*x.Dim : (i*x.Heads+j+1)*x.Dim]
				m.rope.Apply(q, m.s.cos[i*half:(i+1)*half], m.s.sin[i*half:(i+1)*half])
				d.hadamardInPlace(q, tmp[:x.Dim])
			}
			w := d.w[i*x.Heads : (i+1)*x.Heads]
			for j := range w {
				w[j] *= wscale
			}
		}
	}
	m.cur.dsaCache, m.cur.dsaOff, m.cur.dsaLayer = cache, off, cl
	m.growScores(b)
	m.pool.For(len(m.s.slots), m.dsaFn)
}

// dsaScore scores and selects for a share of the step's tokens (slot
// indices from Pool.For; each slot's score buffer is its own).
func (m *Model) dsaScore(lo, hi int) {
	c, s, d := &m.Cfg, &m.s, &m.s.dsa
	x := c.MLA.Indexer
	cache, b, cl, off := m.cur.dsaCache, m.cur.batch, m.cur.dsaLayer, m.cur.dsaOff
	n, slots := m.cur.n, len(s.slots)
	bs := cache.Config().BlockSize
	kvdim := cache.Config().KVDim
	f32 := cache.Config().F32
	var dots [32]float32
	for slot := lo; slot < hi; slot++ {
		sc := &s.slots[slot]
		for i := slot * n / slots; i < (slot+1)*n/slots; i++ {
			pos := int(b.Pos[i])
			sel := d.sel[i*x.TopK : (i+1)*x.TopK]
			if pos+1 <= x.TopK {
				for t := 0; t <= pos; t++ {
					sel[t] = int32(t)
				}
				d.cnt[i] = int32(pos + 1)
				continue
			}
			scores := sc.scores[:pos+1]
			table, ring := cache.Table(cl, b.Seq[i])
			w := d.w[i*x.Heads : (i+1)*x.Heads]
			for b0 := 0; b0 <= pos; b0 += bs {
				blkID := blockOf(table, ring, b0/bs)
				if f32 {
					for t := b0; t < min(b0+bs, pos+1); t++ {
						o := (t-b0)*kvdim + off
						var sum float32
						for j := 0; j < x.Heads; j++ {
							q := d.iq[(i*x.Heads+j)*x.Dim : (i*x.Heads+j+1)*x.Dim]
							sum += max(kernels.DotF32(cache.KF32(cl, blkID)[o:o+x.Dim], q), 0) * w[j]
						}
						scores[t] = sum
					}
					continue
				}
				// Half-precision keys: head by head over up to 32 of the
				// block's rows in one call, each position's sum still
				// taken over the heads in order (the same bits as one
				// DotF16 per position and head).
				kb := cache.KF16(cl, blkID)
				for t0 := b0; t0 < min(b0+bs, pos+1); t0 += len(dots) {
					t1 := min(t0+len(dots), b0+bs, pos+1)
					sum := scores[t0:t1]
					clear(sum)
					for j := 0; j < x.Heads; j++ {
						q := d.iq[(i*x.Heads+j)*x.Dim : (i*x.Heads+j+1)*x.Dim]
						dj := dots[:t1-t0]
						kernels.DotF16Rows(dj, kb[(t0-b0)*kvdim+off:], kvdim, q, 1)
						for k, v := range dj {
							sum[k] += max(v, 0) * w[j]
						}
					}
				}
			}
			d.cnt[i] = int32(topPositions(scores, sel))
		}
	}
}

// topPositions writes the len(sel) best positions of scores and returns
// how many it wrote (all of them when there are fewer), ascending.
//
// Which of several equal scores make the cut decides which keys the
// attention reads, and exact ties are common (a key every indexer head
// rejects scores exactly 0). llama.cpp's CPU top-k is C++'s partial_sort,
// a heap selection: the first k positions form a heap whose top is the
// worst of them, and a later position replaces the top only when it
// scores strictly higher. This follows the same heap steps (the binary
// heap of the classic STL: holes moved down to a leaf, then the value
// pushed up), so that ties resolve as they do there.
func topPositions(scores []float32, sel []int32) int {
	n := len(scores)
	k := min(len(sel), n)
	h := sel[:k]
	for i := range h {
		h[i] = int32(i)
	}
	// before(a, b): a ranks ahead of b; the heap's top is the position
	// every other ranks ahead of.
	before := func(a, b int32) bool { return scores[a] > scores[b] }
	adjust := func(hole int, value int32) {
		top, child := hole, hole
		for child < (k-1)/2 {
			child = 2 * (child + 1)
			if before(h[child], h[child-1]) {
				child--
			}
			h[hole] = h[child]
			hole = child
		}
		if k%2 == 0 && child == (k-2)/2 {
			child = 2 * (child + 1)
			h[hole] = h[child-1]
			hole = child - 1
		}
		for parent := (hole - 1) / 2; hole > top && before(h[parent], value); parent = (hole - 1) / 2 {
			h[hole] = h[parent]
			hole = parent
		}
		h[hole] = value
	}
	if k >= 2 {
		for parent := (k - 2) / 2; ; parent-- {
			adjust(parent, h[parent])
			if parent == 0 {
				break
			}
		}
	}
	for i := k; i < n; i++ {
		if before(int32(i), h[0]) {
			adjust(0, int32(i))
		}
	}
	// Ascending positions: the attention sums in position order. (The
	// heap leaves them in no order: an insertion sort of a real top-k of
	// 2048 costs ~10^6 moves per token and layer.)
	slices.Sort(h)
	return k
}

// hadamardInPlace multiplies v by the Walsh-Hadamard matrix (tmp: scratch
// of len(v)).
func (d *dsaScratch) hadamardInPlace(v, tmp []float32) {
	n := len(v)
	for i := 0; i < n; i++ {
		tmp[i] = kernels.DotF32(d.hadamard[i*n:(i+1)*n], v)
	}
	copy(v, tmp)
}

// layerNorm sets v = (v - mean)/sqrt(var + eps)·w + bias, the statistics
// in float64 as ggml's norm sums them.
func layerNorm(v, w, bias []float32, eps float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := float32(sum / float64(len(v)))
	var sq float64
	for i, x := range v {
		v[i] = x - mean
		sq += float64(v[i]) * float64(v[i])
	}
	scale := float32(1 / math.Sqrt(sq/float64(len(v))+float64(eps)))
	for i := range v {
		v[i] = v[i]*scale*w[i] + bias[i]
	}
}
