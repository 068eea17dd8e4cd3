// Package modelgen writes random-weight GGUF models of any shape: the tiny
// models tests run against, the real-shape models benchmarks time, and the
// model the README's demo inspects. The files carry the same metadata keys
// and tensor names as llama.cpp's conversions, so every reader path is used.
package modelgen

import (
	"fmt"
	"math"
	"math/rand/v2"

	"braid/internal/gguf"
	"braid/internal/quant"
)

// Config is the shape of a generated model.
type Config struct {
	Arch                    string // llama, qwen2, qwen3 or qwen3moe
	Name                    string
	Layers, Embd, FF        int
	Heads, KVHeads, HeadDim int // HeadDim 0 = Embd/Heads
	Vocab                   int // at least 259: specials and the 256 byte tokens
	Context                 int
	Experts, ExpertsUsed    int        // qwen3moe only
	ExpertFF                int        // qwen3moe only; 0 = FF
	Type                    quant.Type // matrices; norms and biases stay F32
	EmbedType               quant.Type // token embedding; 0 = Type
	TiedOutput              bool       // no output.weight: the head reuses token_embd
	// TypeFor, when set, picks each matrix type by tensor name (mixes such
	// as Q4_K_M); it may return 0 to keep Type.
	TypeFor  func(name string) quant.Type
	RopeBase float32 // 0 = 10000
	Seed     uint64
}

func (c *Config) fill() error {
	if c.Arch == "" {
		c.Arch = "llama"
	}
	switch c.Arch {
	case "llama", "qwen2", "qwen3", "qwen3moe":
	default:
		return fmt.Errorf("modelgen: unsupported architecture %q", c.Arch)
	}
	if c.Name == "" {
		c.Name = "braid-random-" + c.Arch
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Heads <= 0 || c.Layers <= 0 || c.Embd <= 0 || c.FF <= 0 || c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("modelgen: bad shape layers=%d embd=%d ff=%d heads=%d kv_heads=%d", c.Layers, c.Embd, c.FF, c.Heads, c.KVHeads)
	}
	if c.HeadDim == 0 {
		c.HeadDim = c.Embd / c.Heads
	}
	if c.Vocab < 259 {
		return fmt.Errorf("modelgen: vocabulary of %d tokens is smaller than the 259 special and byte tokens", c.Vocab)
	}
	if c.Context == 0 {
		c.Context = 4096
	}
	if c.Arch == "qwen3moe" {
		if c.Experts <= 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts {
			return fmt.Errorf("modelgen: qwen3moe needs 0 < experts_used (%d) <= experts (%d)", c.ExpertsUsed, c.Experts)
		}
		if c.ExpertFF == 0 {
			c.ExpertFF = c.FF
		}
	}
	if c.EmbedType == 0 {
		c.EmbedType = c.Type
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	return nil
}

// Build returns a Writer holding the whole model, ready to write.
func Build(c Config) (*gguf.Writer, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
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
	w.Set(a+"attention.layer_norm_rms_epsilon", gguf.Float32(1e-6))
	if c.Arch == "qwen3moe" {
		w.Set(a+"expert_count", gguf.Uint32(uint32(c.Experts)))
		w.Set(a+"expert_used_count", gguf.Uint32(uint32(c.ExpertsUsed)))
		w.Set(a+"expert_feed_forward_length", gguf.Uint32(uint32(c.ExpertFF)))
	}
	addVocab(w, c.Vocab)

	g := &gen{w: w, rng: rand.New(rand.NewPCG(c.Seed, 0x6272616964)), typeFor: c.TypeFor}
	qdim, kvdim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	g.tensor("token_embd.weight", c.EmbedType, 1, c.Embd, c.Vocab)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		g.norm(p+"attn_norm.weight", c.Embd)
		g.tensor(p+"attn_q.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, qdim)
		g.tensor(p+"attn_k.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, kvdim)
		g.tensor(p+"attn_v.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, kvdim)
		g.tensor(p+"attn_output.weight", c.Type, 1/math.Sqrt(float64(qdim)), qdim, c.Embd)
		if c.Arch == "qwen2" {
			g.tensor(p+"attn_q.bias", quant.F32, 0.1, qdim)
			g.tensor(p+"attn_k.bias", quant.F32, 0.1, kvdim)
			g.tensor(p+"attn_v.bias", quant.F32, 0.1, kvdim)
		}
		if c.Arch == "qwen3" || c.Arch == "qwen3moe" {
			g.norm(p+"attn_q_norm.weight", c.HeadDim)
			g.norm(p+"attn_k_norm.weight", c.HeadDim)
		}
		g.norm(p+"ffn_norm.weight", c.Embd)
		if c.Arch == "qwen3moe" {
			g.tensor(p+"ffn_gate_inp.weight", quant.F32, 1/math.Sqrt(float64(c.Embd)), c.Embd, c.Experts)
			g.tensor(p+"ffn_gate_exps.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, c.ExpertFF, c.Experts)
			g.tensor(p+"ffn_up_exps.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, c.ExpertFF, c.Experts)
			g.tensor(p+"ffn_down_exps.weight", c.Type, 1/math.Sqrt(float64(c.ExpertFF)), c.ExpertFF, c.Embd, c.Experts)
			continue
		}
		g.tensor(p+"ffn_gate.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, c.FF)
		g.tensor(p+"ffn_up.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, c.FF)
		g.tensor(p+"ffn_down.weight", c.Type, 1/math.Sqrt(float64(c.FF)), c.FF, c.Embd)
	}
	g.norm("output_norm.weight", c.Embd)
	if !c.TiedOutput {
		g.tensor("output.weight", c.Type, 1/math.Sqrt(float64(c.Embd)), c.Embd, c.Vocab)
	}
	return w, g.err
}

// WriteFile generates the model and writes it to path.
func WriteFile(path string, c Config) error {
	w, err := Build(c)
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

type gen struct {
	w       *gguf.Writer
	rng     *rand.Rand
	typeFor func(string) quant.Type
	err     error
}

// tensor adds a tensor of normal random values with the given standard
// deviation; shape is in ggml order (values per row first).
func (g *gen) tensor(name string, t quant.Type, std float64, shape ...int) {
	if g.err != nil {
		return
	}
	if g.typeFor != nil && len(shape) > 1 {
		if tt := g.typeFor(name); tt != 0 {
			t = tt
		}
	}
	n := 1
	sh := make([]int64, len(shape))
	for i, d := range shape {
		n *= d
		sh[i] = int64(d)
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(g.rng.NormFloat64() * std)
	}
	g.add(name, t, sh, vals)
}

// norm adds a norm weight near 1, as trained models have.
func (g *gen) norm(name string, n int) {
	if g.err != nil {
		return
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(1 + 0.1*g.rng.NormFloat64())
	}
	g.add(name, quant.F32, []int64{int64(n)}, vals)
}

func (g *gen) add(name string, t quant.Type, shape []int64, vals []float32) {
	size, err := t.RowBytes(int64(len(vals)))
	if err != nil {
		g.err = fmt.Errorf("modelgen: %s: %w", name, err)
		return
	}
	data := make([]byte, size)
	if err := quant.Quantize(t, vals, data); err != nil {
		g.err = fmt.Errorf("modelgen: %s: %w", name, err)
		return
	}
	if err := g.w.AddTensor(name, t, shape, data); err != nil {
		g.err = fmt.Errorf("modelgen: %w", err)
	}
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
