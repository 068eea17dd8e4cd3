package model

import (
	"math"

	"braid/internal/kernels"
)

// Gating is how a router's logits become the selected experts and their
// weights.
type Gating int

const (
	// GateSoftmax: softmax over all experts, the ExpertsUsed largest
	// probabilities, renormalised to sum to 1 when NormTopK (Qwen3-MoE).
	GateSoftmax Gating = iota
	// GateTopKSoftmax: the ExpertsUsed largest logits, then a softmax over
	// the selected logits only (gpt-oss).
	GateTopKSoftmax
	// GateSigmoid: a sigmoid per expert, the ExpertsUsed largest (plus
	// the selection bias), normalised when NormTopK (DeepSeek-V3, GLM).
	GateSigmoid
)

// MoEOpts are the variants of the mixture-of-experts feed-forward.
type MoEOpts struct {
	Gating     Gating
	NormTopK   bool    // renormalise the selected weights to sum to 1
	Scale      float32 // multiply the weights (0: 1)
	RouterBias bool    // ffn_gate_inp.bias added to the router logits
	// SelectBias adds exp_probs_b.bias to the scores the experts are
	// chosen by, not to their weights.
	SelectBias bool
	// Groups and GroupsUsed restrict the choice to the GroupsUsed groups
	// whose two best scores sum highest (0: no groups).
	Groups, GroupsUsed int
	ExpertBias         bool // per-expert biases on gate, up and down
	Shared             bool // shared experts (ffn_*_shexp) on every token
	// SharedGate scales the shared experts' output per token by
	// sigmoid(ffn_gate_inp_shexp · h) (Qwen3-Next, Qwen3.5).
	SharedGate bool
	Act        Activation // of every expert
}

// MoE is a mixture of experts: a replicated router picks ExpertsUsed experts
// per token; every expert is a gated FFN split like the dense one (gate and
// up column-parallel over this rank's expert-FF columns, down row-parallel),
// its outputs summed with the router's weights.
type MoE struct {
	opt              MoEOpts
	router           kernels.Matrix
	routerBias       []float32
	selectBias       []float32
	gate, up, down   []kernels.Matrix
	gateBias, upBias [][]float32 // per expert, this rank's columns
	downBias         [][]float32 // per expert, on the group's rank 0 only
	shared           *Dense      // nil without shared experts
	sharedGate       []float32   // [embd], or nil
}

// moe binds layer l's experts (ffn_gate_inp, ffn_{gate,up,down}_exps).
func (b *binder) moe(l int, opt MoEOpts) *MoE {
	c, sh := b.c, b.sh
	X, F := c.Experts, c.ExpertFF
	e := &MoE{opt: opt}
	e.router = b.replicated(blk(l, "ffn_gate_inp.weight"), c.Embd, X)
	if opt.RouterBias {
		e.routerBias = b.vector(blk(l, "ffn_gate_inp.bias"), X, false, 0, X)
	}
	if opt.SelectBias {
		e.selectBias = b.vector(blk(l, "exp_probs_b.bias"), X, false, 0, X)
	}
	if opt.Shared {
		lo, hi := sh.SharedFF(c)
		F := c.SharedFF
		e.shared = &Dense{act: opt.Act,
			gate: b.column(blk(l, "ffn_gate_shexp.weight"), c.Embd, F, lo, hi),
			up:   b.column(blk(l, "ffn_up_shexp.weight"), c.Embd, F, lo, hi),
			down: b.row(blk(l, "ffn_down_shexp.weight"), F, c.Embd, lo, hi),
		}
		if opt.SharedGate {
			e.sharedGate = b.norm(blk(l, "ffn_gate_inp_shexp.weight"), c.Embd)
		}
	}
	e.gate = b.experts(blk(l, "ffn_gate_exps.weight"), c.Embd, F, X, false, sh.ExpFFLo, sh.ExpFFHi)
	e.up = b.experts(blk(l, "ffn_up_exps.weight"), c.Embd, F, X, false, sh.ExpFFLo, sh.ExpFFHi)
	e.down = b.experts(blk(l, "ffn_down_exps.weight"), F, c.Embd, X, true, sh.ExpFFLo, sh.ExpFFHi)
	if opt.ExpertBias {
		e.gateBias = b.expertVectors(blk(l, "ffn_gate_exps.bias"), F, X, sh.ExpFFLo, sh.ExpFFHi)
		e.upBias = b.expertVectors(blk(l, "ffn_up_exps.bias"), F, X, sh.ExpFFLo, sh.ExpFFHi)
		e.downBias = b.rowExpertBias(blk(l, "ffn_down_exps.bias"), c.Embd, X)
	}
	return e
}

// ffn routes each token to its experts (lowest index first on ties), then
// runs each expert once over all the tokens routed to it.
func (e *MoE) ffn(m *Model, h, out []float32, n int) {
	c, s := &m.Cfg, &m.s
	E, X, K := c.Embd, c.Experts, c.ExpertsUsed
	m.pool.MatMul(s.probs[:n*X], &e.router, h, n)
	for i := 0; i < n; i++ {
		p := s.probs[i*X : (i+1)*X]
		if e.routerBias != nil {
			kernels.Add(p, e.routerBias)
		}
		switch e.opt.Gating {
		case GateSoftmax:
			kernels.Softmax(p)
		case GateSigmoid:
			for j, v := range p {
				p[j] = sigmoid32(v)
			}
		}
		// Experts are chosen by their score (the weight plus the
		// selection bias) and weighted by p.
		score := p
		if e.selectBias != nil || e.opt.Groups > 1 && e.opt.GroupsUsed < e.opt.Groups {
			score = s.score[:X]
			copy(score, p)
			if e.selectBias != nil {
				kernels.Add(score, e.selectBias)
			}
			e.maskGroups(score)
		}
		sel, selW := s.sel[i*K:(i+1)*K], s.selW[i*K:(i+1)*K]
		topK(score, sel, selW)
		for k, x := range sel {
			selW[k] = p[x]
		}
		if e.opt.Gating == GateTopKSoftmax {
			kernels.Softmax(selW)
		}
		if e.opt.NormTopK {
			var sum float32
			for _, v := range selW {
				sum += v
			}
			sum = max(sum, 6.103515625e-5) // as llama.cpp clamps it
			for k := range selW {
				selW[k] /= sum
			}
		}
		if e.opt.Scale != 0 && e.opt.Scale != 1 {
			for k := range selW {
				selW[k] *= e.opt.Scale
			}
		}
	}
	clear(out)
	empty := len(e.gate) == 0 || e.gate[0].Rows == 0
	if n == 1 && !empty {
		e.decode(m, h, out)
	} else {
		for x := 0; x < X; x++ {
			cnt := 0
			for i := 0; i < n; i++ {
				for k := 0; k < K; k++ {
					if s.sel[i*K+k] == int32(x) {
						s.expTok[cnt] = int32(i*K + k)
						copy(s.hx[cnt*E:(cnt+1)*E], h[i*E:(i+1)*E])
						cnt++
					}
				}
			}
			if cnt == 0 {
				continue
			}
			if empty {
				clear(s.ex[:cnt*E])
			} else {
				var gb, ub []float32
				if e.gateBias != nil {
					gb, ub = e.gateBias[x], e.upBias[x]
				}
				m.gatedFFN(e.opt.Act, &e.gate[x], &e.up[x], &e.down[x], gb, ub, s.hx[:cnt*E], s.ex[:cnt*E], cnt)
			}
			for j := 0; j < cnt; j++ {
				ex := s.ex[j*E : (j+1)*E]
				if e.downBias != nil {
					kernels.Add(ex, e.downBias[x])
				}
				ik := int(s.expTok[j])
				i := ik / K
				kernels.AxpyF32(out[i*E:(i+1)*E], s.selW[ik], ex)
			}
		}
	}
	if e.shared != nil && e.shared.gate.Rows > 0 {
		m.gatedFFN(e.shared.act, &e.shared.gate, &e.shared.up, &e.shared.down, nil, nil, h, s.ex[:n*E], n)
		if e.sharedGate != nil {
			for i := 0; i < n; i++ {
				g := kernels.DotF32(e.sharedGate, h[i*E:(i+1)*E])
				kernels.Scale(s.ex[i*E:(i+1)*E], sigmoid32(g))
			}
		}
		kernels.Add(out[:n*E], s.ex[:n*E])
	}
}

// decode runs one token's experts (n == 1) as two jobs, every selected
// expert's gate and up products in one and every down product in the
// other, instead of three per expert: at decode each expert is a few
// hundred kilobytes, and each job start waits for every thread. Each
// product, activation and bias is the per-expert loop's, and the outputs
// are summed into out in the same order (ascending expert), so the result
// has the same bits.
func (e *MoE) decode(m *Model, h, out []float32) {
	c, s := &m.Cfg, &m.s
	E, K := c.Embd, c.ExpertsUsed
	F := e.gate[0].Rows
	ord := s.expOrd[:K]
	for k := range ord {
		ord[k] = int32(k)
		for j := k; j > 0 && s.sel[ord[j]] < s.sel[ord[j-1]]; j-- {
			ord[j], ord[j-1] = ord[j-1], ord[j]
		}
	}
	ws := s.expW[:2*K]
	for i, k := range ord {
		x := s.sel[k]
		ws[i], ws[K+i] = e.gate[x], e.up[x]
	}
	gu := s.expGU[:2*K*F]
	if ws[0].Type == ws[K].Type {
		m.pool.MatVecHeads(gu, F, ws, h[:E], 0)
	} else {
		m.pool.MatVecHeads(gu[:K*F], F, ws[:K], h[:E], 0)
		m.pool.MatVecHeads(gu[K*F:], F, ws[K:], h[:E], 0)
	}
	g, u := gu[:K*F], gu[K*F:]
	for i, k := range ord {
		x := s.sel[k]
		gi, ui := g[i*F:(i+1)*F], u[i*F:(i+1)*F]
		if e.gateBias != nil {
			kernels.Add(gi, e.gateBias[x])
			kernels.Add(ui, e.upBias[x])
		}
		// Expert by expert, as gatedFFN applies it.
		e.opt.Act.apply(m, gi, ui)
		ws[i] = e.down[x]
	}
	ex := s.expOut[:K*E]
	m.pool.MatVecHeads(ex, E, ws[:K], g, F)
	for i, k := range ord {
		r := ex[i*E : (i+1)*E]
		if e.downBias != nil {
			kernels.Add(r, e.downBias[s.sel[k]])
		}
		kernels.AxpyF32(out[:E], s.selW[k], r)
	}
}

// maskGroups keeps the scores of the GroupsUsed groups whose two best
// scores sum highest (lowest group first on ties) and sets the others to
// -Inf, so no expert outside them is chosen.
func (e *MoE) maskGroups(score []float32) {
	G, used := e.opt.Groups, e.opt.GroupsUsed
	if G <= 1 || used >= G {
		return
	}
	per := len(score) / G
	var sums, chosen [64]float32
	var pick [64]int32
	for g := 0; g < G; g++ {
		a, b := float32(math.Inf(-1)), float32(math.Inf(-1))
		for _, v := range score[g*per : (g+1)*per] {
			if v > a {
				a, b = v, a
			} else if v > b {
				b = v
			}
		}
		sums[g] = a + b
	}
	topK(sums[:G], pick[:used], chosen[:used])
	for g := 0; g < G; g++ {
		if !taken(pick[:used], g) {
			for j := g * per; j < (g+1)*per; j++ {
				score[j] = float32(math.Inf(-1))
			}
		}
	}
}

// topK writes the len(sel) largest entries of p, largest first (lowest
// index first among equals), and their values.
func topK(p []float32, sel []int32, val []float32) {
	for k := range sel {
		best := -1
		for e := range p {
			if taken(sel[:k], e) {
				continue
			}
			if best < 0 || p[e] > p[best] {
				best = e
			}
		}
		sel[k], val[k] = int32(best), p[best]
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
