package model

import (
	"fmt"
	"math"

	"braid/internal/gguf"
)

// qwen35, qwen35moe: Qwen3.5 / Qwen3.6 hybrids. The layers
// attention.recurrent_layers marks (else every layer but each
// full_attention_interval-th: three of four) are Gated DeltaNet layers
// with recurrent state (see DeltaNet); the others gated full attention:
//
//	q|gate = attn_q · h per head; q, k RMS-normalised per head; NEOX rope
//	on the first rope.dimension_count dims, except the pairs whose
//	rope.dimension_sections sector takes the fourth (for text: zero)
//	position of interleaved M-RoPE; o = attn(q, k, v) ⊙ sigmoid(gate)
//
// then x += FFN(rms(x)·post_attention_norm): SwiGLU (qwen35), or experts
// chosen by softmax, renormalised, plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp · h) (qwen35moe). block_count counts the NextN
// (MTP) layers after the trunk, which the trunk does not run.
func init() {
	register(&family{name: "qwen35", config: qwen35Config(false), layer: qwen35Layer})
	register(&family{name: "qwen35moe", config: qwen35Config(true), layer: qwen35Layer})
}

// qwen35Config reads the keys llama.cpp's qwen35 and qwen35moe loaders
// honour, as they honour them:
//
//   - attention.recurrent_layers, when present, gives every block's kind
//     (exactly block_count entries, the NextN blocks included, or one
//     boolean for all) and full_attention_interval is then not read;
//     without it layer l < trunk is recurrent iff (l+1) % interval != 0,
//     the interval 4 when absent;
//   - rope.dimension_sections (required; 4 entries, or one value for all
//     four) places each rotated pair in a section of interleaved M-RoPE;
//     text tokens give the fourth section position 0 (RopeConfig.Still);
//   - qwen35moe: experts expert_feed_forward_length wide (else
//     feed_forward_length / expert_used_count), one sigmoid-gated shared
//     expert expert_shared_feed_forward_length wide (else
//     feed_forward_length); softmax routing with the selected weights
//     renormalised and no weight scale, whatever expert_gating_func,
//     expert_weights_norm, expert_weights_scale or expert_shared_count say
//     (the loader does not read them); expert groups as every MoE.
func qwen35Config(moe bool) func(r *meta, c *Config) error {
	return func(r *meta, c *Config) error {
		c.Rope.NeoX = true
		c.AttnGate = true
		if !r.has("attention.layer_norm_rms_epsilon") {
			r.errs = append(r.errs, r.p+"attention.layer_norm_rms_epsilon")
		}
		blocks := c.Layers
		if err := r.nextn(c); err != nil {
			return err
		}
		a := &SSMConfig{State: r.need("ssm.state_size"), KHeads: r.need("ssm.group_count"),
			VHeads: r.need("ssm.time_step_rank"), Conv: r.need("ssm.conv_kernel")}
		if inner := r.need("ssm.inner_size"); inner != 0 && inner != a.VHeads*a.State {
			return fmt.Errorf("%sssm.inner_size %d is not %d value heads x state %d", r.p, inner, a.VHeads, a.State)
		}
		if a.KHeads > 0 && a.VHeads%a.KHeads != 0 {
			return fmt.Errorf("%d value heads do not share %d key heads evenly", a.VHeads, a.KHeads)
		}
		c.SSM = a
		rec, err := qwen35Recurrent(r, c.Layers, blocks)
		if err != nil {
			return err
		}
		c.Recurrent = rec
		if err := qwen35Sections(r, c); err != nil {
			return err
		}
		if moe {
			if err := qwen35MoE(r, c, blocks); err != nil {
				return err
			}
		}
		return nil
	}
}

// qwen35Recurrent reads the trunk's layer kinds (see qwen35Config).
func qwen35Recurrent(r *meta, layers, blocks int) ([]bool, error) {
	out := make([]bool, max(layers, 0))
	key := r.p + "attention.recurrent_layers"
	if v, ok := r.m.Get(key); ok {
		if v.Type() != gguf.TypeArray {
			b, isBool := v.Bool()
			if !isBool {
				return nil, fmt.Errorf("%s is %v: want a boolean per block or one for all", key, v)
			}
			for l := range out {
				out[l] = b
			}
			return out, nil
		}
		if v.Len() != blocks {
			return nil, fmt.Errorf("%s has %d entries: want one per block, %d (block_count, NextN blocks included)", key, v.Len(), blocks)
		}
		for l := 0; l < blocks; l++ {
			b, isBool := v.Index(l).Bool()
			if !isBool {
				return nil, fmt.Errorf("%s entry %d is %v, not a boolean", key, l, v.Index(l))
			}
			if l < layers {
				out[l] = b
			}
		}
		return out, nil
	}
	iv := 4
	if v, ok := r.m.Int(r.p + "full_attention_interval"); ok {
		if v <= 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%sfull_attention_interval %d: want at least 1", r.p, v)
		}
		iv = int(v)
	}
	for l := range out {
		out[l] = (l+1)%iv != 0
	}
	return out, nil
}

// qwen35Sections reads rope.dimension_sections and marks the rotated pairs
// that text positions leave still. ggml's interleaved M-RoPE gives pair i
// the sector s = i mod (sum of the sections); s takes the time position
// when s%3 == 0 and s < 3*sections[0], the height when s%3 == 1 and s <
// 3*sections[1], the width when s%3 == 2 and s < 3*sections[2], else the
// fourth position. Text has the token's position in the first three and 0
// in the fourth.
func qwen35Sections(r *meta, c *Config) error {
	key := r.p + "rope.dimension_sections"
	v, ok := r.m.Get(key)
	if !ok {
		r.errs = append(r.errs, key)
		return nil
	}
	var sec [4]int64
	if v.Type() == gguf.TypeArray {
		if v.Len() != 4 {
			return fmt.Errorf("%s has %d entries: want 4", key, v.Len())
		}
		for i := range sec {
			x, isInt := v.Index(i).Int()
			if !isInt {
				return fmt.Errorf("%s entry %d is %v, not an integer", key, i, v.Index(i))
			}
			sec[i] = x
		}
	} else {
		x, isInt := v.Int()
		if !isInt {
			return fmt.Errorf("%s is %v: want 4 integers", key, v)
		}
		sec = [4]int64{x, x, x, x}
	}
	sum := int64(0)
	for i, x := range sec {
		if x < 0 || x > math.MaxInt32 {
			return fmt.Errorf("%s %v: section %d is negative or too large", key, sec, i)
		}
		sum += x
	}
	if sec[0] == 0 && sec[1] == 0 && sec[2] == 0 {
		return fmt.Errorf("%s %v: the first three sections are empty", key, sec)
	}
	if sum > int64(c.HeadDim) {
		return fmt.Errorf("%s %v: %d pairs in all, more than the head size %d", key, sec, sum, c.HeadDim)
	}
	c.Rope.Still = nil
	for i := 0; i < c.Rope.Dims/2; i++ {
		s := int64(i) % sum
		turns := s%3 == 0 && s < 3*sec[0] || s%3 == 1 && s < 3*sec[1] || s%3 == 2 && s < 3*sec[2]
		if !turns {
			c.Rope.Still = append(c.Rope.Still, i)
		}
	}
	return nil
}

// layer0 reads a count that llama.cpp takes per block (get_key_or_arr:
// one value, or exactly blocks of them) but whose first block's value
// alone shapes every layer of qwen35moe (n_ff_exp(), n_expert_used() of
// layer 0); ok is false when the key is absent.
func layer0(r *meta, key string, blocks int) (v int, ok bool, err error) {
	val, ok := r.m.Get(r.p + key)
	if !ok {
		return 0, false, nil
	}
	if val.Type() == gguf.TypeArray {
		if val.Len() != blocks {
			return 0, true, fmt.Errorf("%s%s has %d entries: want one value or one per block, %d", r.p, key, val.Len(), blocks)
		}
		val = val.Index(0)
	}
	x, isInt := val.Int()
	if !isInt || x < 0 || x > math.MaxInt32 {
		return 0, true, fmt.Errorf("%s%s is %v: want a count", r.p, key, val)
	}
	return int(x), true, nil
}

// qwen35MoE reads qwen35moe's experts (see qwen35Config); blocks is
// block_count, the NextN blocks included.
func qwen35MoE(r *meta, c *Config, blocks int) error {
	c.Experts = r.need("expert_count")
	used, ok, err := layer0(r, "expert_used_count", blocks)
	if err != nil {
		return err
	}
	if !ok || used <= 0 {
		r.errs = append(r.errs, r.p+"expert_used_count")
	}
	c.ExpertsUsed = used
	if c.ExpertFF, _, err = layer0(r, "expert_feed_forward_length", blocks); err != nil {
		return err
	}
	if c.ExpertFF == 0 && c.ExpertsUsed > 0 {
		c.ExpertFF = c.FF / c.ExpertsUsed
	}
	if c.ExpertFF <= 0 {
		return fmt.Errorf("no expert width: %sexpert_feed_forward_length is missing and feed_forward_length %d over %d experts used is 0", r.p, c.FF, c.ExpertsUsed)
	}
	c.SharedFF = r.opt("expert_shared_feed_forward_length", c.FF)
	if c.SharedFF <= 0 {
		return fmt.Errorf("no shared expert width: %sexpert_shared_feed_forward_length and feed_forward_length are missing", r.p)
	}
	c.ExpertShared = 1
	if c.Layers > 0 {
		c.MoELayers = make([]bool, c.Layers)
		for l := range c.MoELayers {
			c.MoELayers[l] = true
		}
	}
	c.Gating, c.NormTopKProb, c.ExpertWeightsScale = GateSoftmax, true, 1
	c.ExpertGroups = r.opt("expert_group_count", 0)
	c.ExpertGroupsUsed = r.opt("expert_group_used_count", c.ExpertGroups)
	if c.ExpertGroups > 1 {
		if c.ExpertGroups > 64 || c.Experts%c.ExpertGroups != 0 || c.ExpertGroupsUsed < 1 || c.ExpertGroupsUsed >= c.ExpertGroups {
			return fmt.Errorf("%d experts in %d groups, %d used: want at most 64 groups dividing the experts and 1 <= used < groups", c.Experts, c.ExpertGroups, c.ExpertGroupsUsed)
		}
		if per := c.Experts / c.ExpertGroups; per < 2 || c.ExpertsUsed > c.ExpertGroupsUsed*per {
			return fmt.Errorf("%d experts in %d groups, %d groups and %d experts used: a group needs two experts and the chosen groups enough for the experts used", c.Experts, c.ExpertGroups, c.ExpertGroupsUsed, c.ExpertsUsed)
		}
	} else {
		c.ExpertGroups, c.ExpertGroupsUsed = 0, 0
	}
	return nil
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
