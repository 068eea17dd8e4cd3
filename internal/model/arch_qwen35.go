package model

import "fmt"

// qwen35, qwen35moe: Qwen3.5 / Qwen3.6 hybrids. Three of every four layers
// (attention.recurrent_layers, else every layer but each
// full_attention_interval-th) are Gated DeltaNet layers with recurrent
// state (see DeltaNet); the others gated full attention:
//
//	q|gate = attn_q · h per head; q, k RMS-normalised per head; NEOX rope
//	on the first rope.dimension_count dims (the multi-section rope of the
//	checkpoints is plain NEOX for text); o = attn(q, k, v) ⊙ sigmoid(gate)
//
// then x += FFN(rms(x)·post_attention_norm): SwiGLU (qwen35), or experts
// chosen by softmax, renormalised, plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp · h) (qwen35moe). block_count counts the NextN
// (MTP) layers after the trunk, which the trunk does not run.
func init() {
	register(&family{name: "qwen35", config: qwen35Config(false), layer: qwen35Layer})
	register(&family{name: "qwen35moe", config: qwen35Config(true), layer: qwen35Layer})
}

func qwen35Config(moe bool) func(r *meta, c *Config) error {
	return func(r *meta, c *Config) error {
		c.Rope.NeoX = true
		c.AttnGate = true
		if err := r.nextn(c); err != nil {
			return err
		}
		a := &SSMConfig{State: r.need("ssm.state_size"), KHeads: r.need("ssm.group_count"),
			VHeads: r.need("ssm.time_step_rank"), Conv: r.need("ssm.conv_kernel")}
		if inner := r.opt("ssm.inner_size", a.VHeads*a.State); inner != a.VHeads*a.State {
			return fmt.Errorf("%sssm.inner_size %d is not %d value heads x state %d", r.p, inner, a.VHeads, a.State)
		}
		if a.KHeads > 0 && a.VHeads%a.KHeads != 0 {
			return fmt.Errorf("%d value heads do not share %d key heads evenly", a.VHeads, a.KHeads)
		}
		c.SSM = a
		rec, ok, err := r.layerBools("attention.recurrent_layers", c.Layers, c.NextN)
		if err != nil {
			return err
		}
		c.Recurrent = rec
		if !ok {
			c.Recurrent = make([]bool, max(c.Layers, 0))
			iv := r.need("full_attention_interval")
			for l := range c.Recurrent {
				c.Recurrent[l] = iv > 0 && (l+1)%iv != 0
			}
		}
		if moe {
			r.moe(c, 0)
			c.NormTopKProb = true
			g, err := r.moeRouting(c, GateSoftmax)
			if err != nil {
				return err
			}
			c.Gating = g
		}
		return nil
	}
}

func qwen35Layer(b *binder, l int) *Layer {
	c := b.c
	ly := &Layer{
		AttnNorm: b.norm(blk(l, "attn_norm.weight"), c.Embd),
		FFNNorm:  b.norm(blk(l, "post_attention_norm.weight"), c.Embd),
	}
	if c.IsRecurrent(l) {
		ly.Mix = b.deltaNet(l)
	} else {
		ly.Mix = b.attention(l, AttnOpts{QKNorm: true, OutGate: true})
	}
	if c.MoE(l) {
		ly.FFN = b.moe(l, MoEOpts{Gating: c.Gating, NormTopK: c.NormTopKProb, Shared: c.ExpertShared > 0,
			SharedGate: c.ExpertShared > 0, Act: SwiGLU})
	} else {
		ly.FFN = b.dense(l, SwiGLU)
	}
	return ly
}
