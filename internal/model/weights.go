package model

import (
	"fmt"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/quant"
)

// layer holds one transformer block's weights as views into the mapped file
// (matrices) or small float32 copies (norms and biases).
type layer struct {
	attnNorm, ffnNorm []float32
	q, k, v, o        kernels.Matrix
	qBias, kBias      []float32
	vBias             []float32
	qNorm, kNorm      []float32
	gate, up, down    kernels.Matrix
	router            kernels.Matrix
	gateExps, upExps  []kernels.Matrix
	downExps          []kernels.Matrix
}

// weights is every tensor the forward pass reads, bound to its GGUF name in
// this one place.
type weights struct {
	embed      *gguf.Tensor
	embedRow   int64 // bytes per token embedding row
	outputNorm []float32
	output     kernels.Matrix
	ropeFreqs  []float32 // llama3 frequency factors, nil if absent
	layers     []layer
}

// binder looks tensors up by name and checks their shapes, collecting the
// first error so the binding code reads as a list.
type binder struct {
	m   *gguf.Model
	err error
}

func (b *binder) fail(format string, a ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("model: "+format, a...)
	}
}

func (b *binder) tensor(name string, optional bool, shape ...int) *gguf.Tensor {
	if b.err != nil {
		return nil
	}
	t, ok := b.m.Tensor(name)
	if !ok {
		if !optional {
			b.fail("tensor %s is missing", name)
		}
		return nil
	}
	if len(t.Shape) != len(shape) {
		b.fail("tensor %s has shape %v, want %v", name, t.Shape, shape)
		return nil
	}
	for i, d := range shape {
		if t.Shape[i] != int64(d) {
			b.fail("tensor %s has shape %v, want %v", name, t.Shape, shape)
			return nil
		}
	}
	return t
}

// matrix binds a 2D weight: ggml shape [cols, rows].
func (b *binder) matrix(name string, cols, rows int) kernels.Matrix {
	t := b.tensor(name, false, cols, rows)
	if t == nil {
		return kernels.Matrix{}
	}
	return kernels.Matrix{Type: t.Type, Rows: rows, Cols: cols, Data: t.Data}
}

// experts binds a 3D expert tensor [cols, rows, n] as n matrices.
func (b *binder) experts(name string, cols, rows, n int) []kernels.Matrix {
	t := b.tensor(name, false, cols, rows, n)
	if t == nil {
		return nil
	}
	per := t.Size / int64(n)
	out := make([]kernels.Matrix, n)
	for e := range out {
		out[e] = kernels.Matrix{Type: t.Type, Rows: rows, Cols: cols, Data: t.Data[int64(e)*per : int64(e+1)*per]}
	}
	return out
}

// vector binds a 1D tensor of any type as float32 values.
func (b *binder) vector(name string, n int, optional bool) []float32 {
	t := b.tensor(name, optional, n)
	if t == nil {
		return nil
	}
	v := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		b.fail("tensor %s: %v", name, err)
	}
	return v
}

func bindWeights(m *gguf.Model, c *Config) (*weights, error) {
	b := &binder{m: m}
	w := &weights{}
	qdim, kvdim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	w.embed = b.tensor("token_embd.weight", false, c.Embd, c.Vocab)
	if w.embed != nil {
		w.embedRow, _ = w.embed.Type.RowBytes(int64(c.Embd))
	}
	w.outputNorm = b.vector("output_norm.weight", c.Embd, false)
	if _, ok := m.Tensor("output.weight"); ok {
		w.output = b.matrix("output.weight", c.Embd, c.Vocab)
	} else if w.embed != nil {
		c.TiedOutput = true
		w.output = kernels.Matrix{Type: w.embed.Type, Rows: c.Vocab, Cols: c.Embd, Data: w.embed.Data}
	}
	w.ropeFreqs = b.vector("rope_freqs.weight", c.Rope.Dims/2, true)
	w.layers = make([]layer, c.Layers)
	for i := range w.layers {
		l := &w.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.attnNorm = b.vector(p+"attn_norm.weight", c.Embd, false)
		l.q = b.matrix(p+"attn_q.weight", c.Embd, qdim)
		l.k = b.matrix(p+"attn_k.weight", c.Embd, kvdim)
		l.v = b.matrix(p+"attn_v.weight", c.Embd, kvdim)
		l.o = b.matrix(p+"attn_output.weight", qdim, c.Embd)
		if c.QKVBias {
			l.qBias = b.vector(p+"attn_q.bias", qdim, false)
			l.kBias = b.vector(p+"attn_k.bias", kvdim, false)
			l.vBias = b.vector(p+"attn_v.bias", kvdim, false)
		}
		if c.QKNorm {
			l.qNorm = b.vector(p+"attn_q_norm.weight", c.HeadDim, false)
			l.kNorm = b.vector(p+"attn_k_norm.weight", c.HeadDim, false)
		}
		l.ffnNorm = b.vector(p+"ffn_norm.weight", c.Embd, false)
		if c.Experts > 0 {
			l.router = b.matrix(p+"ffn_gate_inp.weight", c.Embd, c.Experts)
			l.gateExps = b.experts(p+"ffn_gate_exps.weight", c.Embd, c.ExpertFF, c.Experts)
			l.upExps = b.experts(p+"ffn_up_exps.weight", c.Embd, c.ExpertFF, c.Experts)
			l.downExps = b.experts(p+"ffn_down_exps.weight", c.ExpertFF, c.Embd, c.Experts)
		} else {
			l.gate = b.matrix(p+"ffn_gate.weight", c.Embd, c.FF)
			l.up = b.matrix(p+"ffn_up.weight", c.Embd, c.FF)
			l.down = b.matrix(p+"ffn_down.weight", c.FF, c.Embd)
		}
	}
	if b.err != nil {
		return nil, fmt.Errorf("%w (in %s)", b.err, m.Files[0].Path)
	}
	return w, nil
}
