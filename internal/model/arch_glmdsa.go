package model

import (
	"fmt"

	"braid/internal/gguf"
)

// glm-dsa: GLM-5. deepseek2's layers (MLA, dense leading layers, then
// routed and shared experts with a sigmoid router) whose attention reads
// only the positions DeepSeek sparse attention's lightning indexer selects
// (see Indexer): "full" layers run their own indexer, "shared" ones reuse
// the selection of the full layer before them. attention.indexer.types
// says which (one boolean per trunk layer, or one for all); without it, as
// llama.cpp decides for files from before the key: every layer is full
// when context_length is under 2^20 (GLM-5, 5.1), else GLM-5.2's pattern
// (layers 0 and 1 full, then every fourth from layer 2, up to layer 77).
func init() {
	register(&family{name: "glm-dsa", config: glmdsaConfig, layer: deepseek2Layer})
}

func glmdsaConfig(r *meta, c *Config) error {
	if err := deepseek2Config(r, c); err != nil {
		return err
	}
	if c.MLA.QLora == 0 {
		return fmt.Errorf("glm-dsa without a q_lora path: the indexer reads the query's low-rank vector")
	}
	if _, ok := r.m.Int(r.p + "expert_gating_func"); !ok {
		c.Gating = GateSigmoid
	}
	x := &IndexerConfig{
		Heads: r.need("attention.indexer.head_count"),
		Dim:   r.need("attention.indexer.key_length"),
		TopK:  r.need("attention.indexer.top_k"),
		// llama.cpp's glm-dsa loader never reads
		// attention.layer_norm_epsilon: the key's LayerNorm takes eps 0
		// whatever a file says.
		Eps:  0,
		Full: make([]bool, max(c.Layers, 0)),
	}
	if x.Dim > 512 || x.Dim < c.Rope.Dims {
		return fmt.Errorf("indexer key length %d: want between the rope dims %d and 512", x.Dim, c.Rope.Dims)
	}
	// llama.cpp rotates the indexer's queries and keys with a Hadamard
	// matrix of the largest power of two from 64 up that divides the key
	// length, and multiplies it with the whole key: any other length
	// fails its matrix product (ggml_can_mul_mat).
	if x.Dim < 64 || x.Dim&(x.Dim-1) != 0 {
		return fmt.Errorf("%sattention.indexer.key_length %d: llama.cpp's indexer rotation needs a power of two of at least 64", r.p, x.Dim)
	}
	key := r.p + "attention.indexer.types"
	if v, ok := r.m.Get(key); ok && v.Type() != gguf.TypeArray {
		b, isBool := v.Bool()
		if !isBool {
			return fmt.Errorf("%s is %v: want a boolean per layer or one for all", key, v)
		}
		for l := range x.Full {
			x.Full[l] = b
		}
	} else if full, ok, err := r.layerBools("attention.indexer.types", c.Layers, 0); err != nil {
		return err
	} else if ok {
		x.Full = full
	} else {
		for l := range x.Full {
			x.Full[l] = c.Context < 1<<20 || l < 2 || l < 78 && (l-2)%4 == 0
		}
	}
	if len(x.Full) > 0 && !x.Full[0] {
		return fmt.Errorf("%s: layer 0 is shared, but no full layer comes before it to share a selection", key)
	}
	c.MLA.Indexer = x
	return nil
}
