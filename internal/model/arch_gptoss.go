package model

import (
	"fmt"

	"braid/internal/gguf"
)

// gpt-oss (OpenAI's open-weight MoE; llama.cpp's LLM_ARCH_OPENAI_MOE):
//
//	x += o·attn(q, k, v) + o_bias,  h = rms(x)·attn_norm, q/k/v with biases,
//	     softmax rows with one learned sink logit per head, sliding-window
//	     layers (window W) alternating with full ones, the sliding first
//	x += Σ_{e∈topk(r)} softmax(r_topk)_e · (down_e·a_e + down_bias_e),
//	     h = rms(x)·post_attention_norm, r = router·h + router_bias,
//	     a_e = swiglu_oai(gate_e·h + gate_bias_e, up_e·h + up_bias_e)
//
// RoPE is NEOX with YaRN (cos and sin scaled by 1 + 0.1·ln(factor)).
func init() {
	register(&family{name: "gpt-oss", config: gptossConfig, layer: gptossLayer})
}

func gptossConfig(r *meta, c *Config) error {
	c.Rope.NeoX = true
	r.moe(c, 0)
	window := r.need("attention.sliding_window")
	if g, ok := r.m.Get(r.p + "expert_gating_func"); ok {
		// llama.cpp's enum: 1 softmax, 2 sigmoid, 3 softmax over the
		// selected weights, which is gpt-oss's.
		if v, _ := g.Int(); v != 3 {
			return fmt.Errorf("gpt-oss with %sexpert_gating_func %v is not supported (only 3, softmax over the selected experts)", r.p, g)
		}
	}
	sliding, err := slidingLayers(r, c.Layers, 2)
	if err != nil {
		return err
	}
	for l := range c.Window {
		if sliding[l] {
			c.Window[l] = window
		}
	}
	return nil
}

// slidingLayers says which layers use the sliding window: from the
// attention.sliding_window_pattern key when present (a period n: layer l
// slides unless l%n == n-1; or one boolean per layer), else from the
// family's default period.
func slidingLayers(r *meta, layers, period int) ([]bool, error) {
	out := make([]bool, max(layers, 0))
	key := r.p + "attention.sliding_window_pattern"
	if v, ok := r.m.Get(key); ok {
		if v.Type() == gguf.TypeArray {
			out, _, err := r.layerBools("attention.sliding_window_pattern", layers, 0)
			return out, err
		}
		n, ok := v.Int()
		if !ok || n < 1 || n > int64(max(layers, 1)) {
			return nil, fmt.Errorf("%s is %v: want a period between 1 and the %d layers, or one boolean per layer", key, v, layers)
		}
		period = int(n)
	}
	for l := range out {
		out[l] = l%period < period-1
	}
	return out, nil
}

func gptossLayer(b *binder, l int) *Layer {
	return &Layer{
		AttnNorm: b.norm(blk(l, "attn_norm.weight"), b.c.Embd),
		Mix:      b.attention(l, AttnOpts{QKVBias: true, OutBias: true, Sinks: true, Window: b.c.Window[l]}),
		FFNNorm:  b.norm(blk(l, "post_attention_norm.weight"), b.c.Embd),
		FFN:      b.moe(l, MoEOpts{Gating: GateTopKSoftmax, RouterBias: true, ExpertBias: true, Act: SwiGLUOAI}),
	}
}
