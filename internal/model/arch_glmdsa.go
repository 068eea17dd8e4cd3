package model

import "fmt"

// glm-dsa: GLM-5. deepseek2's layers (MLA, dense leading layers, then
// routed and shared experts with a sigmoid router) whose attention reads
// only the positions DeepSeek sparse attention's lightning indexer selects
// (see Indexer): "full" layers run their own indexer, "shared" ones reuse
// the selection of the full layer before them (attention.indexer.types;
// without it every layer is full).
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
		Eps:   r.optf("attention.layer_norm_epsilon", 0),
		Full:  make([]bool, max(c.Layers, 0)),
	}
	if x.Dim > 512 || x.Dim < c.Rope.Dims {
		return fmt.Errorf("indexer key length %d: want between the rope dims %d and 512", x.Dim, c.Rope.Dims)
	}
	key := r.p + "attention.indexer.types"
	full, ok, err := r.layerBools("attention.indexer.types", c.Layers, 0)
	if err != nil {
		return err
	}
	if ok {
		x.Full = full
	} else {
		for l := range x.Full {
			x.Full[l] = true
		}
	}
	if len(x.Full) > 0 && !x.Full[0] {
		return fmt.Errorf("%s: layer 0 is shared, but no full layer comes before it to share a selection", key)
	}
	c.MLA.Indexer = x
	return nil
}
