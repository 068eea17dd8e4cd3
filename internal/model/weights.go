package model

import (
	"fmt"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/quant"
)

// weights is every tensor the forward pass reads: the embedding and the
// head here, each layer's as its family binds them.
type weights struct {
	embed      *gguf.Tensor
	embedRow   int64 // bytes per token embedding row
	outputNorm []float32
	output     kernels.Matrix
	ropeFreqs  []float32 // llama3 frequency factors, nil if absent
	layers     []*Layer
	mtp        *mtpHead // when asked for and present
	repack     RepackStats
	packBytes  int64 // what binding repacked (or would: dry runs)
}

// bindWeights binds the shard's slice of every weight. It returns the bytes
// the rank keeps resident: the slices it reads from the mapped file or
// copies, and its float32 norms and biases.
func bindWeights(m *gguf.Model, c *Config, sh *Shard, dry, mtp bool) (*weights, int64, error) {
	return bindWeightsWith(m, c, sh, dry, mtp, nil)
}

// bindWeightsWith is bindWeights with the binder set up further by opt
// (PackPlan's tracing).
func bindWeightsWith(m *gguf.Model, c *Config, sh *Shard, dry, mtp bool, opt func(*binder)) (*weights, int64, error) {
	fam, ok := families[c.Arch]
	if !ok {
		return nil, 0, fmt.Errorf("model: architecture %q is not supported", c.Arch)
	}
	b := &binder{m: m, c: c, sh: sh, dry: dry}
	var err error
	if b.packedAs, b.prepacked, err = ShardLayout(m); err != nil {
		return nil, 0, err
	}
	if !dry {
		b.pack = newRepacker(m)
	}
	if opt != nil {
		opt(b)
	}
	w := &weights{}
	if e := b.tensor("token_embd.weight", false, c.Embd, c.Vocab); e != nil {
		w.embed = e
		w.embedRow, _ = e.Type.RowBytes(int64(c.Embd))
		if sh.FirstStage() {
			b.bytes += e.Size
		}
	}
	if sh.LastStage(c) {
		w.outputNorm = b.norm("output_norm.weight", c.Embd)
		if b.has("output.weight") {
			w.output = b.column("output.weight", c.Embd, c.Vocab, sh.VocabLo, sh.VocabHi)
		} else if w.embed != nil {
			// Tied: the head reads the embedding's rows.
			before := b.bytes
			// Its source pages are dropped too once repacked: the
			// embedding reads a few rows a step, which the page cache
			// maps back on first touch.
			w.output = b.linear(rowsSrc("token_embd.weight", w.embed.Type, 0, c.Embd, sh.VocabLo, sh.VocabHi),
				b.rowsOf("token_embd.weight", w.embed.Type, w.embed.Data, c.Embd, sh.VocabLo, sh.VocabHi))
			if sh.FirstStage() {
				b.bytes = before // already resident as the embedding
			}
		}
	}
	w.ropeFreqs = b.vector("rope_freqs.weight", c.Rope.Dims/2, true, 0, c.Rope.Dims/2)
	w.layers = make([]*Layer, sh.Last-sh.First)
	for i := range w.layers {
		w.layers[i] = fam.layer(b, sh.First+i)
		if b.err == nil && (w.layers[i] == nil || w.layers[i].Mix == nil || w.layers[i].FFN == nil) {
			b.fail("architecture %s bound no block for layer %d", c.Arch, sh.First+i)
		}
	}
	if mtp && c.NextN > 0 && sh.LastStage(c) && b.err == nil {
		w.mtp = bindMTP(b, fam, w)
	}
	w.repack = b.pack.wait()
	w.repack.Prepacked, w.repack.PrepackedAs = b.prepackedN, b.packedAs
	w.packBytes = b.packBytes
	if b.err != nil {
		return nil, 0, fmt.Errorf("%w (in %s)", b.err, m.Files[0].Path)
	}
	return w, b.bytes, nil
}

// ColumnBlocks finds the coarsest block type of each row-parallel weight
// (attn_output, ffn_down, ffn_down_exps) over all layers: the tensor split
// must cut their columns at multiples of its block size.
func ColumnBlocks(m *gguf.Model, c *Config) Blocks {
	var bl Blocks
	coarser := func(cur *quant.Type, name string) {
		if t, ok := m.Tensor(name); ok && t.Type.BlockSize() > cur.BlockSize() {
			*cur = t.Type
		}
	}
	for i := 0; i < c.Layers; i++ {
		coarser(&bl.AttnOut, blk(i, "attn_output.weight"))
		coarser(&bl.Down, blk(i, "ffn_down.weight"))
		coarser(&bl.DownExps, blk(i, "ffn_down_exps.weight"))
		// The shared experts are cut where the routed ones are.
		coarser(&bl.DownExps, blk(i, "ffn_down_shexp.weight"))
		coarser(&bl.SSMOut, blk(i, "ssm_out.weight"))
	}
	return bl
}

// RepackBytes is the part of WeightBytes that loading repacks for this
// CPU's kernels into new memory (kernels.LayoutFor): the dry run's count.
func RepackBytes(m *gguf.Model, c *Config, sh *Shard) (int64, error) {
	if err := sh.Validate(c); err != nil {
		return 0, err
	}
	cc := *c
	w, _, err := bindWeights(m, &cc, sh, true, false)
	if err != nil {
		return 0, err
	}
	return w.packBytes, nil
}

// WeightBytes is what the shard keeps resident of the model's weights: the
// slices it reads from the mapped file or copies, and its float32 norms and
// biases. It binds nothing.
func WeightBytes(m *gguf.Model, c *Config, sh *Shard) (int64, error) {
	if err := sh.Validate(c); err != nil {
		return 0, err
	}
	cc := *c
	_, n, err := bindWeights(m, &cc, sh, true, false)
	return n, err
}
