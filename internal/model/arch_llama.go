package model

// llama: Llama 1/2/3.x, Mistral and llama2.c conversions.
//
//	x += o · attn(rope(q·h), rope(k·h), v·h),  h = rms(x)·attn_norm
//	x += down · (silu(gate·h) ⊙ up·h),         h = rms(x)·ffn_norm
//
// RoPE rotates adjacent pairs; llama3's frequency scaling arrives as the
// rope_freqs tensor.
func init() {
	register(&family{name: "llama", config: func(*meta, *Config) error { return nil }, layer: llamaLayer})
}

func llamaLayer(b *binder, l int) *Layer {
	return &Layer{
		AttnNorm: b.norm(blk(l, "attn_norm.weight"), b.c.Embd),
		Mix:      b.attention(l, AttnOpts{}),
		FFNNorm:  b.norm(blk(l, "ffn_norm.weight"), b.c.Embd),
		FFN:      b.dense(l, SwiGLU),
	}
}
