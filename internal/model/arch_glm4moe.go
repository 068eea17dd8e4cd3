package model

// glm4moe: GLM-4.5 / 4.6 / 4.7.
//
//	x += o · attn(q, k, v),  h = rms(x)·attn_norm, q/k/v with biases,
//	     per-head QK RMS norm when the file has it, NEOX rope on the first
//	     rope.dimension_count dims of each head (the rest unrotated)
//	x += FFN(h),             h = rms(x)·post_attention_norm: the first
//	     leading_dense_block_count layers dense SwiGLU, then
//	     Σ_{e∈topk(p+b)} w_e·expert_e(h) + shared(h) with p = sigmoid(router·h),
//	     b = exp_probs_b, w = p_sel / Σ p_sel · expert_weights_scale
//
// block_count counts the NextN (MTP) layers appended after the trunk
// (nextn_predict_layers); the trunk does not run them.
func init() {
	register(&family{name: "glm4moe", config: glm4moeConfig, layer: glm4moeLayer})
}

func glm4moeConfig(r *meta, c *Config) error {
	c.Rope.NeoX = true
	if err := r.nextn(c); err != nil {
		return err
	}
	r.moe(c, r.opt("leading_dense_block_count", 0))
	c.NormTopKProb = true
	g, err := r.moeRouting(c, GateSigmoid)
	c.Gating = g
	return err
}

func glm4moeLayer(b *binder, l int) *Layer {
	c := b.c
	attn := AttnOpts{QKVBias: true, QKNorm: b.has(blk(l, "attn_q_norm.weight"))}
	ly := &Layer{
		AttnNorm: b.norm(blk(l, "attn_norm.weight"), c.Embd),
		Mix:      b.attention(l, attn),
		FFNNorm:  b.norm(blk(l, "post_attention_norm.weight"), c.Embd),
	}
	if c.MoE(l) {
		ly.FFN = b.moe(l, MoEOpts{Gating: c.Gating, NormTopK: c.NormTopKProb, Scale: c.ExpertWeightsScale,
			SelectBias: true, Groups: c.ExpertGroups, GroupsUsed: c.ExpertGroupsUsed, Shared: c.ExpertShared > 0, Act: SwiGLU})
	} else {
		ly.FFN = b.dense(l, SwiGLU)
	}
	return ly
}
