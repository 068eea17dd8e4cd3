package model

import (
	"fmt"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/quant"
)

// binder looks tensors up by GGUF name and checks their shapes, collecting
// the first error so the binding code reads as a list. It slices each weight
// to the shard and counts the bytes this rank keeps resident; with dry set
// it only counts (for plans), copying nothing.
//
// The linear layers come in three kinds, named for what a tensor-parallel
// group does with them:
//
//   - column-parallel (Q, K, V, gate, up, the output head): each rank holds
//     some rows of the ggml [in, out] matrix and computes those outputs, a
//     zero-copy view of the mapped file;
//   - row-parallel (attn_output, ffn_down): each rank holds some columns and
//     adds a partial sum of every output, which the group all-reduces; its
//     bias is added by one rank only;
//   - replicated (routers): every rank holds all of it.
type binder struct {
	m     *gguf.Model
	c     *Config
	sh    *Shard
	err   error
	dry   bool
	bytes int64
	// pack repacks the linear layers for this CPU's kernels (nil: keep
	// the file's layout, as dry runs and heads read raw do).
	pack *repacker
	// packBytes counts the bytes repacked at load (dry runs too): new
	// memory beside the file's pages.
	packBytes int64
	// prepacked names the tensors of a shard file written repacked
	// (braid split --layout), in layout packedAs: their linear layers
	// are marked, not repacked again.
	prepacked  map[string]bool
	packedAs   kernels.Layout
	prepackedN int
	// trace, when set, sees every linear layer bound with where its bytes
	// lie, and raw collects the tensors also read otherwise (the
	// embedding of a tied head): what a shard file may hold repacked.
	trace    func(src linearSrc, m kernels.Matrix)
	raw      map[string]bool
	inLinear bool
}

// linearSrc is where a bound linear layer's bytes lie in its tensor:
// Count runs of Len bytes, Stride apart, from byte Off (the rows of a
// column-parallel slice are one run, the columns of a row-parallel one a
// run per row), concatenated in that order.
type linearSrc struct {
	Tensor                  string
	Off, Len, Stride, Count int64
}

// rowsSrc is where rowsOf's rows lie, for a matrix starting at byte base
// of its tensor (an expert's).
func rowsSrc(name string, t quant.Type, base int64, cols, r0, r1 int) linearSrc {
	rb, _ := t.RowBytes(int64(cols))
	n := rb * int64(r1-r0)
	return linearSrc{Tensor: name, Off: base + rb*int64(r0), Len: n, Stride: n, Count: 1}
}

// colsSrc is where colsOf's columns lie.
func colsSrc(name string, t quant.Type, base int64, rows, cols, c0, c1 int) linearSrc {
	if c0 == 0 && c1 == cols {
		return rowsSrc(name, t, base, cols, 0, rows)
	}
	rb, _ := t.RowBytes(int64(cols))
	lo, _ := t.RowBytes(int64(c0))
	hi, _ := t.RowBytes(int64(c1))
	return linearSrc{Tensor: name, Off: base + lo, Len: hi - lo, Stride: rb, Count: int64(rows)}
}

// linear is a linear layer as the kernels read it: repacked where this
// CPU's kernels want another layout (see repacker.linear), or marked so
// where the shard file holds it repacked already.
func (b *binder) linear(src linearSrc, m kernels.Matrix) kernels.Matrix {
	if b.trace != nil {
		b.trace(src, m)
	}
	if b.prepacked[src.Tensor] {
		if b.dry || b.err != nil {
			return m
		}
		pm, err := kernels.Prepacked(m, b.packedAs)
		if err != nil {
			b.fail("tensor %s of the shard file is marked %s: %v", src.Tensor, b.packedAs.Versioned(), err)
			return m
		}
		b.prepackedN++
		return pm
	}
	if m.Rows >= 8 && kernels.LayoutFor(m.Type) != kernels.Plain {
		if rb, err := m.Type.RowBytes(int64(m.Cols)); err == nil {
			b.packBytes += rb * int64(m.Rows)
		}
	}
	return b.pack.linear(m)
}

// linearTensor is tensor for the linear layers, which a shard file may
// hold repacked.
func (b *binder) linearTensor(name string, shape ...int) *gguf.Tensor {
	b.inLinear = true
	t := b.tensor(name, false, shape...)
	b.inLinear = false
	return t
}

func (b *binder) fail(format string, a ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("model: "+format, a...)
	}
}

// blk is the GGUF name of layer l's tensor.
func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// has reports whether the model has a tensor (for optional parts whose
// presence decides the computation, such as QK-norm).
func (b *binder) has(name string) bool {
	_, ok := b.m.Tensor(name)
	return ok
}

func (b *binder) tensor(name string, optional bool, shape ...int) *gguf.Tensor {
	if b.err != nil {
		return nil
	}
	if b.raw != nil && !b.inLinear {
		b.raw[name] = true
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

// column binds outputs [lo, hi) of the linear layer name with in inputs and
// out outputs (ggml shape [in, out]): a column-parallel slice.
func (b *binder) column(name string, in, out, lo, hi int) kernels.Matrix {
	t := b.linearTensor(name, in, out)
	if t == nil {
		return kernels.Matrix{}
	}
	return b.linear(rowsSrc(name, t.Type, 0, in, lo, hi), b.rowsOf(name, t.Type, t.Data, in, lo, hi))
}

// row binds inputs [lo, hi) of the linear layer name (ggml shape [in, out]):
// a row-parallel slice, whose outputs are partial sums.
func (b *binder) row(name string, in, out, lo, hi int) kernels.Matrix {
	t := b.linearTensor(name, in, out)
	if t == nil {
		return kernels.Matrix{}
	}
	return b.linear(colsSrc(name, t.Type, 0, out, in, lo, hi), b.colsOf(name, t.Type, t.Data, out, in, lo, hi))
}

// replicated binds the whole linear layer on every rank.
func (b *binder) replicated(name string, in, out int) kernels.Matrix {
	return b.column(name, in, out, 0, out)
}

// experts binds a 3D expert tensor [in, out, n] as n matrices, each sliced
// to outputs [lo, hi) (column-parallel) or, with byInputs, to inputs
// [lo, hi) (row-parallel).
func (b *binder) experts(name string, in, out, n int, byInputs bool, lo, hi int) []kernels.Matrix {
	t := b.linearTensor(name, in, out, n)
	if t == nil {
		return nil
	}
	per := t.Size / int64(n)
	mats := make([]kernels.Matrix, n)
	for e := range mats {
		base := int64(e) * per
		data := t.Data[base : base+per]
		if byInputs {
			mats[e] = b.linear(colsSrc(name, t.Type, base, out, in, lo, hi), b.colsOf(name, t.Type, data, out, in, lo, hi))
		} else {
			mats[e] = b.linear(rowsSrc(name, t.Type, base, in, lo, hi), b.rowsOf(name, t.Type, data, in, lo, hi))
		}
	}
	return mats
}

// vector binds values [lo, hi) of a 1D tensor of n values of any type as
// float32 (norms are replicated, biases of column-parallel layers sliced
// with their outputs). It returns nil for an absent optional tensor.
func (b *binder) vector(name string, n int, optional bool, lo, hi int) []float32 {
	t := b.tensor(name, optional, n)
	if t == nil {
		return nil
	}
	return b.floats(name, t, n, lo, hi)
}

// floats dequantizes a tensor of n values and keeps [lo, hi).
func (b *binder) floats(name string, t *gguf.Tensor, n, lo, hi int) []float32 {
	b.bytes += 4 * int64(hi-lo)
	if b.dry {
		return nil
	}
	v := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		b.fail("tensor %s: %v", name, err)
		return nil
	}
	return v[lo:hi:hi]
}

// norm binds a replicated norm weight of n values.
func (b *binder) norm(name string, n int) []float32 { return b.vector(name, n, false, 0, n) }

// rowBias binds the bias of a row-parallel layer: the whole vector on the
// group's rank 0, nil on the others, so that the all-reduce adds it once.
func (b *binder) rowBias(name string, n int) []float32 {
	t := b.tensor(name, false, n)
	if t == nil || b.sh.TPRank != 0 {
		return nil
	}
	return b.floats(name, t, n, 0, n)
}

// expertVectors binds a 2D per-expert tensor [n, experts] (expert biases)
// as one float32 slice per expert, each cut to [lo, hi).
func (b *binder) expertVectors(name string, n, experts, lo, hi int) [][]float32 {
	t := b.tensor(name, false, n, experts)
	if t == nil {
		return nil
	}
	b.bytes += 4 * int64(experts) * int64(hi-lo)
	out := make([][]float32, experts)
	if b.dry {
		return out
	}
	all := make([]float32, n*experts)
	if err := quant.Dequantize(t.Type, t.Data, all); err != nil {
		b.fail("tensor %s: %v", name, err)
		return nil
	}
	for e := range out {
		out[e] = all[e*n+lo : e*n+hi : e*n+hi]
	}
	return out
}

// rowExpertBias binds the per-expert bias [n, experts] of a row-parallel
// expert layer: every expert's whole vector on the group's rank 0, nil on
// the others (the all-reduce adds it once).
func (b *binder) rowExpertBias(name string, n, experts int) [][]float32 {
	if b.sh.TPRank != 0 {
		b.tensor(name, false, n, experts) // still checked on every rank
		return nil
	}
	return b.expertVectors(name, n, experts, 0, n)
}
