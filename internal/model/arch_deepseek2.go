package model

import (
	"fmt"
	"math"
)

// deepseek2: DeepSeek-V2/V3/R1 (and GLM-4.7-Flash, which uses this graph).
//
//	x += MLA(h),  h = rms(x)·attn_norm  (see MLA: a low-rank query, one
//	     compressed latent row per token, rope on the rope dims only)
//	x += FFN(h),  h = rms(x)·ffn_norm: the first leading_dense_block_count
//	     layers dense SwiGLU, then routed experts (sigmoid or softmax
//	     router, exp_probs_b selection bias, expert groups, weights
//	     normalised and scaled) plus the shared experts
//
// YaRN as llama.cpp applies it here: cos and sin unscaled (the rope's
// attention factor cancels its magnitude factor) and the kq scale
// multiplied by mscale² instead, mscale = 1 + yarn_log_multiplier·ln(factor).
func init() {
	register(&family{name: "deepseek2", config: deepseek2Config, layer: deepseek2Layer})
}

func deepseek2Config(r *meta, c *Config) error {
	a := &MLAConfig{
		QLora:  r.opt("attention.q_lora_rank", 0),
		KVLora: r.need("attention.kv_lora_rank"),
		Rope:   c.Rope.Dims,
	}
	// Converted files give the MLA head sizes as key_length_mla and
	// value_length_mla (key_length/value_length then describe the cached
	// latent row); older ones only key_length/value_length.
	qk := r.opt("attention.key_length_mla", c.HeadDim)
	a.VDim = r.opt("attention.value_length_mla", c.ValueDim)
	a.Nope = qk - a.Rope
	if a.KVLora <= 0 || a.Nope <= 0 || a.VDim <= 0 {
		return fmt.Errorf("MLA with kv_lora_rank %d, query/key head %d (rope %d) and value head %d is not a valid geometry", a.KVLora, qk, a.Rope, a.VDim)
	}
	if r.has("attention.key_length_mla") && (c.HeadDim != a.KVLora+a.Rope || c.ValueDim != a.KVLora) {
		return fmt.Errorf("MLA cache row: key_length %d and value_length %d, want kv_lora_rank+rope %d and kv_lora_rank %d", c.HeadDim, c.ValueDim, a.KVLora+a.Rope, a.KVLora)
	}
	// The attention runs over the cached latent rows: one "KV head" of
	// KVLora+Rope values, the value being its first KVLora.
	c.KVHeads, c.HeadDim, c.ValueDim = 1, a.KVLora+a.Rope, a.KVLora
	mscale := float32(1)
	if c.Rope.Scaling == "yarn" && c.Rope.Factor > 1 {
		lf := float32(math.Log(float64(c.Rope.Factor)))
		mscale = c.Rope.AttnFactor * (1 + r.optf("rope.scaling.yarn_log_multiplier", 0)*lf)
		c.Rope.AttnFactor = 1 / (1 + 0.1*lf)
	}
	a.Scale = mscale * mscale / float32(math.Sqrt(float64(qk)))
	c.MLA = a
	r.moe(c, r.opt("leading_dense_block_count", 0))
	c.NormTopKProb = false
	g, err := r.moeRouting(c, GateSoftmax)
	c.Gating = g
	return err
}

func deepseek2Layer(b *binder, l int) *Layer {
	c := b.c
	ly := &Layer{
		AttnNorm: b.norm(blk(l, "attn_norm.weight"), c.Embd),
		Mix:      b.mla(l),
		FFNNorm:  b.norm(blk(l, "ffn_norm.weight"), c.Embd),
	}
	if c.MoE(l) {
		ly.FFN = b.moe(l, MoEOpts{Gating: c.Gating, NormTopK: c.NormTopKProb, Scale: c.ExpertWeightsScale,
			SelectBias: b.has(blk(l, "exp_probs_b.bias")), Groups: c.ExpertGroups, GroupsUsed: c.ExpertGroupsUsed,
			Shared: c.ExpertShared > 0, Act: SwiGLU})
	} else {
		ly.FFN = b.dense(l, SwiGLU)
	}
	return ly
}
