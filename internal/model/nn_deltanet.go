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
// states (kvcache slots, each head's state transposed: a row per value
// dimension), no row per position. A prompt's run of positions takes the
// chunked form (deltaChunk.run), a decode step the recurrent one
// (deltaRecurrent); a run is cut where the sequence keeps a snapshot of
// its state. Tensor parallel: value heads split (their v, z, β, g, conv
// channels, states and ssm_out columns); every rank computes all the
// small q and k heads.
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
	qk, v, z, beta, alpha, o []float32
	ones                     []float32 // 1s: silu(x) = SwiGLU(x, x, 1)
	segs                     []ssmSeg
	// chunk holds one chunked-form scratch per pool thread; free hands
	// them to the heads' workers (at most Threads run at once).
	chunk []deltaChunk
	free  chan *deltaChunk
	// exact: the pool computes batches of at most this many tokens as
	// one-token steps do (speculative verification), so runs this short
	// keep the recurrent form.
	exact int
}

// ssmSeg is a run of consecutive batch tokens [lo, hi) of one sequence,
// whose state in the running layer is st; snap, when set, is the
// snapshot the sequence keeps at the length after the run's last token
// (the run ends there), to receive the state.
type ssmSeg struct {
	lo, hi   int
	st, snap []float32
}

// deltaChunkLen is the chunked form's block of positions, and
// deltaChunkMin the shortest run of one sequence that takes it: shorter
// runs (decode, speculative verification) keep the recurrent form.
const (
	deltaChunkLen = 64
	deltaChunkMin = 16
	// triBlock is the rows per product where only a triangle is needed:
	// a multiple of kernels.MatMulF32's tile.
	triBlock = 12
)

func ssmDims(c *Config, nv int) (qk, vc int) {
	a := c.SSM
	return 2 * a.KHeads * a.State, nv * a.State
}

func ssmScratchLen(c *Config, nv, B, threads int) int {
	qk, vc := ssmDims(c, nv)
	return B*(qk+3*vc+2*nv) + max(qk, vc) + threads*deltaChunkScratchLen(c.SSM.State, deltaChunkLen)
}

func (ss *ssmScratch) alloc(c *Config, nv, B, threads int) {
	qk, vc := ssmDims(c, nv)
	ss.qk, ss.v, ss.z, ss.o = make([]float32, B*qk), make([]float32, B*vc), make([]float32, B*vc), make([]float32, B*vc)
	ss.beta, ss.alpha = make([]float32, B*nv), make([]float32, B*nv)
	ss.ones = make([]float32, max(qk, vc))
	for i := range ss.ones {
		ss.ones[i] = 1
	}
	ss.segs = make([]ssmSeg, 0, B)
	ss.chunk = make([]deltaChunk, threads)
	ss.free = make(chan *deltaChunk, threads)
	for i := range ss.chunk {
		ss.chunk[i].alloc(c.SSM.State, deltaChunkLen)
		ss.free <- &ss.chunk[i]
	}
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
	// The batch as runs of one sequence's consecutive tokens, cut after
	// each token whose state the sequence keeps (a snapshot): the conv and
	// the recurrence take each run in order from the state it leaves.
	ss.segs = ss.segs[:0]
	for i := 0; i < n; {
		seq := b.Seq[i]
		j := i + 1
		for j < n && b.Seq[j] == seq {
			j++
		}
		st := cache.State(cl, seq)
		lo := i
		for _, sn := range cache.Snapshots(seq) {
			if at := i + sn - 1 - int(b.Pos[i]); at >= lo && at < j {
				ss.segs = append(ss.segs, ssmSeg{lo: lo, hi: at + 1, st: st, snap: cache.SnapshotState(cl, seq, sn)})
				lo = at + 1
			}
		}
		if lo < j {
			ss.segs = append(ss.segs, ssmSeg{lo: lo, hi: j, st: st})
		}
		i = j
	}
	conv := (K - 1) * (qk + vc)
	for _, sg := range ss.segs {
		for i := sg.lo; i < sg.hi; i++ {
			x, y := ss.qk[i*qk:(i+1)*qk], ss.v[i*vc:(i+1)*vc]
			convStep(x, sg.st[:(K-1)*qk], d.convQK, K)
			convStep(y, sg.st[(K-1)*qk:conv], d.convV, K)
			// silu(x) as SwiGLU(x, x, 1): the vector kernel, float32 exp.
			kernels.SwiGLU(x, x, ss.ones)
			kernels.SwiGLU(y, y, ss.ones)
		}
		if sg.snap != nil {
			copy(sg.snap[:conv], sg.st[:conv])
		}
	}
	for i := 0; i < n; i++ {
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
	ss.exact = m.pool.ExactColumns()
	if m.deltaRecurrent {
		ss.exact = n // benchmarks: the recurrent form for every run
	}
	m.cur.cache, m.cur.batch, m.cur.layer, m.cur.ssm = cache, b, cl, d
	m.pool.For(nv, m.ssmFn)
	for i := 0; i < n; i++ {
		for j := 0; j < nv; j++ {
			y := ss.o[i*vc+j*S : i*vc+(j+1)*S]
			kernels.RMSNorm(y, y, d.norm, c.NormEps)
		}
	}
	kernels.SwiGLU(ss.o[:n*vc], ss.z[:n*vc], ss.o[:n*vc]) // y·silu(z)
	m.pool.MatMul(out[:n*c.Embd], &d.out, ss.o[:n*vc], n)
}

// deltaHeads runs the recurrence of value heads [lo, hi) over the step's
// runs (from Pool.For: each head's states are its own). A run of at least
// deltaChunkMin tokens takes the chunked form, block by block; shorter
// ones, and any the pool must compute as one-token steps, the recurrent
// form.
func (m *Model) deltaHeads(lo, hi int) {
	c, ss, d := &m.Cfg, &m.s.ssm, m.cur.ssm
	a := c.SSM
	S, K := a.State, a.Conv
	nv := d.beta.Rows
	qk, vc := ssmDims(c, nv)
	scale := float32(1 / math.Sqrt(float64(S)))
	cs := <-ss.free
	defer func() { ss.free <- cs }()
	for j := lo; j < hi; j++ {
		kh := (d.lo + j) % a.KHeads
		for _, sg := range ss.segs {
			hs := sg.st[(K-1)*(qk+vc)+j*S*S : (K-1)*(qk+vc)+(j+1)*S*S]
			// Runs cut by snapshots are judged by their own length.
			chunked := sg.hi-sg.lo >= deltaChunkMin && sg.hi-sg.lo > ss.exact
			for i0 := sg.lo; i0 < sg.hi; i0 += deltaChunkLen {
				L := min(deltaChunkLen, sg.hi-i0)
				in := deltaIn{
					q: ss.qk[i0*qk+kh*S:], k: ss.qk[i0*qk+(a.KHeads+kh)*S:], ldqk: qk,
					v: ss.v[i0*vc+j*S:], o: ss.o[i0*vc+j*S:], ldv: vc,
					g: ss.alpha[i0*nv+j:], beta: ss.beta[i0*nv+j:], ldg: nv,
					n: L, dim: S, scale: scale,
				}
				if chunked {
					cs.run(hs, &in)
				} else {
					deltaRecurrent(hs, &in)
				}
			}
			if sg.snap != nil {
				copy(sg.snap[(K-1)*(qk+vc)+j*S*S:(K-1)*(qk+vc)+(j+1)*S*S], hs)
			}
		}
	}
}

// deltaIn is one value head's inputs and outputs for n consecutive tokens
// of a sequence, as rows with strides: the token's query and key (its key
// head's, L2-normalised), value and output (dim values each), log-decay g
// (<= 0) and β.
type deltaIn struct {
	q, k    []float32
	ldqk    int
	v, o    []float32
	ldv     int
	g, beta []float32
	ldg     int
	n, dim  int
	scale   float32
}

// deltaRecurrent runs the tokens through the gated delta rule one at a
// time. The head's state h is stored transposed, H = Sᵀ (dim rows, one
// per value dimension, of dim key values), so each row is updated on its
// own in one pass:
//
//	H = e^g·H;  δ = β·(v − H k);  H += δ kᵀ;  o = H q · scale
func deltaRecurrent(h []float32, in *deltaIn) {
	D := in.dim
	for t := 0; t < in.n; t++ {
		q, k := in.q[t*in.ldqk:t*in.ldqk+D], in.k[t*in.ldqk:t*in.ldqk+D]
		v, o := in.v[t*in.ldv:t*in.ldv+D], in.o[t*in.ldv:t*in.ldv+D]
		g := float64(in.g[t*in.ldg])
		decay, dm1 := float32(math.Exp(g)), float32(math.Expm1(g))
		beta := in.beta[t*in.ldg]
		for m := 0; m < D; m++ {
			row := h[m*D : (m+1)*D]
			dl := beta * (v[m] - decay*kernels.DotF32(row, k))
			// row·e^g as row + (e^g − 1)·row: the vector kernels have
			// an axpy, not a scale.
			kernels.AxpyF32(row, dm1, row)
			kernels.AxpyF32(row, dl, k)
			o[m] = in.scale * kernels.DotF32(row, q)
		}
	}
}

// deltaChunk is the chunked form's scratch for blocks of up to C tokens
// of one head (state dim D).
type deltaChunk struct {
	rt, dt, ktw, qs []float32 // [D x C], [D x C], [D x C], [C x D]
	kk, qk          []float32 // [C x C]
	eg, cg, suf, f  []float32 // [C]
}

func deltaChunkScratchLen(D, C int) int { return 4*D*C + 2*C*C + 4*C }

func (cs *deltaChunk) alloc(D, C int) {
	cs.rt, cs.dt, cs.ktw, cs.qs = make([]float32, D*C), make([]float32, D*C), make([]float32, D*C), make([]float32, C*D)
	cs.kk, cs.qk = make([]float32, C*C), make([]float32, C*C)
	cs.eg, cs.cg, cs.suf, cs.f = make([]float32, C), make([]float32, C), make([]float32, C), make([]float32, C)
}

// run computes what deltaRecurrent computes for a block of L tokens with
// matrix products (the WY form of the delta rule). With Γ_t the product of
// the block's decays up to t (so Γ_t/Γ_s = e^(γ_t−γ_s) for s <= t), H_0
// the state before the block, and the rows of K, Q, V the tokens':
//
//	δ_t = β_t·(v_t − Γ_t H_0 k_t − Σ_{s<t} Γ_t/Γ_s (k_t·k_s) δ_s)
//	o_t = scale·(Γ_t H_0 q_t + Σ_{s<=t} Γ_t/Γ_s (q_t·k_s) δ_s)
//	H_L = Γ_L H_0 + Σ_s Γ_L/Γ_s δ_s k_sᵀ
//
// The δ are the solution of a unit lower-triangular system (I + A) Δ = R,
// A[t][s] = β_t Γ_t/Γ_s (k_t·k_s): T = (I + A)⁻¹ by substitution on the
// L x L matrix, then Δ = T R as a product. The decay ratios are running
// products of the per-token decays, as the recurrence multiplies them, so
// no ratio of two underflowed products is ever taken.
func (cs *deltaChunk) run(h []float32, in *deltaIn) {
	D, L := in.dim, in.n
	eg, cg, suf := cs.eg[:L], cs.cg[:L], cs.suf[:L]
	p := float32(1)
	for t := range L {
		eg[t] = float32(math.Exp(float64(in.g[t*in.ldg])))
		p *= eg[t]
		cg[t] = p // Γ_t
	}
	p = 1
	for s := L - 1; s >= 0; s-- {
		suf[s] = p // Γ_L/Γ_s
		p *= eg[s]
	}
	// Rᵀ = H_0 Kᵀ, then R_t = β_t (v_t − Γ_t H_0 k_t), kept transposed:
	// rt[m*L+t].
	rt := cs.rt[:D*L]
	kernels.MatMulF32(rt, L, h, D, D, in.k, in.ldqk, L, D, false)
	for t := range L {
		v, b, gt := in.v[t*in.ldv:t*in.ldv+D], in.beta[t*in.ldg], cg[t]
		for m := range D {
			rt[m*L+t] = b * (v[m] - gt*rt[m*L+t])
		}
	}
	// k_t·k_s and q_t·k_s for s <= t, in blocks of rows t (each block
	// also fills a little past its diagonal, which is never read).
	kk, qk := cs.kk[:L*L], cs.qk[:L*L]
	for t0 := 0; t0 < L; t0 += triBlock {
		nt, ns := min(triBlock, L-t0), min(t0+triBlock, L)
		kernels.MatMulF32(kk[t0*L:], L, in.k[t0*in.ldqk:], in.ldqk, nt, in.k, in.ldqk, ns, D, false)
		kernels.MatMulF32(qk[t0*L:], L, in.q[t0*in.ldqk:], in.ldqk, nt, in.k, in.ldqk, ns, D, false)
	}
	// T = (I + A)⁻¹ in place of kk, row by row: T_t = e_t − Σ_{u<t} A[t][u] T_u,
	// and P[t][s] = scale·Γ_t/Γ_s (q_t·k_s) in place of qk (0 above the
	// diagonal).
	f := cs.f[:L]
	for t := range L {
		// f[s] = Γ_t/Γ_s for s <= t.
		r := float32(1)
		for s := t; s >= 0; s-- {
			f[s] = r
			r *= eg[s]
		}
		row, prow := kk[t*L:(t+1)*L], qk[t*L:(t+1)*L]
		for s := 0; s <= t; s++ {
			prow[s] *= in.scale * f[s]
		}
		clear(prow[t+1:])
		b := in.beta[t*in.ldg]
		for s := 0; s < t; s++ {
			f[s] = b * f[s] * row[s] // A[t][s]
		}
		clear(row)
		row[t] = 1
		for u := 0; u < t; u++ {
			if f[u] != 0 {
				kernels.AxpyF32(row[:u+1], -f[u], kk[u*L:u*L+u+1])
			}
		}
	}
	// Δᵀ = Rᵀ Tᵀ: dt[m*L+t] = δ_t[m], T_t being 0 past t.
	dt := cs.dt[:D*L]
	for t0 := 0; t0 < L; t0 += triBlock {
		nt := min(triBlock, L-t0)
		kernels.MatMulF32(dt[t0:], L, rt, L, D, kk[t0*L:], L, nt, t0+nt, false)
	}
	// O = (scale·Γ_t q_t) H_0ᵀ + P Δ.
	qs := cs.qs[:L*D]
	for t := range L {
		q := in.q[t*in.ldqk : t*in.ldqk+D]
		for i, x := range q {
			qs[t*D+i] = x * in.scale * cg[t]
		}
	}
	kernels.MatMulF32(in.o, in.ldv, qs, D, L, h, D, D, D, false)
	for t0 := 0; t0 < L; t0 += triBlock {
		nt := min(triBlock, L-t0)
		kernels.MatMulF32(in.o[t0*in.ldv:], in.ldv, qk[t0*L:], L, nt, dt, L, D, t0+nt, true)
	}
	// H_L = Γ_L H_0 + Δᵀ (K scaled by Γ_L/Γ_s), K taken transposed.
	ktw := cs.ktw[:D*L]
	for s := range L {
		k, w := in.k[s*in.ldqk:s*in.ldqk+D], suf[s]
		for i, x := range k {
			ktw[i*L+s] = x * w
		}
	}
	// h·Γ_L as h + (Γ_L − 1)·h: the vector kernels have an axpy, not a
	// scale.
	kernels.AxpyF32(h[:D*D], cg[L-1]-1, h)
	kernels.MatMulF32(h, D, dt, L, D, ktw, L, D, L, true)
}

// convStep runs one token through a causal depthwise conv: x holds the
// token's C channels and becomes the conv (silu is the caller's); state
// holds the K-1 previous inputs (oldest first) and is shifted by one; w is
// [C x K].
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
		x[ch] = sum
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
