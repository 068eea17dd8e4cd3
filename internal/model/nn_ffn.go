package model

import "braid/internal/kernels"

// Activation is the gated activation of a feed-forward: act(gate·h, up·h).
type Activation struct {
	// OAI selects gpt-oss's clamped form (x = min(g, Limit), y = clamp(u,
	// ±Limit), x·sigmoid(Alpha·x)·(y+1)); otherwise SwiGLU, silu(g)·u.
	OAI          bool
	Alpha, Limit float32
}

// SwiGLU is the plain gated SiLU; SwiGLUOAI is gpt-oss's clamped form.
var (
	SwiGLU    = Activation{}
	SwiGLUOAI = Activation{OAI: true, Alpha: 1.702, Limit: 7}
)

func (a Activation) apply(m *Model, gate, up []float32) {
	if a.OAI {
		kernels.SwiGLUOAI(gate, gate, up, a.Alpha, a.Limit)
		return
	}
	m.pool.SwiGLU(gate, gate, up)
}

// Dense is the gated feed-forward down(act(gate·h, up·h)): gate and up
// column-parallel over this rank's FF columns, down row-parallel.
type Dense struct {
	act            Activation
	gate, up, down kernels.Matrix
}

// dense binds layer l's dense FFN (ffn_gate, ffn_up, ffn_down).
func (b *binder) dense(l int, act Activation) *Dense {
	c, sh := b.c, b.sh
	return &Dense{act: act,
		gate: b.column(blk(l, "ffn_gate.weight"), c.Embd, c.FF, sh.FFLo, sh.FFHi),
		up:   b.column(blk(l, "ffn_up.weight"), c.Embd, c.FF, sh.FFLo, sh.FFHi),
		down: b.row(blk(l, "ffn_down.weight"), c.FF, c.Embd, sh.FFLo, sh.FFHi),
	}
}

func (d *Dense) ffn(m *Model, h, out []float32, n int) {
	if d.gate.Rows == 0 {
		clear(out)
		return
	}
	m.gatedFFN(d.act, &d.gate, &d.up, &d.down, nil, nil, h, out, n)
}

// gatedFFN computes down(act(gate·h + gateBias, up·h + upBias)) for n rows
// of h [n x embd] into out [n x embd]; the biases may be nil.
func (m *Model) gatedFFN(act Activation, gate, up, down *kernels.Matrix, gateBias, upBias []float32, h, out []float32, n int) {
	s := &m.s
	ff := gate.Rows
	m.pool.MatMulShared(h, n, kernels.MatOut{Dst: s.gate[:n*ff], W: gate}, kernels.MatOut{Dst: s.up[:n*ff], W: up})
	if gateBias != nil {
		for i := 0; i < n; i++ {
			kernels.Add(s.gate[i*ff:(i+1)*ff], gateBias)
			kernels.Add(s.up[i*ff:(i+1)*ff], upBias)
		}
	}
	act.apply(m, s.gate[:n*ff], s.up[:n*ff])
	m.pool.MatMul(out, down, s.gate[:n*ff], n)
}
