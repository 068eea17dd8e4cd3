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
// first error so the binding code reads as a list. It slices each weight to
// the shard and counts the bytes this rank keeps resident; with dry set it
// only counts (for plans), copying nothing.
type binder struct {
	m     *gguf.Model
	err   error
	dry   bool
	bytes int64
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

// rowsOf views rows [r0, r1) of a row-major [rows x cols] matrix stored in
// data (zero-copy: the rows of a block format are contiguous).
func (b *binder) rowsOf(name string, t quant.Type, data []byte, cols, r0, r1 int) kernels.Matrix {
	rb, err := t.RowBytes(int64(cols))
	if err != nil {
		b.fail("tensor %s: %v", name, err)
		return kernels.Matrix{}
	}
	b.bytes += rb * int64(r1-r0)
	mat := kernels.Matrix{Type: t, Rows: r1 - r0, Cols: cols}
	if b.dry {
		return mat
	}
	mat.Data, err = quant.RowSlice(t, data, cols, r0, r1)
	if err != nil {
		b.fail("tensor %s rows [%d,%d): %v", name, r0, r1, err)
	}
	return mat
}

// colsOf copies columns [c0, c1) of a row-major [rows x cols] matrix; the
// whole matrix stays a view. The cut must fall on block boundaries.
func (b *binder) colsOf(name string, t quant.Type, data []byte, rows, cols, c0, c1 int) kernels.Matrix {
	if c0 == 0 && c1 == cols {
		return b.rowsOf(name, t, data, cols, 0, rows)
	}
	if bs := t.BlockSize(); c0%bs != 0 || c1%bs != 0 {
		b.fail("tensor %s is %v with %d-column blocks: columns [%d,%d) do not fall on block boundaries", name, t, bs, c0, c1)
		return kernels.Matrix{}
	}
	rb, err := t.RowBytes(int64(c1 - c0))
	if err != nil {
		b.fail("tensor %s: %v", name, err)
		return kernels.Matrix{}
	}
	b.bytes += rb * int64(rows)
	mat := kernels.Matrix{Type: t, Rows: rows, Cols: c1 - c0}
	if b.dry || c1 == c0 {
		return mat
	}
	mat.Data, err = quant.ColSlice(t, data, rows, cols, c0, c1)
	if err != nil {
		b.fail("tensor %s columns [%d,%d): %v", name, c0, c1, err)
	}
	return mat
}

// rows binds rows [r0, r1) of a 2D weight of ggml shape [cols, rows]
// (column-parallel: each rank computes some outputs).
func (b *binder) rows(name string, cols, rows, r0, r1 int) kernels.Matrix {
	t := b.tensor(name, false, cols, rows)
	if t == nil {
		return kernels.Matrix{}
	}
	return b.rowsOf(name, t.Type, t.Data, cols, r0, r1)
}

// cols binds columns [c0, c1) of a 2D weight of ggml shape [cols, rows]
// (row-parallel: each rank adds a partial sum of every output).
func (b *binder) cols(name string, cols, rows, c0, c1 int) kernels.Matrix {
	t := b.tensor(name, false, cols, rows)
	if t == nil {
		return kernels.Matrix{}
	}
	return b.colsOf(name, t.Type, t.Data, rows, cols, c0, c1)
}

// experts binds a 3D expert tensor [cols, rows, n] as n matrices, each
// sliced to rows [r0, r1) or, with byCols, to columns [r0, r1).
func (b *binder) experts(name string, cols, rows, n int, byCols bool, r0, r1 int) []kernels.Matrix {
	t := b.tensor(name, false, cols, rows, n)
	if t == nil {
		return nil
	}
	per := t.Size / int64(n)
	out := make([]kernels.Matrix, n)
	for e := range out {
		data := t.Data[int64(e)*per : int64(e+1)*per]
		if byCols {
			out[e] = b.colsOf(name, t.Type, data, rows, cols, r0, r1)
		} else {
			out[e] = b.rowsOf(name, t.Type, data, cols, r0, r1)
		}
	}
	return out
}

// vector binds values [lo, hi) of a 1D tensor of n values of any type as
// float32 (norms are replicated, biases sliced with their rows).
func (b *binder) vector(name string, n int, optional bool, lo, hi int) []float32 {
	t := b.tensor(name, optional, n)
	if t == nil {
		return nil
	}
	b.bytes += 4 * int64(hi-lo)
	if b.dry {
		return nil
	}
	v := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		b.fail("tensor %s: %v", name, err)
	}
	return v[lo:hi:hi]
}

// bindWeights binds the shard's slice of every weight. It returns the bytes
// the rank keeps resident: the slices it reads from the mapped file or
// copies, and its float32 norms and biases.
func bindWeights(m *gguf.Model, c *Config, sh *Shard, dry bool) (*weights, int64, error) {
	b := &binder{m: m, dry: dry}
	w := &weights{}
	hd := c.HeadDim
	qdim, kvdim := c.Heads*hd, c.KVHeads*hd
	q0, q1, k0, k1 := sh.HeadLo*hd, sh.HeadHi*hd, sh.KVLo*hd, sh.KVHi*hd
	last := sh.LastStage(c)
	if e := b.tensor("token_embd.weight", false, c.Embd, c.Vocab); e != nil {
		w.embed = e
		w.embedRow, _ = e.Type.RowBytes(int64(c.Embd))
		if sh.FirstStage() {
			b.bytes += e.Size
		}
	}
	_, hasOutput := m.Tensor("output.weight")
	c.TiedOutput = !hasOutput
	if last {
		w.outputNorm = b.vector("output_norm.weight", c.Embd, false, 0, c.Embd)
		if hasOutput {
			w.output = b.rows("output.weight", c.Embd, c.Vocab, sh.VocabLo, sh.VocabHi)
		} else if w.embed != nil {
			before := b.bytes
			w.output = b.rowsOf("token_embd.weight", w.embed.Type, w.embed.Data, c.Embd, sh.VocabLo, sh.VocabHi)
			if sh.FirstStage() {
				b.bytes = before // already resident as the embedding
			}
		}
	}
	w.ropeFreqs = b.vector("rope_freqs.weight", c.Rope.Dims/2, true, 0, c.Rope.Dims/2)
	w.layers = make([]layer, sh.Last-sh.First)
	for i := range w.layers {
		l := &w.layers[i]
		p := fmt.Sprintf("blk.%d.", sh.First+i)
		l.attnNorm = b.vector(p+"attn_norm.weight", c.Embd, false, 0, c.Embd)
		l.q = b.rows(p+"attn_q.weight", c.Embd, qdim, q0, q1)
		l.k = b.rows(p+"attn_k.weight", c.Embd, kvdim, k0, k1)
		l.v = b.rows(p+"attn_v.weight", c.Embd, kvdim, k0, k1)
		l.o = b.cols(p+"attn_output.weight", qdim, c.Embd, q0, q1)
		if c.QKVBias {
			l.qBias = b.vector(p+"attn_q.bias", qdim, false, q0, q1)
			l.kBias = b.vector(p+"attn_k.bias", kvdim, false, k0, k1)
			l.vBias = b.vector(p+"attn_v.bias", kvdim, false, k0, k1)
		}
		if c.QKNorm {
			l.qNorm = b.vector(p+"attn_q_norm.weight", hd, false, 0, hd)
			l.kNorm = b.vector(p+"attn_k_norm.weight", hd, false, 0, hd)
		}
		l.ffnNorm = b.vector(p+"ffn_norm.weight", c.Embd, false, 0, c.Embd)
		if c.Experts > 0 {
			l.router = b.rows(p+"ffn_gate_inp.weight", c.Embd, c.Experts, 0, c.Experts)
			l.gateExps = b.experts(p+"ffn_gate_exps.weight", c.Embd, c.ExpertFF, c.Experts, false, sh.ExpFFLo, sh.ExpFFHi)
			l.upExps = b.experts(p+"ffn_up_exps.weight", c.Embd, c.ExpertFF, c.Experts, false, sh.ExpFFLo, sh.ExpFFHi)
			l.downExps = b.experts(p+"ffn_down_exps.weight", c.ExpertFF, c.Embd, c.Experts, true, sh.ExpFFLo, sh.ExpFFHi)
		} else {
			l.gate = b.rows(p+"ffn_gate.weight", c.Embd, c.FF, sh.FFLo, sh.FFHi)
			l.up = b.rows(p+"ffn_up.weight", c.Embd, c.FF, sh.FFLo, sh.FFHi)
			l.down = b.cols(p+"ffn_down.weight", c.FF, c.Embd, sh.FFLo, sh.FFHi)
		}
	}
	if b.err != nil {
		return nil, 0, fmt.Errorf("%w (in %s)", b.err, m.Files[0].Path)
	}
	return w, b.bytes, nil
}

// ColumnBlocks finds the coarsest block type of each row-parallel weight
// (attn_output, ffn_down, ffn_down_exps) over all layers: the tensor split
// must cut their columns at multiples of its block size.
func ColumnBlocks(m *gguf.Model, c *Config) Blocks {
	var blk Blocks
	coarser := func(cur *quant.Type, name string) {
		if t, ok := m.Tensor(name); ok && t.Type.BlockSize() > cur.BlockSize() {
			*cur = t.Type
		}
	}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		coarser(&blk.AttnOut, p+"attn_output.weight")
		coarser(&blk.Down, p+"ffn_down.weight")
		coarser(&blk.DownExps, p+"ffn_down_exps.weight")
	}
	return blk
}

// WeightBytes is what the shard keeps resident of the model's weights: the
// slices it reads from the mapped file or copies, and its float32 norms and
// biases. It binds nothing.
func WeightBytes(m *gguf.Model, c *Config, sh *Shard) (int64, error) {
	if err := sh.Validate(c); err != nil {
		return 0, err
	}
	cc := *c
	_, n, err := bindWeights(m, &cc, sh, true)
	return n, err
}
