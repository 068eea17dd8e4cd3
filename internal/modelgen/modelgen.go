// Package modelgen writes random-weight GGUF models of any shape: the tiny
// models tests run against, the real-shape models benchmarks time, and the
// model the README's demo inspects. The files carry the same metadata keys
// and tensor names as llama.cpp's conversions, so every reader path is used.
package modelgen

import (
	"fmt"
	"math"

	"braid/internal/gguf"
	"braid/internal/quant"
)

// Config is the shape of a generated model.
type Config struct {
	Arch                    string // llama, qwen2, qwen3, qwen3moe, gpt-oss, the families of families.go, bert or nomic-bert
	Name                    string
	Layers, Embd, FF        int
	Heads, KVHeads, HeadDim int // HeadDim 0 = Embd/Heads
	Vocab                   int // at least 259: specials and the 256 byte tokens
	Context                 int
	Experts, ExpertsUsed    int        // qwen3moe and gpt-oss only
	ExpertFF                int        // qwen3moe and gpt-oss only; 0 = FF
	Type                    quant.Type // matrices; norms, biases, sinks and routers stay F32
	EmbedType               quant.Type // token embedding; 0 = Type
	TiedOutput              bool       // no output.weight: the head reuses token_embd (not gpt-oss)
	// TypeFor, when set, picks each matrix type by tensor name (mixes such
	// as Q4_K_M); it may return 0 to keep Type.
	TypeFor  func(name string) quant.Type
	RopeBase float32 // 0 = 10000 (gpt-oss: 150000)
	NormEps  float32 // RMS norm epsilon; 0 = 1e-6 (gpt-oss: 1e-5)
	// SlidingWindow is gpt-oss's attention.sliding_window, the keys a
	// sliding layer attends to (llama.cpp slides every other layer, the
	// first included); 0 = 128, gpt-oss's.
	SlidingWindow int
	// YaRN rope scaling, written as rope.scaling.*: RopeScale is the context
	// factor, RopeOrigContext the context the model was trained at, and the
	// betas bound the ramp between interpolated and extrapolated
	// frequencies. RopeScale 0 means none, except for gpt-oss, which then
	// gets its real values (32 over 4096 positions, betas 32 and 1) unless
	// RopeScale is negative. The other fields default to those values too.
	RopeScale                  float32
	RopeOrigContext            int
	YarnBetaFast, YarnBetaSlow float32
	Seed                       uint64
	// ShapeOnly lays the model out for File.WriteShape alone: its types
	// need no quantizer (Q2_K, IQ2_XXS), and writing its data is refused.
	ShapeOnly bool `json:"-"`

	// The fields below shape the families added after gpt-oss (see
	// families.go): deepseek2 (DeepSeek-V2/V3: MLA and routed plus shared
	// experts), glm-dsa (GLM-5: deepseek2's layers plus the DSA lightning
	// indexer), glm4moe (GLM-4.5: GQA with biases and QK norm, routed plus
	// shared experts), qwen35 and qwen35moe (Qwen3.5/3.6: Gated DeltaNet
	// layers between gated full-attention layers). For them Layers counts
	// the trunk's decoder layers; block_count is Layers + NextN.

	// NextN is nextn_predict_layers (glm4moe, qwen35, qwen35moe): that
	// many NextN/MTP blocks written after the trunk's layers, as
	// llama.cpp's converter writes GLM-4.5 and Qwen3.5 checkpoints (braid
	// loads them but runs the trunk only).
	NextN int
	// RopeDim is rope.dimension_count, the rotated dims of a head:
	// glm4moe 0 = HeadDim/2 and qwen35 0 = HeadDim/4 (their partial rotary
	// factors); deepseek2 and glm-dsa the MLA rope dims qk_rope_head_dim
	// (0 = 64, DeepSeek-V3's and GLM-5's).
	RopeDim int
	// RopeSections is qwen35's rope.dimension_sections (nil: the rotated
	// pairs in three near-equal sections and a zero, [11, 11, 10, 0] for
	// Qwen3.5's 64 rope dims).
	RopeSections []int32
	// YarnLogMultiplier is rope.scaling.yarn_log_multiplier, written for
	// deepseek2 and glm-dsa with YaRN (RopeScale > 0): 0 = 0.1, what
	// llama.cpp's converter writes for DeepSeek-V3 (0.1 x mscale_all_dim 1).
	YarnLogMultiplier float32

	// Routing of the DeepSeek-style MoE (deepseek2, glm-dsa, glm4moe).
	// LeadingDense is leading_dense_block_count: the first layers run a
	// dense SwiGLU FFN of FF, the others (and any NextN block) experts.
	LeadingDense int
	// ExpertShared is expert_shared_count: shared experts run on every
	// token, together ExpertShared*ExpertFF wide (0 = none).
	ExpertShared int
	// ExpertGroups and ExpertGroupsUsed are expert_group_count and
	// expert_group_used_count (DeepSeek-V3's grouped top-k: 8 and 4),
	// written when ExpertGroups > 0.
	ExpertGroups, ExpertGroupsUsed int
	// ExpertGating is expert_gating_func: 2 (0 means 2) a sigmoid router
	// with an exp_probs_b selection bias and normalised weights
	// (DeepSeek-V3, GLM); 1 softmax without bias, weights not normalised
	// (DeepSeek-V2).
	ExpertGating int
	// ExpertWeightsScale is expert_weights_scale (0 = 2.5, the
	// routed_scaling_factor of DeepSeek-V3, GLM-4.5 and GLM-5).
	ExpertWeightsScale float32

	// Multi-head latent attention (deepseek2, glm-dsa), Heads heads
	// (HeadDim and KVHeads are set from these: nope+rope and 1).
	// QLoraRank is the query's low-rank path (attn_q_a, attn_q_b); 0
	// means a direct attn_q (DeepSeek-V2-Lite; not glm-dsa). KVLoraRank
	// is the compressed KV latent, QKNopeDim the unrotated query/key dims
	// of a head, VHeadDim a head's value dims (0 = QKNopeDim).
	QLoraRank, KVLoraRank, QKNopeDim, VHeadDim int

	// DeepSeek sparse attention's lightning indexer (glm-dsa):
	// attention.indexer.head_count, key_length and top_k, all needed.
	// IndexerFull, when set (one per layer, the first true), is
	// attention.indexer.types: false layers reuse the selection of the
	// full layer before them and have no indexer tensors (GLM-5.2); nil
	// writes no key and every layer full (GLM-5).
	IndexerHeads, IndexerDim, IndexerTopK int
	IndexerFull                           []bool

	// NoQKNorm leaves out glm4moe's attn_q_norm and attn_k_norm (as
	// GLM-4.5-Air has none).
	NoQKNorm bool

	// Gated DeltaNet (qwen35, qwen35moe): SSMState is ssm.state_size,
	// the head size of keys and values; SSMKeyHeads ssm.group_count (key
	// and query heads); SSMValueHeads ssm.time_step_rank (value heads, a
	// multiple of the key heads); SSMConv ssm.conv_kernel (0 = 4). All
	// but SSMConv needed.
	SSMState, SSMKeyHeads, SSMValueHeads, SSMConv int
	// FullAttnInterval is full_attention_interval (0 = 4): without
	// Recurrent, layer l is a DeltaNet layer unless (l+1) % interval is
	// 0. Recurrent, when set (one per trunk layer), picks the DeltaNet
	// layers itself and is written as attention.recurrent_layers (with
	// false for the NextN blocks, as newer converters write it).
	FullAttnInterval int
	Recurrent        []bool
	// NoIntervalKey leaves full_attention_interval out of the file (only
	// with Recurrent, which then alone gives the layer kinds).
	NoIntervalKey bool
	// ExpertSharedFF is qwen35moe's expert_shared_feed_forward_length,
	// the width of its sigmoid-gated shared expert (0 = ExpertFF).
	ExpertSharedFF int

	// Encoders (bert, nomic-bert; see encoders.go): Pooling is
	// pooling_type (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4
	// rank) and TokenTypes the rows of token_types (0 = 2, BERT's).
	Pooling, TokenTypes int
}

func (c *Config) fill() error {
	if c.Arch == "" {
		c.Arch = "llama"
	}
	gptOSS := c.Arch == "gpt-oss"
	switch c.Arch {
	case "llama", "qwen2", "qwen3", "qwen3moe", "gpt-oss":
		if c.NextN != 0 {
			return fmt.Errorf("modelgen: %s: %d NextN blocks: they are written for glm4moe, qwen35 and qwen35moe only", c.Arch, c.NextN)
		}
	case "deepseek2", "glm-dsa", "glm4moe", "qwen35", "qwen35moe":
		return c.fillFamily()
	case "bert", "nomic-bert":
		return c.fillEncoder()
	default:
		return fmt.Errorf("modelgen: unsupported architecture %q", c.Arch)
	}
	if c.Name == "" {
		c.Name = "braid-random-" + c.Arch
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Heads <= 0 || c.KVHeads <= 0 || c.Layers <= 0 || c.Embd <= 0 || c.FF <= 0 || c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("modelgen: bad shape layers=%d embd=%d ff=%d heads=%d kv_heads=%d", c.Layers, c.Embd, c.FF, c.Heads, c.KVHeads)
	}
	if c.HeadDim == 0 {
		c.HeadDim = c.Embd / c.Heads
	}
	if c.HeadDim <= 0 {
		return fmt.Errorf("modelgen: head size %d (embd %d, %d heads)", c.HeadDim, c.Embd, c.Heads)
	}
	if c.Vocab < 259 {
		return fmt.Errorf("modelgen: vocabulary of %d tokens is smaller than the 259 special and byte tokens", c.Vocab)
	}
	if c.Context == 0 {
		c.Context = 4096
	}
	if c.moe() {
		if c.Experts <= 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts {
			return fmt.Errorf("modelgen: %s needs 0 < experts_used (%d) <= experts (%d)", c.Arch, c.ExpertsUsed, c.Experts)
		}
		if c.ExpertFF == 0 {
			c.ExpertFF = c.FF
		}
		if c.ExpertFF < 0 {
			return fmt.Errorf("modelgen: expert feed-forward length %d", c.ExpertFF)
		}
	}
	if gptOSS {
		if c.TiedOutput {
			return fmt.Errorf("modelgen: gpt-oss needs its own output.weight (llama.cpp requires it), TiedOutput must be false")
		}
		if c.SlidingWindow == 0 {
			c.SlidingWindow = 128
		}
		if c.RopeScale == 0 {
			c.RopeScale = 32
		}
		if c.NormEps == 0 {
			c.NormEps = 1e-5
		}
		if c.RopeBase == 0 {
			c.RopeBase = 150000
		}
	}
	if c.SlidingWindow < 0 {
		return fmt.Errorf("modelgen: sliding window of %d keys", c.SlidingWindow)
	}
	if c.SlidingWindow > 0 && !gptOSS {
		return fmt.Errorf("modelgen: sliding window %d: only gpt-oss models have one here, not %s", c.SlidingWindow, c.Arch)
	}
	if c.RopeScale > 0 {
		if c.RopeOrigContext == 0 {
			c.RopeOrigContext = 4096
		}
		if c.YarnBetaFast == 0 {
			c.YarnBetaFast = 32
		}
		if c.YarnBetaSlow == 0 {
			c.YarnBetaSlow = 1
		}
		if c.RopeOrigContext < 0 {
			return fmt.Errorf("modelgen: YaRN original context %d", c.RopeOrigContext)
		}
	}
	if c.EmbedType == 0 {
		c.EmbedType = c.Type
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-6
	}
	return nil
}

// moe reports whether the architecture routes its FFN through experts.
func (c *Config) moe() bool { return c.Arch == "qwen3moe" || c.Arch == "gpt-oss" }

// Build returns a Writer holding the whole model, ready to write. The
// tensors are generated into memory; WriteFile and Plan's File generate
// them while writing instead.
func Build(c Config) (*gguf.Writer, error) {
	f, err := Plan(c)
	if err != nil {
		return nil, err
	}
	w := f.metadata()
	g := f.values()
	for i := range f.tensors {
		t := &f.tensors[i]
		vals := make([]float32, t.values)
		g.fill(t, vals)
		data := make([]byte, t.size)
		if err := quant.Quantize(t.typ, vals, data); err != nil {
			return nil, fmt.Errorf("modelgen: %s: %w", t.name, err)
		}
		if err := w.AddTensor(t.name, t.typ, t.shape, data); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
	}
	return w, nil
}

// WriteFile generates the model and writes it to path, generating each
// tensor as it is written, so that the model is never in memory whole.
func WriteFile(path string, c Config) error {
	f, err := Plan(c)
	if err != nil {
		return err
	}
	return f.WriteFile(path, nil)
}

// setMetadata sets the file's metadata keys, in the order llama.cpp's
// converters write them.
func (c *Config) setMetadata(w *gguf.Writer) {
	if c.encoder() {
		c.setEncoderMetadata(w)
		return
	}
	if c.family() {
		c.setFamilyMetadata(w)
		return
	}
	a := c.Arch + "."
	w.Set("general.architecture", gguf.String(c.Arch))
	w.Set("general.name", gguf.String(c.Name))
	w.Set(a+"context_length", gguf.Uint32(uint32(c.Context)))
	w.Set(a+"embedding_length", gguf.Uint32(uint32(c.Embd)))
	w.Set(a+"block_count", gguf.Uint32(uint32(c.Layers)))
	w.Set(a+"feed_forward_length", gguf.Uint32(uint32(c.FF)))
	w.Set(a+"attention.head_count", gguf.Uint32(uint32(c.Heads)))
	w.Set(a+"attention.head_count_kv", gguf.Uint32(uint32(c.KVHeads)))
	w.Set(a+"attention.key_length", gguf.Uint32(uint32(c.HeadDim)))
	w.Set(a+"attention.value_length", gguf.Uint32(uint32(c.HeadDim)))
	w.Set(a+"rope.dimension_count", gguf.Uint32(uint32(c.HeadDim)))
	w.Set(a+"rope.freq_base", gguf.Float32(c.RopeBase))
	w.Set(a+"attention.layer_norm_rms_epsilon", gguf.Float32(c.NormEps))
	if c.moe() {
		w.Set(a+"expert_count", gguf.Uint32(uint32(c.Experts)))
		w.Set(a+"expert_used_count", gguf.Uint32(uint32(c.ExpertsUsed)))
		w.Set(a+"expert_feed_forward_length", gguf.Uint32(uint32(c.ExpertFF)))
	}
	if c.Arch == "gpt-oss" {
		w.Set(a+"vocab_size", gguf.Uint32(uint32(c.Vocab)))
	}
	if c.RopeScale > 0 {
		w.Set(a+"rope.scaling.type", gguf.String("yarn"))
		w.Set(a+"rope.scaling.factor", gguf.Float32(c.RopeScale))
		w.Set(a+"rope.scaling.original_context_length", gguf.Uint32(uint32(c.RopeOrigContext)))
		w.Set(a+"rope.scaling.yarn_beta_fast", gguf.Float32(c.YarnBetaFast))
		w.Set(a+"rope.scaling.yarn_beta_slow", gguf.Float32(c.YarnBetaSlow))
	}
	if c.SlidingWindow > 0 {
		w.Set(a+"attention.sliding_window", gguf.Uint32(uint32(c.SlidingWindow)))
	}
	addVocab(w, c.Vocab)
}

// tensorSpec is one tensor of a planned file: where it goes and how its
// values are drawn (mean + std * N(0,1), one draw per value in order;
// negExp tensors take -exp of that).
type tensorSpec struct {
	name      string
	typ       quant.Type
	shape     []int64
	values    int64
	size      int64
	offset    int64 // in the data section
	mean, std float64
	negExp    bool
}

// planner lists a model's tensors in file order, the order llama.cpp's
// converters write them in.
type planner struct {
	c       *Config
	tensors []tensorSpec
	err     error
}

// matrix adds a weight matrix: type t unless TypeFor picks another, normal
// values with standard deviation 1/sqrt(ne0) (so a product keeps the scale
// of its input) or, for the token embedding, 1.
func (p *planner) matrix(name string, t quant.Type, std float64, shape ...int) {
	if p.c.TypeFor != nil {
		if tt := p.c.TypeFor(name); tt != 0 {
			t = tt
		}
	}
	p.add(name, t, 0, std, shape)
}

// f32 adds a tensor kept in F32 whatever the file type, as llama-quantize
// keeps norms, biases, attention sinks and expert routers.
func (p *planner) f32(name string, mean, std float64, shape ...int) {
	p.add(name, quant.F32, mean, std, shape)
}

// norm adds a norm weight near 1, as trained models have.
func (p *planner) norm(name string, n int) { p.f32(name, 1, 0.1, n) }

func (p *planner) add(name string, t quant.Type, mean, std float64, shape []int) {
	if p.err != nil {
		return
	}
	sh := make([]int64, len(shape))
	n := int64(1)
	for i, d := range shape {
		sh[i] = int64(d)
		n *= int64(d)
	}
	if !quant.CanQuantize(t) && !p.c.ShapeOnly {
		p.err = fmt.Errorf("modelgen: %s: quantizing to %s is not supported", name, t)
		return
	}
	if _, err := t.RowBytes(sh[0]); err != nil {
		p.err = fmt.Errorf("modelgen: %s %v: %v; pick a type whose block divides %d", name, sh, err, sh[0])
		return
	}
	size, _ := t.RowBytes(n)
	p.tensors = append(p.tensors, tensorSpec{name: name, typ: t, shape: sh, values: n, size: size, mean: mean, std: std})
}

// plan lists the tensors of the model c (filled).
func (c *Config) plan() ([]tensorSpec, error) {
	p := &planner{c: c}
	if c.encoder() {
		c.planEncoder(p)
		return p.tensors, p.err
	}
	if c.family() {
		c.planFamily(p)
		return p.tensors, p.err
	}
	qdim, kvdim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	p.matrix("token_embd.weight", c.EmbedType, 1, c.Embd, c.Vocab)
	for l := 0; l < c.Layers; l++ {
		pre := fmt.Sprintf("blk.%d.", l)
		p.norm(pre+"attn_norm.weight", c.Embd)
		p.matrix(pre+"attn_q.weight", c.Type, inv(c.Embd), c.Embd, qdim)
		p.matrix(pre+"attn_k.weight", c.Type, inv(c.Embd), c.Embd, kvdim)
		p.matrix(pre+"attn_v.weight", c.Type, inv(c.Embd), c.Embd, kvdim)
		if c.Arch == "gpt-oss" {
			c.planGPTOSSLayer(p, pre)
			continue
		}
		p.matrix(pre+"attn_output.weight", c.Type, inv(qdim), qdim, c.Embd)
		if c.Arch == "qwen2" {
			p.f32(pre+"attn_q.bias", 0, 0.1, qdim)
			p.f32(pre+"attn_k.bias", 0, 0.1, kvdim)
			p.f32(pre+"attn_v.bias", 0, 0.1, kvdim)
		}
		if c.Arch == "qwen3" || c.Arch == "qwen3moe" {
			p.norm(pre+"attn_q_norm.weight", c.HeadDim)
			p.norm(pre+"attn_k_norm.weight", c.HeadDim)
		}
		p.norm(pre+"ffn_norm.weight", c.Embd)
		if c.Arch == "qwen3moe" {
			p.f32(pre+"ffn_gate_inp.weight", 0, inv(c.Embd), c.Embd, c.Experts)
			p.matrix(pre+"ffn_gate_exps.weight", c.Type, inv(c.Embd), c.Embd, c.ExpertFF, c.Experts)
			p.matrix(pre+"ffn_up_exps.weight", c.Type, inv(c.Embd), c.Embd, c.ExpertFF, c.Experts)
			p.matrix(pre+"ffn_down_exps.weight", c.Type, inv(c.ExpertFF), c.ExpertFF, c.Embd, c.Experts)
			continue
		}
		p.matrix(pre+"ffn_gate.weight", c.Type, inv(c.Embd), c.Embd, c.FF)
		p.matrix(pre+"ffn_up.weight", c.Type, inv(c.Embd), c.Embd, c.FF)
		p.matrix(pre+"ffn_down.weight", c.Type, inv(c.FF), c.FF, c.Embd)
	}
	p.norm("output_norm.weight", c.Embd)
	if !c.TiedOutput {
		p.matrix("output.weight", c.Type, inv(c.Embd), c.Embd, c.Vocab)
	}
	return p.tensors, p.err
}

// planGPTOSSLayer lists the rest of a gpt-oss layer after attn_q/k/v:
// biases on every attention projection, one learned sink logit per head,
// and an MoE whose router and experts have biases too. The sinks are
// N(0, 1): logits of the order of the attention scores.
func (c *Config) planGPTOSSLayer(p *planner, pre string) {
	qdim, kvdim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	p.f32(pre+"attn_q.bias", 0, 0.1, qdim)
	p.f32(pre+"attn_k.bias", 0, 0.1, kvdim)
	p.f32(pre+"attn_v.bias", 0, 0.1, kvdim)
	p.matrix(pre+"attn_output.weight", c.Type, inv(qdim), qdim, c.Embd)
	p.f32(pre+"attn_output.bias", 0, 0.1, c.Embd)
	p.f32(pre+"attn_sinks.weight", 0, 1, c.Heads)
	p.norm(pre+"post_attention_norm.weight", c.Embd)
	p.f32(pre+"ffn_gate_inp.weight", 0, inv(c.Embd), c.Embd, c.Experts)
	p.f32(pre+"ffn_gate_inp.bias", 0, 0.1, c.Experts)
	p.matrix(pre+"ffn_gate_exps.weight", c.Type, inv(c.Embd), c.Embd, c.ExpertFF, c.Experts)
	p.matrix(pre+"ffn_up_exps.weight", c.Type, inv(c.Embd), c.Embd, c.ExpertFF, c.Experts)
	p.matrix(pre+"ffn_down_exps.weight", c.Type, inv(c.ExpertFF), c.ExpertFF, c.Embd, c.Experts)
	p.f32(pre+"ffn_gate_exps.bias", 0, 0.1, c.ExpertFF, c.Experts)
	p.f32(pre+"ffn_up_exps.bias", 0, 0.1, c.ExpertFF, c.Experts)
	p.f32(pre+"ffn_down_exps.bias", 0, 0.1, c.Embd, c.Experts)
}

// addVocab writes a SentencePiece vocabulary: <unk> <s> </s>, the 256 byte
// tokens (so any text can be encoded), then word pieces.
func addVocab(w *gguf.Writer, n int) {
	tokens := make([]string, 0, n)
	scores := make([]float32, 0, n)
	types := make([]int32, 0, n)
	add := func(s string, score float32, typ int32) {
		tokens = append(tokens, s)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, 2)
	add("<s>", 0, 3)
	add("</s>", 0, 3)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, 6)
	}
	seen := map[string]bool{}
	pieces := []string{"▁"}
	for c := 'a'; c <= 'z'; c++ {
		pieces = append(pieces, string(c), "▁"+string(c))
	}
	for _, a := range "etaoinshrdlu" {
		for _, b := range "etaoinshrdlu" {
			pieces = append(pieces, string(a)+string(b), "▁"+string(a)+string(b))
		}
	}
	for i := 0; len(tokens) < n; i++ {
		var s string
		if i < len(pieces) {
			s = pieces[i]
		} else {
			s = fmt.Sprintf("▁w%d", i)
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		add(s, -float32(len(tokens)), 1)
	}
	w.Set("tokenizer.ggml.model", gguf.String("llama"))
	w.Set("tokenizer.ggml.tokens", gguf.StringArray(tokens))
	w.Set("tokenizer.ggml.scores", gguf.Float32Array(scores))
	w.Set("tokenizer.ggml.token_type", gguf.Int32Array(types))
	w.Set("tokenizer.ggml.unknown_token_id", gguf.Uint32(0))
	w.Set("tokenizer.ggml.bos_token_id", gguf.Uint32(1))
	w.Set("tokenizer.ggml.eos_token_id", gguf.Uint32(2))
	w.Set("tokenizer.ggml.add_bos_token", gguf.Bool(true))
}
