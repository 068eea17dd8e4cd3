package model

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/quant"
)

// BERT-style encoders, for embeddings (llama.cpp's llm_build_bert):
//
//	x = LN(tok_embd[t] + token_types[0] + position_embd[pos])   (bert)
//	x = LN(tok_embd[t] + token_types[0])                        (nomic-bert)
//	x = LN(x + o·attn(q, k, v) + o_bias)     attention over the whole input,
//	                                         not causal; nomic-bert rotates q
//	                                         and k (NEOX) and fuses q|k|v
//	x = LN(x + down·gelu(up·x + up_b) + down_b)         (bert)
//	x = LN(x + down·(silu(gate·x) ⊙ up·x))              (nomic-bert)
//
// with LayerNorms (mean and variance, weight and bias) after each residual
// add. The hidden states are pooled as <arch>.pooling_type says (mean, the
// first token [CLS], or the last) and scaled to unit length, as
// llama-embedding does by default. An encoder has no KV cache and no
// output head: the decoder machinery (Model, Forward, Shard) does not run
// it, and a split of one is refused (ReadConfig and New fail with
// ErrEncoder).

// ErrEncoder is the error for an encoder where a generative model is
// needed: generation, a KV cache, a tensor or layer split.
var ErrEncoder = errors.New("the model is an encoder: it computes embeddings, not text")

// Pooling is how an encoder's per-token states become one vector
// (llama.cpp's llama_pooling_type values).
type Pooling int

const (
	PoolNone Pooling = 0
	PoolMean Pooling = 1
	PoolCLS  Pooling = 2
	PoolLast Pooling = 3
	PoolRank Pooling = 4
)

func (p Pooling) String() string {
	switch p {
	case PoolNone:
		return "none"
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	case PoolRank:
		return "rank"
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// encoderFamily is one encoder architecture, registered by GGUF name.
type encoderFamily struct {
	name string
	// nomic: rotary positions instead of a position table, q|k|v in one
	// attn_qkv, a SwiGLU feed-forward without biases.
	nomic bool
}

var encoders = map[string]*encoderFamily{}

func registerEncoder(f *encoderFamily) {
	if _, dup := encoders[f.name]; dup {
		panic("model: encoder " + f.name + " registered twice")
	}
	encoders[f.name] = f
}

func init() {
	registerEncoder(&encoderFamily{name: "bert"})
	registerEncoder(&encoderFamily{name: "nomic-bert", nomic: true})
}

// IsEncoder reports whether architecture name is an encoder braid runs.
func IsEncoder(name string) bool { _, ok := encoders[name]; return ok }

// Encoders lists the encoder architectures, sorted.
func Encoders() []string {
	out := make([]string, 0, len(encoders))
	for n := range encoders {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// EncoderConfig is an encoder's hyper-parameters.
type EncoderConfig struct {
	Arch             string
	Layers, Embd, FF int
	Heads, HeadDim   int
	Vocab, Context   int
	NormEps          float32
	Pooling          Pooling
	Rope             kernels.Rope // nomic-bert only
	nomic            bool
}

// ReadEncoderConfig reads an encoder's hyper-parameters. Pooling none and
// rank are refused: braid serves one normalised vector per input.
func ReadEncoderConfig(m *gguf.Model) (*EncoderConfig, error) {
	name := m.Arch()
	fam, ok := encoders[name]
	if !ok {
		return nil, fmt.Errorf("model: architecture %q is not an encoder braid runs (encoders: bert, nomic-bert)", name)
	}
	r := &meta{m: m, p: name + "."}
	c := &EncoderConfig{Arch: name, nomic: fam.nomic}
	c.Layers = r.need("block_count")
	c.Embd = r.need("embedding_length")
	c.Heads = r.need("attention.head_count")
	c.FF = r.need("feed_forward_length")
	c.Context = r.need("context_length")
	if !r.has("attention.layer_norm_epsilon") {
		r.errs = append(r.errs, r.p+"attention.layer_norm_epsilon")
	}
	c.NormEps = r.optf("attention.layer_norm_epsilon", 1e-12)
	if len(r.errs) > 0 {
		return nil, fmt.Errorf("model: %s: missing or invalid metadata %v", m.Files[0].Path, r.errs)
	}
	if toks, ok := m.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	c.Vocab = r.opt("vocab_size", c.Vocab)
	if c.Layers <= 0 || c.Embd <= 0 || c.Heads <= 0 || c.FF <= 0 || c.Context <= 0 || c.Vocab <= 0 || c.Embd%c.Heads != 0 {
		return nil, fmt.Errorf("model: %s: bad encoder shape: %d layers, embedding %d, %d heads, feed-forward %d, context %d, vocabulary %d",
			m.Files[0].Path, c.Layers, c.Embd, c.Heads, c.FF, c.Context, c.Vocab)
	}
	if kv := r.opt("attention.head_count_kv", c.Heads); kv != c.Heads {
		return nil, fmt.Errorf("model: %s: %d KV heads for %d heads: llama.cpp's %s encoders have as many as heads", m.Files[0].Path, kv, c.Heads, name)
	}
	c.HeadDim = c.Embd / c.Heads
	if b, ok := m.Bool(r.p + "attention.causal"); ok && b {
		return nil, fmt.Errorf("model: %s: %sattention.causal is true: a causal %s is not supported", m.Files[0].Path, r.p, name)
	}
	p := Pooling(r.opt("pooling_type", int(PoolNone)))
	switch p {
	case PoolMean, PoolCLS, PoolLast:
	case PoolNone:
		return nil, fmt.Errorf("model: %s: %spooling_type is none (or absent): it gives one vector per token, and braid serves one per input (mean, cls or last pooling)", m.Files[0].Path, r.p)
	case PoolRank:
		return nil, fmt.Errorf("model: %s: %spooling_type is rank (a reranker's score): not supported, only embeddings (mean, cls or last pooling)", m.Files[0].Path, r.p)
	default:
		return nil, fmt.Errorf("model: %s: %spooling_type %d is not one of mean (1), cls (2), last (3)", m.Files[0].Path, r.p, int(p))
	}
	c.Pooling = p
	if fam.nomic {
		dims := r.opt("rope.dimension_count", c.HeadDim)
		if dims > c.HeadDim || dims%2 != 0 {
			return nil, fmt.Errorf("model: %s: rope dimension count %d does not fit head size %d", m.Files[0].Path, dims, c.HeadDim)
		}
		if s, ok := m.String(r.p + "rope.scaling.type"); ok && s != "" && s != "none" {
			return nil, fmt.Errorf("model: %s: rope scaling %q on an encoder is not supported", m.Files[0].Path, s)
		}
		c.Rope = kernels.Rope{Dims: dims, Base: r.optf("rope.freq_base", 10000), FreqScale: 1, AttnFactor: 1,
			BetaFast: 32, BetaSlow: 1, OrigCtx: c.Context, NeoX: true}
	}
	return c, nil
}

// encoderLayer is one encoder block's weights.
type encoderLayer struct {
	q, k, v, o           kernels.Matrix
	qb, kb, vb, ob       []float32
	attnNormW, attnNormB []float32
	up, gate, down       kernels.Matrix
	upB, downB           []float32
	outNormW, outNormB   []float32
}

// Encoder is a loaded encoder, or one rank's shard of it. It is not safe
// for concurrent use.
type Encoder struct {
	Cfg    EncoderConfig
	pool   *kernels.Pool
	sh     Shard
	comm   Comm
	stage  StageLink
	embed  *gguf.Tensor
	row    int64
	types  []float32 // token type 0's row, or nil
	pos    *gguf.Tensor
	normW  []float32
	normB  []float32
	layers []encoderLayer
}

// shape is the decoder Config of the encoder's shape: what the splitter
// and the binder's helpers read (heads, KV heads as many, FFN width).
func (c *EncoderConfig) shape() *Config {
	return &Config{Arch: c.Arch, Layers: c.Layers, Embd: c.Embd, FF: c.FF, Heads: c.Heads, KVHeads: c.Heads, HeadDim: c.HeadDim, Vocab: c.Vocab}
}

// EncoderSplit cuts an encoder into tp x pp shards as Split cuts a decoder:
// stages of whole layers, and inside a stage each rank's attention heads
// (q, k, v column-parallel, attn_output row-parallel) and FFN columns (up
// and gate column-parallel, down row-parallel), cut on the blocks of the
// row-parallel weights. weights are --tensor-split's (nil: even).
func EncoderSplit(f *gguf.Model, tp, pp int, weights []float64) ([]Shard, error) {
	c, err := ReadEncoderConfig(f)
	if err != nil {
		return nil, err
	}
	dc := c.shape()
	return Split(dc, ColumnBlocks(f, dc), tp, pp, weights)
}

// EncoderOptions say which part of an encoder a rank runs; the zero value
// is the whole encoder on one rank.
type EncoderOptions struct {
	// Shard is this rank's part (EncoderSplit); nil is the whole.
	Shard *Shard
	// Comm joins the ranks of a stage (Single when nil).
	Comm Comm
	// Stage carries the hidden states between stages (needed when the
	// encoder has more than one stage).
	Stage StageLink
}

// NewEncoder binds a whole encoder's weights (views of the mapped file).
func NewEncoder(f *gguf.Model, pool *kernels.Pool) (*Encoder, error) {
	return NewEncoderShard(f, pool, EncoderOptions{})
}

// NewEncoderShard binds one rank's part of an encoder.
func NewEncoderShard(f *gguf.Model, pool *kernels.Pool, opt EncoderOptions) (*Encoder, error) {
	c, err := ReadEncoderConfig(f)
	if err != nil {
		return nil, err
	}
	dc := c.shape()
	sh := FullShard(dc)
	if opt.Shard != nil {
		sh = *opt.Shard
		if err := sh.Validate(dc); err != nil {
			return nil, err
		}
	}
	comm := opt.Comm
	if comm == nil {
		comm = Single{}
	}
	if comm.Size() != sh.TPSize {
		return nil, fmt.Errorf("model: encoder shard %s in a tensor-parallel group of %d", sh.String(), comm.Size())
	}
	if (sh.First > 0 || sh.Last < c.Layers) && opt.Stage == nil {
		return nil, fmt.Errorf("model: encoder shard %s is one stage of several and has no stage link", sh.String())
	}
	b := &binder{m: f, c: dc, sh: &sh}
	E, F, D := c.Embd, c.FF, c.HeadDim
	e := &Encoder{Cfg: *c, pool: pool, sh: sh, comm: comm, stage: opt.Stage}
	hlo, hhi := sh.HeadLo*D, sh.HeadHi*D // this rank's q, k, v values
	if e.embed = b.tensor("token_embd.weight", false, E, c.Vocab); e.embed != nil {
		e.row, _ = e.embed.Type.RowBytes(int64(E))
	}
	if t, ok := f.Tensor("token_types.weight"); ok && b.err == nil {
		if len(t.Shape) != 2 || t.Shape[0] != int64(E) || t.Shape[1] < 1 {
			b.fail("tensor token_types.weight has shape %v, want [%d, types]", t.Shape, E)
		} else {
			rb, _ := t.Type.RowBytes(int64(E))
			e.types = make([]float32, E)
			if err := quant.Dequantize(t.Type, t.Data[:rb], e.types); err != nil {
				b.fail("tensor token_types.weight: %v", err)
			}
		}
	}
	if !c.nomic {
		e.pos = b.tensor("position_embd.weight", false, E, c.Context)
	}
	e.normW = b.norm("token_embd_norm.weight", E)
	e.normB = b.norm("token_embd_norm.bias", E)
	e.layers = make([]encoderLayer, sh.Last-sh.First)
	for i := range e.layers {
		l, L := sh.First+i, &e.layers[i]
		if name := blk(l, "attn_qkv.weight"); c.nomic || b.has(name) {
			// The fused q|k|v rows: this rank's heads of each third.
			if t := b.tensor(name, false, E, 3*E); t != nil {
				L.q = b.rowsOf(name, t.Type, t.Data, E, hlo, hhi)
				L.k = b.rowsOf(name, t.Type, t.Data, E, E+hlo, E+hhi)
				L.v = b.rowsOf(name, t.Type, t.Data, E, 2*E+hlo, 2*E+hhi)
			}
			if bn := blk(l, "attn_qkv.bias"); b.has(bn) {
				L.qb = b.vector(bn, 3*E, false, hlo, hhi)
				L.kb = b.vector(bn, 3*E, false, E+hlo, E+hhi)
				L.vb = b.vector(bn, 3*E, false, 2*E+hlo, 2*E+hhi)
			}
		} else {
			L.q = b.column(blk(l, "attn_q.weight"), E, E, hlo, hhi)
			L.k = b.column(blk(l, "attn_k.weight"), E, E, hlo, hhi)
			L.v = b.column(blk(l, "attn_v.weight"), E, E, hlo, hhi)
			L.qb = b.vector(blk(l, "attn_q.bias"), E, true, hlo, hhi)
			L.kb = b.vector(blk(l, "attn_k.bias"), E, true, hlo, hhi)
			L.vb = b.vector(blk(l, "attn_v.bias"), E, true, hlo, hhi)
		}
		// Row-parallel: partial sums, added up across the stage's ranks;
		// the biases after the sum, on every rank alike.
		L.o = b.row(blk(l, "attn_output.weight"), E, E, hlo, hhi)
		L.ob = b.vector(blk(l, "attn_output.bias"), E, true, 0, E)
		L.attnNormW = b.norm(blk(l, "attn_output_norm.weight"), E)
		L.attnNormB = b.norm(blk(l, "attn_output_norm.bias"), E)
		L.up = b.column(blk(l, "ffn_up.weight"), E, F, sh.FFLo, sh.FFHi)
		L.down = b.row(blk(l, "ffn_down.weight"), F, E, sh.FFLo, sh.FFHi)
		if c.nomic {
			L.gate = b.column(blk(l, "ffn_gate.weight"), E, F, sh.FFLo, sh.FFHi)
		} else {
			L.upB = b.vector(blk(l, "ffn_up.bias"), F, true, sh.FFLo, sh.FFHi)
			L.downB = b.vector(blk(l, "ffn_down.bias"), E, true, 0, E)
		}
		L.outNormW = b.norm(blk(l, "layer_output_norm.weight"), E)
		L.outNormB = b.norm(blk(l, "layer_output_norm.bias"), E)
	}
	if b.err != nil {
		return nil, fmt.Errorf("%w (in %s)", b.err, f.Files[0].Path)
	}
	e.Cfg = *c
	return e, nil
}

// geluTable is ggml's CPU GELU: the tanh approximation evaluated in
// float32 once per half-precision input, looked up by the input rounded to
// half precision (ggml-cpu builds with GGML_GELU_FP16), identity from 10 on
// and 0 from -10 down. kernels.GELU evaluates the formula directly; BERT's
// embeddings follow llama.cpp's only with the table.
var geluTable = sync.OnceValue(func() []float32 {
	t := make([]float32, 1<<16)
	const a, s = float32(0.044715), float32(0.79788456080286535587989211986876)
	for i := range t {
		x := quant.F16ToF32(uint16(i))
		g := 0.5 * x * (1 + float32(math.Tanh(float64(s*x*(1+a*x*x)))))
		t[i] = quant.F16ToF32(quant.F32ToF16(g))
	}
	return t
})

func geluF16(x []float32) {
	t := geluTable()
	for i, v := range x {
		switch {
		case v <= -10:
			x[i] = 0
		case v >= 10:
		default:
			x[i] = t[quant.F32ToF16(v)]
		}
	}
}

func addBias(x []float32, n int, bias []float32) {
	if bias == nil {
		return
	}
	w := len(bias)
	for i := 0; i < n; i++ {
		kernels.Add(x[i*w:(i+1)*w], bias)
	}
}

// Hidden returns the final hidden state of every token of one input
// [len(tokens) x Embd]. On a shard, every rank of every stage is called
// with the same tokens: the first stage embeds them, a later one receives
// the hidden states from the stage before, every stage but the last sends
// them on and returns nil; the ranks of a stage add their partial sums up
// after attn_output and ffn_down.
func (e *Encoder) Hidden(tokens []int32) ([]float32, error) {
	c, sh := &e.Cfg, &e.sh
	n, E, D := len(tokens), c.Embd, c.HeadDim
	if n == 0 {
		return nil, fmt.Errorf("model: an encoder input needs at least one token")
	}
	if n > c.Context {
		return nil, fmt.Errorf("model: %d tokens: the encoder takes at most %d (%s.context_length)", n, c.Context, c.Arch)
	}
	x := make([]float32, n*E)
	if sh.First == 0 {
		if err := e.embedTokens(tokens, x); err != nil {
			return nil, err
		}
	} else if err := e.stage.Recv(x); err != nil {
		return nil, fmt.Errorf("model: encoder stage of layers %d-%d receiving: %w", sh.First, sh.Last-1, err)
	}
	H, F := sh.HeadHi-sh.HeadLo, sh.FFHi-sh.FFLo // this rank's heads and FFN columns
	Eh := H * D
	var cos, sin []float32
	if c.nomic {
		half := c.Rope.Dims / 2
		cos, sin = make([]float32, n*half), make([]float32, n*half)
		for i := 0; i < n; i++ {
			c.Rope.CosSin(i, cos[i*half:(i+1)*half], sin[i*half:(i+1)*half])
		}
	}
	q, k, v := make([]float32, n*Eh), make([]float32, n*Eh), make([]float32, n*Eh)
	att, out := make([]float32, n*Eh), make([]float32, n*E)
	up, gate := make([]float32, n*F), make([]float32, n*F)
	scale := float32(1 / math.Sqrt(float64(D)))
	for li := range e.layers {
		L := &e.layers[li]
		clear(out)
		if H > 0 {
			e.pool.MatMulShared(x, n, kernels.MatOut{Dst: q, W: &L.q}, kernels.MatOut{Dst: k, W: &L.k}, kernels.MatOut{Dst: v, W: &L.v})
			addBias(q, n, L.qb)
			addBias(k, n, L.kb)
			addBias(v, n, L.vb)
			if c.nomic {
				half := c.Rope.Dims / 2
				for i := 0; i < n; i++ {
					for h := 0; h < H; h++ {
						c.Rope.Apply(q[i*Eh+h*D:i*Eh+(h+1)*D], cos[i*half:(i+1)*half], sin[i*half:(i+1)*half])
						c.Rope.Apply(k[i*Eh+h*D:i*Eh+(h+1)*D], cos[i*half:(i+1)*half], sin[i*half:(i+1)*half])
					}
				}
			}
			// Every token attends to every token of the input.
			e.pool.For(n*H, func(lo, hi int) {
				scores := make([]float32, n)
				for it := lo; it < hi; it++ {
					i, h := it/H, it%H
					qi := q[i*Eh+h*D : i*Eh+(h+1)*D]
					for j := 0; j < n; j++ {
						scores[j] = kernels.DotF32(qi, k[j*Eh+h*D:j*Eh+(h+1)*D]) * scale
					}
					kernels.Softmax(scores)
					o := att[i*Eh+h*D : i*Eh+(h+1)*D]
					clear(o)
					for j := 0; j < n; j++ {
						kernels.AxpyF32(o, scores[j], v[j*Eh+h*D:j*Eh+(h+1)*D])
					}
				}
			})
			e.pool.MatMul(out, &L.o, att, n)
		}
		if err := e.comm.AllReduceSum(out); err != nil {
			return nil, fmt.Errorf("model: encoder layer %d attention all-reduce: %w", sh.First+li, err)
		}
		addBias(out, n, L.ob)
		for i := 0; i < n; i++ {
			row := x[i*E : (i+1)*E]
			kernels.Add(row, out[i*E:(i+1)*E])
			layerNorm(row, L.attnNormW, L.attnNormB, c.NormEps)
		}
		clear(out)
		if F > 0 {
			if c.nomic {
				e.pool.MatMulShared(x, n, kernels.MatOut{Dst: gate, W: &L.gate}, kernels.MatOut{Dst: up, W: &L.up})
				e.pool.SwiGLU(up, gate, up)
			} else {
				e.pool.MatMul(up, &L.up, x, n)
				addBias(up, n, L.upB)
				geluF16(up)
			}
			e.pool.MatMul(out, &L.down, up, n)
		}
		if err := e.comm.AllReduceSum(out); err != nil {
			return nil, fmt.Errorf("model: encoder layer %d FFN all-reduce: %w", sh.First+li, err)
		}
		addBias(out, n, L.downB)
		for i := 0; i < n; i++ {
			row := x[i*E : (i+1)*E]
			kernels.Add(row, out[i*E:(i+1)*E])
			layerNorm(row, L.outNormW, L.outNormB, c.NormEps)
		}
	}
	if sh.Last < c.Layers {
		if err := e.stage.Send(x); err != nil {
			return nil, fmt.Errorf("model: encoder stage of layers %d-%d sending: %w", sh.First, sh.Last-1, err)
		}
		return nil, nil
	}
	return x, nil
}

// embedTokens writes the input's embeddings (token, type 0 and position,
// layer-normed) into x.
func (e *Encoder) embedTokens(tokens []int32, x []float32) error {
	c := &e.Cfg
	E := c.Embd
	tmp := make([]float32, E)
	for i, t := range tokens {
		if t < 0 || int(t) >= c.Vocab {
			return fmt.Errorf("%w: token %d at index %d is outside the vocabulary of %d", ErrBadBatch, t, i, c.Vocab)
		}
		row := x[i*E : (i+1)*E]
		if err := quant.Dequantize(e.embed.Type, e.embed.Data[int64(t)*e.row:int64(t+1)*e.row], row); err != nil {
			return fmt.Errorf("model: embedding of token %d: %w", t, err)
		}
		if e.types != nil {
			kernels.Add(row, e.types)
		}
		if e.pos != nil {
			rb, _ := e.pos.Type.RowBytes(int64(E))
			if err := quant.Dequantize(e.pos.Type, e.pos.Data[int64(i)*rb:int64(i+1)*rb], tmp); err != nil {
				return fmt.Errorf("model: position embedding %d: %w", i, err)
			}
			kernels.Add(row, tmp)
		}
		layerNorm(row, e.normW, e.normB, c.NormEps)
	}
	return nil
}

// Embed returns the input's pooled hidden state scaled to unit length (on
// a stage other than the last: nil, nil, as Hidden).
func (e *Encoder) Embed(tokens []int32) ([]float32, error) {
	x, err := e.Hidden(tokens)
	if err != nil || x == nil {
		return nil, err
	}
	E, n := e.Cfg.Embd, len(tokens)
	sum := make([]float64, E)
	switch e.Cfg.Pooling {
	case PoolMean:
		for i := 0; i < n; i++ {
			for j, v := range x[i*E : (i+1)*E] {
				sum[j] += float64(v)
			}
		}
		for j := range sum {
			sum[j] /= float64(n)
		}
	case PoolCLS:
		for j, v := range x[:E] {
			sum[j] = float64(v)
		}
	case PoolLast:
		for j, v := range x[(n-1)*E:] {
			sum[j] = float64(v)
		}
	}
	var norm float64
	for _, v := range sum {
		norm += v * v
	}
	norm = math.Sqrt(norm)
	vec := make([]float32, E)
	if norm == 0 {
		return vec, nil
	}
	for j, v := range sum {
		vec[j] = float32(v / norm)
	}
	return vec, nil
}
