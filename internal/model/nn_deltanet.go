package model

import (
	"math"

	"braid/internal/kernels"
	"braid/internal/kvcache"
)

// DeltaNet is a Gated DeltaNet (linear attention) layer, Qwen3.5's
// recurrent layer, per token t of a sequence:
//
//	qkv = conv_silu(attn_qkv · h)  causal depthwise conv over Conv taps
//	q, k = L2-normalised per key head;  v per value head
//	z = attn_gate · h;  β = sigmoid(ssm_beta · h)
//	g = softplus(ssm_alpha · h + ssm_dt.bias) · ssm_a   (g <= 0)
//	per value head j, reading key head j mod KHeads, state S_j (State²):
//	  S_j = e^g·S_j;  δ = β·(v_j − S_jᵀk);  S_j += k δᵀ;  o_j = S_jᵀq/√State
//	y_j = rms(o_j)·ssm_norm · silu(z_j);  out = ssm_out · concat(y)
//
// The cache keeps per sequence the conv's last Conv-1 inputs and the
// states (kvcache slots), no row per position. Tensor parallel: value
// heads split (their v, z, β, g, conv channels, states and ssm_out
// columns); every rank computes all the small q and k heads.
type DeltaNet struct {
	qk, v, z      kernels.Matrix
	beta, alpha   kernels.Matrix
	convQK, convV []float32 // [channels x Conv] taps, the last one the current token
	dtBias, a     []float32 // this rank's value heads
	norm          []float32
	out           kernels.Matrix
	lo            int // first value head of this rank
}

// ssmScratch is the step's buffers of the recurrent layers.
type ssmScratch struct {
	qk, v, z, beta, alpha, o, tmp []float32
}

func ssmDims(c *Config, nv int) (qk, vc int) {
	a := c.SSM
	return 2 * a.KHeads * a.State, nv * a.State
}

func ssmScratchLen(c *Config, nv, B int) int {
	qk, vc := ssmDims(c, nv)
	return B*(qk+4*vc+2*nv) + 2*vc
}

func (ss *ssmScratch) alloc(c *Config, nv, B int) {
	qk, vc := ssmDims(c, nv)
	ss.qk, ss.v, ss.z, ss.o = make([]float32, B*qk), make([]float32, B*vc), make([]float32, B*vc), make([]float32, B*vc)
	ss.beta, ss.alpha = make([]float32, B*nv), make([]float32, B*nv)
	ss.tmp = make([]float32, 2*vc)
}

// SSMStateSize is a recurrent layer's state per sequence on a rank with nv
// value heads: the conv's last Conv-1 inputs of every channel, and the
// value heads' State x State matrices.
func SSMStateSize(c *Config, nv int) int {
	a := c.SSM
	qk, vc := ssmDims(c, nv)
	return (a.Conv-1)*(qk+vc) + nv*a.State*a.State
}

// deltaNet binds layer l's recurrent block.
func (b *binder) deltaNet(l int) *DeltaNet {
	c, sh := b.c, b.sh
	a := c.SSM
	S, HV := a.State, a.VHeads
	lo, hi := sh.SSMLo, sh.SSMHi
	qk := 2 * a.KHeads * S
	C := qk + HV*S
	d := &DeltaNet{lo: lo}
	d.qk = b.column(blk(l, "attn_qkv.weight"), c.Embd, C, 0, qk)
	d.v = b.column(blk(l, "attn_qkv.weight"), c.Embd, C, qk+lo*S, qk+hi*S)
	d.z = b.column(blk(l, "attn_gate.weight"), c.Embd, HV*S, lo*S, hi*S)
	d.beta = b.column(blk(l, "ssm_beta.weight"), c.Embd, HV, lo, hi)
	d.alpha = b.column(blk(l, "ssm_alpha.weight"), c.Embd, HV, lo, hi)
	if t := b.tensor(blk(l, "ssm_conv1d.weight"), false, a.Conv, C); t != nil {
		all := b.floats(blk(l, "ssm_conv1d.weight"), t, a.Conv*C, 0, a.Conv*C)
		if all != nil {
			d.convQK = all[:qk*a.Conv]
			d.convV = all[(qk+lo*S)*a.Conv : (qk+hi*S)*a.Conv]
		}
	}
	d.dtBias = b.vector(blk(l, "ssm_dt.bias"), HV, false, lo, hi)
	d.a = b.vector(blk(l, "ssm_a"), HV, false, lo, hi)
	d.norm = b.norm(blk(l, "ssm_norm.weight"), S)
	d.out = b.row(blk(l, "ssm_out.weight"), HV*S, c.Embd, lo*S, hi*S)
	return d
}

func (d *DeltaNet) mix(m *Model, cache *kvcache.Cache, b *Batch, l int, h, out []float32) {
	c, ss := &m.Cfg, &m.s.ssm
	a := c.SSM
	S, K := a.State, a.Conv
	nv := d.beta.Rows
	n := len(b.Tokens)
	if nv == 0 {
		clear(out)
		return
	}
	qk, vc := ssmDims(c, nv)
	cl := l - m.sh.First
	m.pool.MatMulShared(h, n, kernels.MatOut{Dst: ss.qk[:n*qk], W: &d.qk}, kernels.MatOut{Dst: ss.v[:n*vc], W: &d.v},
		kernels.MatOut{Dst: ss.z[:n*vc], W: &d.z}, kernels.MatOut{Dst: ss.beta[:n*nv], W: &d.beta},
		kernels.MatOut{Dst: ss.alpha[:n*nv], W: &d.alpha})
	// The conv, in batch order: a sequence's tokens are in order, each
	// reading the inputs before it from its state.
	for i := 0; i < n; i++ {
		st := cache.State(cl, b.Seq[i])
		convStep(ss.qk[i*qk:(i+1)*qk], st[:(K-1)*qk], d.convQK, K)
		convStep(ss.v[i*vc:(i+1)*vc], st[(K-1)*qk:(K-1)*(qk+vc)], d.convV, K)
		for hh := 0; hh < 2*a.KHeads; hh++ {
			l2Normalize(ss.qk[i*qk+hh*S:i*qk+(hh+1)*S], c.NormEps)
		}
		for j := 0; j < nv; j++ {
			ss.beta[i*nv+j] = sigmoid32(ss.beta[i*nv+j])
			x := ss.alpha[i*nv+j] + d.dtBias[j]
			if x <= 20 {
				x = float32(math.Log1p(math.Exp(float64(x))))
			}
			ss.alpha[i*nv+j] = x * d.a[j]
		}
	}
	m.cur.cache, m.cur.batch, m.cur.layer, m.cur.ssm = cache, b, cl, d
	m.pool.For(nv, m.ssmFn)
	for i := 0; i < n; i++ {
		for j := 0; j < nv; j++ {
			y := ss.o[i*vc+j*S : i*vc+(j+1)*S]
			kernels.RMSNorm(y, y, d.norm, c.NormEps)
			for e, zv := range ss.z[i*vc+j*S : i*vc+(j+1)*S] {
				y[e] *= zv * sigmoid32(zv)
			}
		}
	}
	m.pool.MatMul(out[:n*c.Embd], &d.out, ss.o[:n*vc], n)
}

// deltaHeads runs the recurrence of value heads [lo, hi) over the step's
// tokens (from Pool.For: each head's states are its own).
func (m *Model) deltaHeads(lo, hi int) {
	c, ss, d := &m.Cfg, &m.s.ssm, m.cur.ssm
	a := c.SSM
	S, K := a.State, a.Conv
	nv := d.beta.Rows
	qk, vc := ssmDims(c, nv)
	b, cache, cl := m.cur.batch, m.cur.cache, m.cur.layer
	scale := float32(1 / math.Sqrt(float64(S)))
	for j := lo; j < hi; j++ {
		kh := (d.lo + j) % a.KHeads
		kv, delta := ss.tmp[j*S:(j+1)*S], ss.tmp[vc+j*S:vc+(j+1)*S]
		for i := range b.Tokens {
			st := cache.State(cl, b.Seq[i])
			sj := st[(K-1)*(qk+vc)+j*S*S : (K-1)*(qk+vc)+(j+1)*S*S]
			q := ss.qk[i*qk+kh*S : i*qk+(kh+1)*S]
			k := ss.qk[i*qk+(a.KHeads+kh)*S : i*qk+(a.KHeads+kh+1)*S]
			v := ss.v[i*vc+j*S : i*vc+(j+1)*S]
			decay := float32(math.Exp(float64(ss.alpha[i*nv+j])))
			beta := ss.beta[i*nv+j]
			kernels.Scale(sj, decay)
			clear(kv)
			for r := 0; r < S; r++ {
				kernels.AxpyF32(kv, k[r], sj[r*S:(r+1)*S])
			}
			for e := range delta {
				delta[e] = beta * (v[e] - kv[e])
			}
			o := ss.o[i*vc+j*S : i*vc+(j+1)*S]
			clear(o)
			for r := 0; r < S; r++ {
				row := sj[r*S : (r+1)*S]
				kernels.AxpyF32(row, k[r], delta)
				kernels.AxpyF32(o, q[r]*scale, row)
			}
		}
	}
}

// convStep runs one token through a causal depthwise conv: x holds the
// token's C channels and becomes silu of the conv; state holds the K-1
// previous inputs (oldest first) and is shifted by one; w is [C x K].
func convStep(x, state, w []float32, K int) {
	C := len(x)
	for ch := 0; ch < C; ch++ {
		var sum float32
		for j := 0; j < K-1; j++ {
			sum += w[ch*K+j] * state[j*C+ch]
		}
		sum += w[ch*K+K-1] * x[ch]
		for j := 0; j < K-2; j++ {
			state[j*C+ch] = state[(j+1)*C+ch]
		}
		if K > 1 {
			state[(K-2)*C+ch] = x[ch]
		}
		x[ch] = sum * sigmoid32(sum)
	}
}

// l2Normalize scales v to unit length (with eps under the root).
func l2Normalize(v []float32, eps float32) {
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	kernels.Scale(v, float32(1/math.Sqrt(sq+float64(eps))))
}

func sigmoid32(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }
