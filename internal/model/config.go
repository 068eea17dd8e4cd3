// Package model runs the forward pass of the supported architectures over a
// batch of tokens from several sequences.
//
// The package is a driver (Forward: embed, stage receive, layers, stage send,
// head) and a set of building blocks (nn_*.go: linear layers bound column- or
// row-parallel, attention, dense and MoE feed-forward) written once against a
// Shard (which slice of each weight this rank holds) and a Comm (the
// collectives between ranks). Each architecture family is one file
// (arch_*.go) that reads its hyper-parameters and composes its layers from
// the blocks, binding weights by their GGUF names. On a single node the
// Shard is everything and the Comm does nothing; the cluster fills both in
// without touching the architecture code.
package model

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"braid/internal/gguf"
)

// Config is the architecture's hyper-parameters, read from GGUF metadata:
// the shape every rank, plan and cache agrees on. What a family does with
// it (biases, norms, gating) is in its arch file.
type Config struct {
	Arch                 string
	Layers               int
	Embd                 int
	FF                   int // dense FFN inner size (0 when every layer is MoE)
	Heads, KVHeads       int
	HeadDim              int // key (and query) head size
	ValueDim             int // value head size
	Vocab                int
	Context              int // training context length
	NormEps              float32
	Rope                 RopeConfig
	Experts, ExpertsUsed int
	ExpertFF             int
	NormTopKProb         bool // renormalise the selected experts' weights to sum to 1
	// ExpertShared experts run on every token besides the routed ones
	// (DeepSeek's expert_shared_count), together SharedFF wide: one FFN
	// of SharedFF columns, split at the routed experts' fractions. SharedFF
	// is ExpertShared*ExpertFF for the DeepSeek/GLM families; qwen35moe
	// gives its one shared expert's width itself (0: none).
	ExpertShared int
	SharedFF     int
	// Routing by groups (DeepSeek-V3): the experts form ExpertGroups
	// groups, each scored by the sum of its two best selection scores, and
	// only the ExpertGroupsUsed best groups are chosen from. 0 or equal
	// counts: no grouping.
	ExpertGroups, ExpertGroupsUsed int
	// ExpertWeightsScale multiplies the routing weights (0: 1).
	ExpertWeightsScale float32
	// Gating is how the router's logits become weights.
	Gating Gating
	// MoELayers marks the layers whose FFN is a mixture of experts (nil
	// when there are no experts); the others run the dense FFN.
	MoELayers []bool
	// MLA is set for multi-head latent attention (DeepSeek-V2/V3, GLM-5):
	// the cache holds one latent row per token, HeadDim = KVLora + its
	// rope dims wide, ValueDim = KVLora.
	MLA *MLAConfig
	// SSM is set for models with Gated DeltaNet (linear attention) layers,
	// Recurrent marking which layers they are.
	SSM       *SSMConfig
	Recurrent []bool
	// NextN is the count of MTP (NextN) blocks after the trunk's Layers;
	// the per-layer kinds above cover them too.
	NextN int
	// AttnGate: the attention's query projection also yields a per-head
	// output gate (Qwen3.5's gated attention).
	AttnGate bool
	// Window is the sliding window of each layer (0: full attention): a
	// query at position t reads keys at positions s with 0 <= t-s < Window.
	Window []int
}

// MLAConfig is the geometry of multi-head latent attention.
type MLAConfig struct {
	QLora  int // rank of the query's low-rank path (0: a direct attn_q)
	KVLora int // width of the compressed KV latent
	Nope   int // per-head query/key dims without rotation
	Rope   int // per-head rotated dims (shared by all heads for the key)
	VDim   int // per-head value dims after attn_v_b
	// Scale is the attention's kq scale (the YaRN mscale squared over
	// sqrt(Nope+Rope)).
	Scale float32
	// Indexer is set for DeepSeek sparse attention (glm-dsa).
	Indexer *IndexerConfig
}

// SSMConfig is the geometry of Gated DeltaNet layers.
type SSMConfig struct {
	State  int // head size of keys and values (ssm.state_size)
	KHeads int // key (and query) heads (ssm.group_count)
	VHeads int // value heads (ssm.time_step_rank); value head j reads key head j mod KHeads
	Conv   int // causal conv kernel (ssm.conv_kernel)
}

// IsRecurrent reports whether layer l is a recurrent (DeltaNet) layer.
func (c *Config) IsRecurrent(l int) bool { return c.Recurrent != nil && c.Recurrent[l] }

// AttnOutDim is the width of one head's attention output, the unit the
// output projection's columns split by.
func (c *Config) AttnOutDim() int {
	switch {
	case c.MLA != nil:
		return c.MLA.VDim
	case c.ValueDim > 0:
		return c.ValueDim
	}
	return c.HeadDim
}

// RopeConfig is the rotary embedding the GGUF declares.
type RopeConfig struct {
	Dims       int
	Base       float32
	NeoX       bool   // rotate halves (x[i], x[i+Dims/2]) instead of adjacent pairs
	Scaling    string // none, linear, yarn (llama3 arrives as a rope_freqs tensor)
	Factor     float32
	OrigCtx    int
	AttnFactor float32
	BetaFast   float32
	BetaSlow   float32
	ExtFactor  float32
	// Still lists the rotated pairs (< Dims/2) that keep position 0 for
	// text tokens and so do not turn: interleaved multi-section rope
	// (qwen35's rope.dimension_sections) takes a pair's position from the
	// section of its sector, and text gives the fourth section position 0.
	Still []int
}

// MoE reports whether layer l's FFN is a mixture of experts.
func (c *Config) MoE(l int) bool { return c.MoELayers != nil && c.MoELayers[l] }

// HasDense and HasMoE say which FFN kinds the model has, so that a split
// cuts each kind it runs.
func (c *Config) HasDense() bool {
	for l := 0; l < c.Layers; l++ {
		if !c.MoE(l) {
			return true
		}
	}
	return false
}

func (c *Config) HasMoE() bool {
	for l := 0; l < c.Layers; l++ {
		if c.MoE(l) {
			return true
		}
	}
	return false
}

// meta reads one architecture's keys ("<arch>.<key>"), collecting the names
// of missing or invalid required keys so a refusal lists all of them.
type meta struct {
	m    *gguf.Model
	p    string
	errs []string
}

func (r *meta) need(key string) int {
	v, ok := r.m.Int(r.p + key)
	if !ok || v <= 0 || v > math.MaxInt32 {
		r.errs = append(r.errs, r.p+key)
		return 0
	}
	return int(v)
}

func (r *meta) opt(key string, def int) int {
	if v, ok := r.m.Int(r.p + key); ok && v > 0 && v <= math.MaxInt32 {
		return int(v)
	}
	return def
}

func (r *meta) optf(key string, def float32) float32 {
	if v, ok := r.m.Float(r.p + key); ok {
		return float32(v)
	}
	return def
}

func (r *meta) has(key string) bool {
	_, ok := r.m.Get(r.p + key)
	return ok
}

// moe reads the expert keys every MoE family shares and marks every layer
// from leading (the count of dense layers before the first MoE layer) on
// as MoE.
func (r *meta) moe(c *Config, leading int) {
	c.Experts = r.need("expert_count")
	c.ExpertsUsed = r.need("expert_used_count")
	c.ExpertFF = r.need("expert_feed_forward_length")
	if c.Layers > 0 && leading < c.Layers {
		c.MoELayers = make([]bool, c.Layers)
		for l := leading; l < c.Layers; l++ {
			c.MoELayers[l] = true
		}
	}
}

// nextn splits off the NextN (MTP) blocks that block_count counts after
// the trunk (nextn_predict_layers): the trunk is c.Layers, they are c.NextN.
func (r *meta) nextn(c *Config) error {
	n := r.opt("nextn_predict_layers", 0)
	if n >= c.Layers && c.Layers > 0 {
		return fmt.Errorf("%d NextN layers of %d blocks leave no trunk", n, c.Layers)
	}
	c.Layers -= n
	c.NextN = n
	c.Window = c.Window[:max(c.Layers, 0)]
	return nil
}

// layerBools reads key, one boolean per layer: layers entries, or up to
// extra more (converters may list the NextN blocks too); ok is false when
// the key is absent.
func (r *meta) layerBools(key string, layers, extra int) (out []bool, ok bool, err error) {
	v, ok := r.m.Get(r.p + key)
	if !ok {
		return nil, false, nil
	}
	if v.Type() != gguf.TypeArray || v.Len() < layers || v.Len() > layers+extra {
		return nil, true, fmt.Errorf("%s%s is %v: want a boolean for each of the %d layers", r.p, key, v, layers)
	}
	out = make([]bool, max(layers, 0))
	for l := range out {
		b, isBool := v.Index(l).Bool()
		if !isBool {
			return nil, true, fmt.Errorf("%s%s entry %d is %v, not a boolean", r.p, key, l, v.Index(l))
		}
		out[l] = b
	}
	return out, true, nil
}

// moeRouting reads the routing keys of the DeepSeek/GLM MoE families:
// gating function, weight normalisation and scale, groups, shared experts.
// It returns the gating (llama.cpp's expert_gating_func: 1 softmax, 2
// sigmoid; def when absent).
func (r *meta) moeRouting(c *Config, def Gating) (Gating, error) {
	g := def
	if v, ok := r.m.Int(r.p + "expert_gating_func"); ok {
		switch v {
		case 1:
			g = GateSoftmax
		case 2:
			g = GateSigmoid
		default:
			return 0, fmt.Errorf("%sexpert_gating_func %d is not supported here (1 softmax, 2 sigmoid)", r.p, v)
		}
	}
	if v, ok := r.m.Bool(r.p + "expert_weights_norm"); ok {
		c.NormTopKProb = v
	}
	c.ExpertWeightsScale = r.optf("expert_weights_scale", 1)
	c.ExpertShared = r.opt("expert_shared_count", 0)
	if sff := r.opt("expert_shared_feed_forward_length", 0); sff > 0 && c.ExpertShared == 0 && c.ExpertFF > 0 && sff%c.ExpertFF == 0 {
		c.ExpertShared = sff / c.ExpertFF // no count key: the width says it
	}
	c.ExpertGroups = r.opt("expert_group_count", 0)
	c.ExpertGroupsUsed = r.opt("expert_group_used_count", c.ExpertGroups)
	if c.ExpertGroups > 64 {
		return 0, fmt.Errorf("%d expert groups: at most 64 are supported", c.ExpertGroups)
	}
	if c.ExpertGroups > 1 && c.Experts > 0 {
		if c.Experts%c.ExpertGroups != 0 || c.ExpertGroupsUsed > c.ExpertGroups || c.ExpertGroupsUsed < 1 {
			return 0, fmt.Errorf("%d experts in %d groups, %d used: groups must divide the experts and 1 <= used <= groups", c.Experts, c.ExpertGroups, c.ExpertGroupsUsed)
		}
		if per := c.Experts / c.ExpertGroups; per < 2 {
			return 0, fmt.Errorf("%d experts in %d groups: a group's score sums its best two, so a group needs at least two", c.Experts, c.ExpertGroups)
		}
		if c.ExpertsUsed > c.ExpertGroupsUsed*(c.Experts/c.ExpertGroups) {
			return 0, fmt.Errorf("%d experts used per token, but the %d chosen groups hold only %d", c.ExpertsUsed, c.ExpertGroupsUsed, c.ExpertGroupsUsed*(c.Experts/c.ExpertGroups))
		}
	}
	if v := r.opt("expert_shared_feed_forward_length", 0); v != 0 && v != c.ExpertShared*c.ExpertFF {
		return 0, fmt.Errorf("shared experts %d wide, not %d shared x %d: not supported", v, c.ExpertShared, c.ExpertFF)
	}
	c.SharedFF = c.ExpertShared * c.ExpertFF
	return g, nil
}

// ReadConfig reads the hyper-parameters of a supported architecture: the
// keys every transformer has here, then the family's own.
func ReadConfig(m *gguf.Model) (*Config, error) {
	name := m.Arch()
	if IsEncoder(name) {
		return nil, fmt.Errorf("model: %s: %w (%s): braid serve runs it for /v1/embeddings; generation, a KV cache and tensor or layer splits are for decoder models",
			m.Files[0].Path, ErrEncoder, name)
	}
	fam, ok := families[name]
	if !ok {
		if name == "" {
			return nil, fmt.Errorf("model: %s has no general.architecture", m.Files[0].Path)
		}
		return nil, fmt.Errorf("model: architecture %q is not supported (supported: %s)", name, strings.Join(Supported(), ", "))
	}
	r := &meta{m: m, p: name + "."}
	c := &Config{Arch: name}
	c.Layers = r.need("block_count")
	c.Embd = r.need("embedding_length")
	c.Heads = r.need("attention.head_count")
	c.FF = r.opt("feed_forward_length", 0)
	if c.Heads > 0 {
		c.KVHeads = r.opt("attention.head_count_kv", c.Heads)
		c.HeadDim = r.opt("attention.key_length", c.Embd/c.Heads)
	}
	c.ValueDim = r.opt("attention.value_length", c.HeadDim)
	c.Context = r.opt("context_length", 2048)
	c.NormEps = r.optf("attention.layer_norm_rms_epsilon", 1e-5)
	if toks, ok := m.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	c.Vocab = r.opt("vocab_size", c.Vocab)
	c.Window = make([]int, max(c.Layers, 0))

	rp := &c.Rope
	rp.Dims = r.opt("rope.dimension_count", c.HeadDim)
	rp.Base = r.optf("rope.freq_base", 10000)
	rp.Scaling = "none"
	if s, ok := m.String(r.p + "rope.scaling.type"); ok && s != "" {
		rp.Scaling = s
	}
	rp.Factor = r.optf("rope.scaling.factor", 0)
	if rp.Factor == 0 {
		rp.Factor = 1
	}
	rp.OrigCtx = r.opt("rope.scaling.original_context_length", c.Context)
	rp.AttnFactor = r.optf("rope.scaling.attn_factor", 1)
	rp.BetaFast = r.optf("rope.scaling.yarn_beta_fast", 32)
	rp.BetaSlow = r.optf("rope.scaling.yarn_beta_slow", 1)

	if err := fam.config(r, c); err != nil {
		return nil, fmt.Errorf("model: %s: %w", m.Files[0].Path, err)
	}
	if len(r.errs) > 0 {
		return nil, fmt.Errorf("model: %s: missing or invalid metadata %v", m.Files[0].Path, r.errs)
	}
	if c.Vocab <= 0 {
		return nil, fmt.Errorf("model: %s: no vocabulary size (%svocab_size or tokenizer.ggml.tokens)", m.Files[0].Path, r.p)
	}
	if c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("model: %d attention heads are not a multiple of %d KV heads", c.Heads, c.KVHeads)
	}
	if c.ValueDim != c.HeadDim && c.MLA == nil {
		return nil, fmt.Errorf("model: value head size %d differs from key head size %d (not supported yet)", c.ValueDim, c.HeadDim)
	}
	if c.HasDense() && c.FF <= 0 {
		return nil, fmt.Errorf("model: %s: dense layers but no %sfeed_forward_length", m.Files[0].Path, r.p)
	}
	if c.HasMoE() && (c.ExpertsUsed > c.Experts) {
		return nil, fmt.Errorf("model: %d experts used per token but only %d experts", c.ExpertsUsed, c.Experts)
	}
	c.extendNextN()
	for l, w := range c.Window {
		if w < 0 || w > c.Context {
			return nil, fmt.Errorf("model: layer %d: sliding window %d is outside the training context of %d positions", l, w, c.Context)
		}
	}
	switch rp.Scaling {
	case "none", "linear":
	case "yarn":
		rp.ExtFactor = 1
	default:
		return nil, fmt.Errorf("model: rope scaling %q is not supported (none, linear, yarn; llama3 comes as a rope_freqs tensor)", rp.Scaling)
	}
	if c.MLA != nil && rp.Dims != c.MLA.Rope {
		return nil, fmt.Errorf("model: rope dimension count %d differs from the MLA rope dims %d", rp.Dims, c.MLA.Rope)
	}
	if rp.Dims > c.HeadDim || rp.Dims%2 != 0 {
		return nil, fmt.Errorf("model: rope dimension count %d does not fit head size %d", rp.Dims, c.HeadDim)
	}
	return c, nil
}

// extendNextN gives the NextN blocks after the trunk their layer kinds: as
// the trunk's last layer for MoE, full attention, no window.
func (c *Config) extendNextN() {
	if c.NextN <= 0 {
		return
	}
	for i := 0; i < c.NextN; i++ {
		c.Window = append(c.Window, 0)
		if c.MoELayers != nil {
			c.MoELayers = append(c.MoELayers, c.Layers > 0 && c.MoELayers[c.Layers-1])
		}
		if c.Recurrent != nil {
			c.Recurrent = append(c.Recurrent, false)
		}
	}
}

// Supported lists the architectures this package runs, sorted.
func Supported() []string {
	out := make([]string, 0, len(families))
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// IsSupported reports whether architecture name (general.architecture) runs.
func IsSupported(name string) bool { _, ok := families[name]; return ok }
