// Package model runs the forward pass of the supported architectures (llama,
// qwen2, qwen3, qwen3moe) over a batch of tokens from several sequences.
//
// Each architecture is written once against a Shard (which slice of each
// weight this rank holds) and a Comm (the collectives between ranks). On a
// single node the Shard is everything and the Comm does nothing; the cluster
// fills both in without touching the architecture code.
package model

import (
	"fmt"
	"math"

	"braid/internal/gguf"
)

// Config is the architecture's hyper-parameters, read from GGUF metadata.
type Config struct {
	Arch                  string
	Layers                int
	Embd                  int
	FF                    int
	Heads, KVHeads        int
	HeadDim               int // key (and query) head size
	ValueDim              int // value head size
	Vocab                 int
	Context               int // training context length
	NormEps               float32
	Rope                  RopeConfig
	Experts, ExpertsUsed  int
	ExpertFF              int
	NormTopKProb          bool // renormalise the selected experts' weights to sum to 1
	QKVBias, QKNorm, NeoX bool
	TiedOutput            bool
}

// RopeConfig is the rotary embedding the GGUF declares.
type RopeConfig struct {
	Dims       int
	Base       float32
	Scaling    string // none, linear, yarn, llama3 (llama3 = rope_freqs tensor)
	Factor     float32
	OrigCtx    int
	AttnFactor float32
	BetaFast   float32
	BetaSlow   float32
	ExtFactor  float32
}

// arch describes what an architecture adds to the common transformer block.
type arch struct {
	neox    bool // NeoX rotary layout (rotate halves, not adjacent pairs)
	qkvBias bool
	qkNorm  bool
	moe     bool
}

// archs is filled by the per-architecture files.
var archs = map[string]arch{}

// ReadConfig reads the hyper-parameters of a supported architecture.
func ReadConfig(m *gguf.Model) (*Config, error) {
	name := m.Arch()
	a, ok := archs[name]
	if !ok {
		if name == "" {
			return nil, fmt.Errorf("model: %s has no general.architecture", m.Files[0].Path)
		}
		return nil, fmt.Errorf("model: architecture %q is not supported (supported: llama, qwen2, qwen3, qwen3moe)", name)
	}
	p := name + "."
	var errs []string
	need := func(key string) int {
		v, ok := m.Int(p + key)
		if !ok || v <= 0 || v > math.MaxInt32 {
			errs = append(errs, p+key)
			return 0
		}
		return int(v)
	}
	opt := func(key string, def int) int {
		if v, ok := m.Int(p + key); ok && v > 0 && v <= math.MaxInt32 {
			return int(v)
		}
		return def
	}
	optf := func(key string, def float32) float32 {
		if v, ok := m.Float(p + key); ok {
			return float32(v)
		}
		return def
	}
	c := &Config{Arch: name, QKVBias: a.qkvBias, QKNorm: a.qkNorm, NeoX: a.neox}
	c.Layers = need("block_count")
	c.Embd = need("embedding_length")
	c.Heads = need("attention.head_count")
	if a.moe {
		c.Experts = need("expert_count")
		c.ExpertsUsed = need("expert_used_count")
		c.FF = opt("feed_forward_length", 0)
		c.ExpertFF = need("expert_feed_forward_length")
		c.NormTopKProb = true // llama.cpp's qwen3moe graph renormalises the top-k weights
		if v, ok := m.Bool(p + "expert_weights_norm"); ok {
			c.NormTopKProb = v
		}
	} else {
		c.FF = need("feed_forward_length")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("model: %s: missing or invalid metadata %v", m.Files[0].Path, errs)
	}
	c.KVHeads = opt("attention.head_count_kv", c.Heads)
	c.HeadDim = opt("attention.key_length", c.Embd/c.Heads)
	c.ValueDim = opt("attention.value_length", c.HeadDim)
	c.Context = opt("context_length", 2048)
	c.NormEps = optf("attention.layer_norm_rms_epsilon", 1e-5)
	if c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("model: %d attention heads are not a multiple of %d KV heads", c.Heads, c.KVHeads)
	}
	if c.ValueDim != c.HeadDim {
		return nil, fmt.Errorf("model: value head size %d differs from key head size %d (not supported yet)", c.ValueDim, c.HeadDim)
	}
	if toks, ok := m.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	c.Vocab = opt("vocab_size", c.Vocab)

	r := &c.Rope
	r.Dims = opt("rope.dimension_count", c.HeadDim)
	r.Base = optf("rope.freq_base", 10000)
	r.Scaling = "none"
	if s, ok := m.String(p + "rope.scaling.type"); ok && s != "" {
		r.Scaling = s
	}
	r.Factor = optf("rope.scaling.factor", 0)
	if r.Factor == 0 {
		r.Factor = 1
	}
	r.OrigCtx = opt("rope.scaling.original_context_length", c.Context)
	r.AttnFactor = optf("rope.scaling.attn_factor", 1)
	r.BetaFast = optf("rope.scaling.yarn_beta_fast", 32)
	r.BetaSlow = optf("rope.scaling.yarn_beta_slow", 1)
	switch r.Scaling {
	case "none", "linear":
	case "yarn":
		r.ExtFactor = 1
	default:
		return nil, fmt.Errorf("model: rope scaling %q is not supported (none, linear, yarn; llama3 comes as a rope_freqs tensor)", r.Scaling)
	}
	if r.Dims > c.HeadDim || r.Dims%2 != 0 {
		return nil, fmt.Errorf("model: rope dimension count %d does not fit head size %d", r.Dims, c.HeadDim)
	}
	return c, nil
}
