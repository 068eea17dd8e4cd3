package model

// The Qwen family is llama's layer with the rotation on halves (NeoX
// layout). qwen2 adds biases to Q, K and V; qwen3 RMS-normalises each query
// and key head before the rotation (QK-norm); qwen3moe replaces the FFN by
// a router over experts: softmax over all of them, the top k, their weights
// renormalised (expert_weights_norm, on unless the GGUF says otherwise).
func init() {
	neox := func(_ *meta, c *Config) error {
		c.Rope.NeoX = true
		return nil
	}
	register(&family{name: "qwen2", config: neox, layer: qwenLayer(AttnOpts{QKVBias: true})})
	register(&family{name: "qwen3", config: neox, layer: qwenLayer(AttnOpts{QKNorm: true})})
	register(&family{name: "qwen3moe", config: qwen3moeConfig, layer: qwen3moeLayer})
}

func qwenLayer(opt AttnOpts) func(*binder, int) *Layer {
	return func(b *binder, l int) *Layer {
		return &Layer{
			AttnNorm: b.norm(blk(l, "attn_norm.weight"), b.c.Embd),
			Mix:      b.attention(l, opt),
			FFNNorm:  b.norm(blk(l, "ffn_norm.weight"), b.c.Embd),
			FFN:      b.dense(l, SwiGLU),
		}
	}
}

func qwen3moeConfig(r *meta, c *Config) error {
	c.Rope.NeoX = true
	r.moe(c, 0)
	c.NormTopKProb = true
	if v, ok := r.m.Bool(r.p + "expert_weights_norm"); ok {
		c.NormTopKProb = v
	}
	return nil
}

func qwen3moeLayer(b *binder, l int) *Layer {
	return &Layer{
		AttnNorm: b.norm(blk(l, "attn_norm.weight"), b.c.Embd),
		Mix:      b.attention(l, AttnOpts{QKNorm: true}),
		FFNNorm:  b.norm(blk(l, "ffn_norm.weight"), b.c.Embd),
		FFN:      b.moe(l, MoEOpts{Gating: GateSoftmax, NormTopK: b.c.NormTopKProb, Act: SwiGLU}),
	}
}
