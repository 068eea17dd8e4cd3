package modelgen

import (
	"fmt"
	"math"

	"braid/internal/gguf"
)

// The families added after gpt-oss, written with the keys, tensor names
// and ggml shapes of llama.cpp's conversions (the tiny models in the
// shared test data, made by llama.cpp, are the reference the tests
// compare with):
//
//	deepseek2  DeepSeek-V2/V3: multi-head latent attention (a low-rank
//	           query, one compressed KV latent per token, kv_b stored split
//	           as attn_k_b and attn_v_b), leading dense layers, then routed
//	           experts (sigmoid router with exp_probs_b, groups) and shared
//	           experts
//	glm-dsa    GLM-5: deepseek2's layers plus the DSA lightning indexer
//	           (indexer.* tensors on its "full" layers)
//	glm4moe    GLM-4.5: GQA with q/k/v biases and QK norm, partial rope,
//	           deepseek2's MoE, NextN/MTP blocks after the trunk
//	qwen35     Qwen3.5/3.6 dense: Gated DeltaNet layers (attn_qkv,
//	qwen35moe  attn_gate, ssm_*) and gated full-attention layers, a dense
//	           SwiGLU (qwen35) or experts plus a sigmoid-gated shared expert
//	           (qwen35moe), NextN/MTP blocks after the trunk

// family reports whether c is one of the families in this file.
func (c *Config) family() bool {
	switch c.Arch {
	case "deepseek2", "glm-dsa", "glm4moe", "qwen35", "qwen35moe":
		return true
	}
	return false
}

// mla: the families with multi-head latent attention.
func (c *Config) mla() bool { return c.Arch == "deepseek2" || c.Arch == "glm-dsa" }

// deepseekMoE: the families with leading dense layers, then DeepSeek's
// routed and shared experts.
func (c *Config) deepseekMoE() bool { return c.mla() || c.Arch == "glm4moe" }

// hybrid: the Gated DeltaNet families.
func (c *Config) hybrid() bool { return c.Arch == "qwen35" || c.Arch == "qwen35moe" }

// recurrent reports whether block l is a Gated DeltaNet layer (NextN
// blocks never are).
func (c *Config) recurrent(l int) bool {
	if !c.hybrid() || l >= c.Layers {
		return false
	}
	if c.Recurrent != nil {
		return c.Recurrent[l]
	}
	return (l+1)%c.FullAttnInterval != 0
}

// indexerFull reports whether glm-dsa layer l runs its own indexer: as
// IndexerFull says, or without it as llama.cpp decides for a file without
// attention.indexer.types (every layer under a context of 2^20, else
// GLM-5.2's layers 0, 1 and every fourth from 2 up to 77).
func (c *Config) indexerFull(l int) bool {
	if c.IndexerFull != nil {
		return c.IndexerFull[l]
	}
	return c.Context < 1<<20 || l < 2 || l < 78 && (l-2)%4 == 0
}

// fillFamily checks c and fills in the defaults of the families in this
// file.
func (c *Config) fillFamily() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("modelgen: %s: "+format, append([]any{c.Arch}, args...)...)
	}
	if c.Name == "" {
		c.Name = "braid-random-" + c.Arch
	}
	if c.Layers <= 0 || c.Embd <= 0 || c.Heads <= 0 || c.FF < 0 || c.NextN < 0 {
		return bad("bad shape layers=%d embd=%d ff=%d heads=%d nextn=%d", c.Layers, c.Embd, c.FF, c.Heads, c.NextN)
	}
	if c.Vocab < 259 {
		return bad("vocabulary of %d tokens is smaller than the 259 special and byte tokens", c.Vocab)
	}
	if c.Context == 0 {
		c.Context = 4096
	}
	if c.SlidingWindow != 0 {
		return bad("sliding window %d: only gpt-oss models have one here", c.SlidingWindow)
	}
	if c.NextN > 0 && c.mla() {
		return bad("NextN blocks are written for glm4moe, qwen35 and qwen35moe only")
	}
	switch {
	case c.Arch == "deepseek2":
		c.RopeBase, c.NormEps = orF(c.RopeBase, 10000), orF(c.NormEps, 1e-6)
	case c.Arch == "glm-dsa", c.Arch == "glm4moe":
		c.RopeBase, c.NormEps = orF(c.RopeBase, 1e6), orF(c.NormEps, 1e-5)
	default:
		c.RopeBase, c.NormEps = orF(c.RopeBase, 1e7), orF(c.NormEps, 1e-6)
	}

	// Attention.
	if c.mla() {
		if c.KVHeads != 0 && c.KVHeads != 1 {
			return bad("MLA caches one latent row per token: KVHeads must be 0 or 1, not %d", c.KVHeads)
		}
		c.RopeDim = orI(c.RopeDim, 64)
		c.VHeadDim = orI(c.VHeadDim, c.QKNopeDim)
		if c.KVLoraRank <= 0 || c.QKNopeDim <= 0 || c.VHeadDim <= 0 || c.RopeDim < 0 || c.RopeDim%2 != 0 || c.QLoraRank < 0 {
			return bad("MLA needs kv_lora_rank (%d), nope (%d), value (%d) and an even rope (%d) head size > 0, q_lora_rank (%d) >= 0",
				c.KVLoraRank, c.QKNopeDim, c.VHeadDim, c.RopeDim, c.QLoraRank)
		}
		if c.HeadDim != 0 && c.HeadDim != c.QKNopeDim+c.RopeDim {
			return bad("HeadDim %d: MLA's query/key head is nope %d + rope %d (leave HeadDim 0)", c.HeadDim, c.QKNopeDim, c.RopeDim)
		}
		c.KVHeads, c.HeadDim = 1, c.QKNopeDim+c.RopeDim
	} else {
		if c.QLoraRank != 0 || c.KVLoraRank != 0 || c.QKNopeDim != 0 || c.VHeadDim != 0 {
			return bad("the MLA fields are for deepseek2 and glm-dsa")
		}
		c.KVHeads = orI(c.KVHeads, c.Heads)
		if c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
			return bad("%d heads are not a multiple of %d KV heads", c.Heads, c.KVHeads)
		}
		c.HeadDim = orI(c.HeadDim, c.Embd/c.Heads)
		if c.HeadDim <= 0 {
			return bad("head size %d (embd %d, %d heads)", c.HeadDim, c.Embd, c.Heads)
		}
		if c.Arch == "glm4moe" {
			c.RopeDim = orI(c.RopeDim, c.HeadDim/2)
		} else {
			c.RopeDim = orI(c.RopeDim, c.HeadDim/4)
		}
		if c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
			return bad("rope dims %d: want an even count up to the head size %d", c.RopeDim, c.HeadDim)
		}
	}
	if c.NoQKNorm && c.Arch != "glm4moe" {
		return bad("NoQKNorm is glm4moe's")
	}

	// The indexer.
	if c.Arch == "glm-dsa" {
		if c.QLoraRank == 0 {
			return bad("the indexer reads the query's low-rank vector: QLoraRank must be > 0")
		}
		if c.IndexerHeads <= 0 || c.IndexerTopK <= 0 || c.IndexerDim < c.RopeDim || c.IndexerDim <= 0 {
			return bad("indexer of %d heads of %d (at least the rope dims %d), top-%d: all must be > 0", c.IndexerHeads, c.IndexerDim, c.RopeDim, c.IndexerTopK)
		}
		if c.IndexerFull != nil && (len(c.IndexerFull) != c.Layers || !c.IndexerFull[0]) {
			return bad("IndexerFull %v: want one entry per layer (%d), the first true", c.IndexerFull, c.Layers)
		}
		if c.IndexerDim < 64 || c.IndexerDim&(c.IndexerDim-1) != 0 {
			return bad("indexer key length %d: llama.cpp's indexer rotation (a Hadamard matrix) needs a power of two of at least 64", c.IndexerDim)
		}
	} else if c.IndexerHeads != 0 || c.IndexerDim != 0 || c.IndexerTopK != 0 || c.IndexerFull != nil {
		return bad("the indexer fields are for glm-dsa")
	}

	// Gated DeltaNet.
	if c.hybrid() {
		c.SSMConv = orI(c.SSMConv, 4)
		c.FullAttnInterval = orI(c.FullAttnInterval, 4)
		if c.SSMState <= 0 || c.SSMKeyHeads <= 0 || c.SSMValueHeads <= 0 || c.SSMValueHeads%c.SSMKeyHeads != 0 || c.SSMConv < 1 || c.FullAttnInterval < 1 {
			return bad("DeltaNet of state %d, %d key heads, %d value heads (a multiple), conv %d, full attention every %d: all must be > 0",
				c.SSMState, c.SSMKeyHeads, c.SSMValueHeads, c.SSMConv, c.FullAttnInterval)
		}
		if c.Recurrent != nil && len(c.Recurrent) != c.Layers {
			return bad("Recurrent has %d entries for %d layers", len(c.Recurrent), c.Layers)
		}
		if c.NoIntervalKey && c.Recurrent == nil {
			return bad("NoIntervalKey without Recurrent would leave the layer kinds to llama.cpp's default interval")
		}
		if c.RopeSections == nil {
			pairs := int32(c.RopeDim / 2)
			s0 := (pairs + 2) / 3
			s1 := (pairs - s0 + 1) / 2
			c.RopeSections = []int32{s0, s1, pairs - s0 - s1, 0}
		}
	} else if c.SSMState != 0 || c.SSMKeyHeads != 0 || c.SSMValueHeads != 0 || c.SSMConv != 0 || c.FullAttnInterval != 0 || c.Recurrent != nil || c.RopeSections != nil || c.NoIntervalKey {
		return bad("the DeltaNet fields are for qwen35 and qwen35moe")
	}

	// Feed-forward.
	switch c.Arch {
	case "qwen35":
		if c.FF <= 0 || c.Experts != 0 {
			return bad("a dense FFN in every layer: FF > 0 (%d), no experts (%d)", c.FF, c.Experts)
		}
	case "qwen35moe":
		if c.FF != 0 {
			return bad("every layer runs experts, there is no dense FFN: FF must be 0, not %d", c.FF)
		}
	default:
		if c.FF <= 0 {
			return bad("feed_forward_length %d: the leading dense layers need FF > 0", c.FF)
		}
	}
	if c.Arch != "qwen35" {
		c.ExpertFF = orI(c.ExpertFF, c.FF)
		if c.Experts <= 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts || c.ExpertFF <= 0 {
			return bad("needs 0 < experts_used (%d) <= experts (%d) and an expert FF (%d)", c.ExpertsUsed, c.Experts, c.ExpertFF)
		}
	}
	if c.deepseekMoE() {
		c.ExpertGating = orI(c.ExpertGating, 2)
		c.ExpertWeightsScale = orF(c.ExpertWeightsScale, 2.5)
		if c.LeadingDense < 0 || c.LeadingDense > c.Layers || c.ExpertShared < 0 || c.ExpertGating < 1 || c.ExpertGating > 2 {
			return bad("leading dense layers %d of %d, %d shared experts, gating %d (1 softmax, 2 sigmoid)", c.LeadingDense, c.Layers, c.ExpertShared, c.ExpertGating)
		}
		if c.ExpertGroups > 0 {
			c.ExpertGroupsUsed = orI(c.ExpertGroupsUsed, c.ExpertGroups)
			if c.Experts%c.ExpertGroups != 0 || c.ExpertGroupsUsed < 1 || c.ExpertGroupsUsed > c.ExpertGroups {
				return bad("%d experts in %d groups, %d used: groups must divide the experts and 1 <= used <= groups", c.Experts, c.ExpertGroups, c.ExpertGroupsUsed)
			}
		} else if c.ExpertGroups < 0 || c.ExpertGroupsUsed != 0 {
			return bad("%d expert groups, %d used", c.ExpertGroups, c.ExpertGroupsUsed)
		}
	} else if c.LeadingDense != 0 || c.ExpertShared != 0 || c.ExpertGroups != 0 || c.ExpertGroupsUsed != 0 || c.ExpertGating != 0 || c.ExpertWeightsScale != 0 {
		return bad("the DeepSeek routing fields are for deepseek2, glm-dsa and glm4moe")
	}
	if c.Arch == "qwen35moe" {
		c.ExpertSharedFF = orI(c.ExpertSharedFF, c.ExpertFF)
	} else if c.ExpertSharedFF != 0 {
		return bad("ExpertSharedFF is qwen35moe's (the others have ExpertShared experts of ExpertFF)")
	}

	if c.RopeScale > 0 {
		c.RopeOrigContext = orI(c.RopeOrigContext, 4096)
		c.YarnBetaFast, c.YarnBetaSlow = orF(c.YarnBetaFast, 32), orF(c.YarnBetaSlow, 1)
		if c.mla() {
			c.YarnLogMultiplier = orF(c.YarnLogMultiplier, 0.1)
		}
		if c.RopeOrigContext < 0 {
			return bad("YaRN original context %d", c.RopeOrigContext)
		}
	}
	if c.EmbedType == 0 {
		c.EmbedType = c.Type
	}
	return nil
}

func orI(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orF(v, def float32) float32 {
	if v == 0 {
		return def
	}
	return v
}

// setFamilyMetadata sets the keys of the families in this file, in the
// order of llama.cpp's conversions.
func (c *Config) setFamilyMetadata(w *gguf.Writer) {
	a := c.Arch + "."
	u := func(k string, v int) { w.Set(a+k, gguf.Uint32(uint32(v))) }
	f := func(k string, v float32) { w.Set(a+k, gguf.Float32(v)) }
	w.Set("general.architecture", gguf.String(c.Arch))
	w.Set("general.name", gguf.String(c.Name))
	u("context_length", c.Context)
	u("embedding_length", c.Embd)
	u("block_count", c.Layers+c.NextN)
	if c.Arch != "qwen35moe" {
		u("feed_forward_length", c.FF)
	}
	u("attention.head_count", c.Heads)
	if c.hybrid() {
		u("attention.head_count_kv", c.KVHeads)
		u("attention.key_length", c.HeadDim)
		u("attention.value_length", c.HeadDim)
	}
	f("rope.freq_base", c.RopeBase)
	f("attention.layer_norm_rms_epsilon", c.NormEps)
	u("vocab_size", c.Vocab)
	switch {
	case c.mla():
		// The cache row is the latent and the shared rope key: one "KV
		// head" of kv_lora+rope values whose first kv_lora are the value.
		u("attention.head_count_kv", 1)
		if c.QLoraRank > 0 {
			u("attention.q_lora_rank", c.QLoraRank)
		}
		u("attention.kv_lora_rank", c.KVLoraRank)
		u("attention.key_length", c.KVLoraRank+c.RopeDim)
		u("attention.value_length", c.KVLoraRank)
		u("attention.key_length_mla", c.QKNopeDim+c.RopeDim)
		u("attention.value_length_mla", c.VHeadDim)
		u("rope.dimension_count", c.RopeDim)
	case c.Arch == "glm4moe":
		u("attention.head_count_kv", c.KVHeads)
		u("attention.key_length", c.HeadDim)
		u("attention.value_length", c.HeadDim)
		u("rope.dimension_count", c.RopeDim)
	}
	if c.Arch != "qwen35" {
		u("expert_count", c.Experts)
		u("expert_used_count", c.ExpertsUsed)
		u("expert_feed_forward_length", c.ExpertFF)
	}
	if c.deepseekMoE() {
		u("leading_dense_block_count", c.LeadingDense)
		u("expert_shared_count", c.ExpertShared)
		f("expert_weights_scale", c.ExpertWeightsScale)
		w.Set(a+"expert_weights_norm", gguf.Bool(c.ExpertGating == 2))
		u("expert_gating_func", c.ExpertGating)
		if c.ExpertGroups > 0 {
			u("expert_group_count", c.ExpertGroups)
			u("expert_group_used_count", c.ExpertGroupsUsed)
		}
	}
	if c.Arch == "glm-dsa" {
		u("attention.indexer.head_count", c.IndexerHeads)
		u("attention.indexer.key_length", c.IndexerDim)
		u("attention.indexer.top_k", c.IndexerTopK)
		if c.IndexerFull != nil {
			w.Set(a+"attention.indexer.types", gguf.BoolArray(c.IndexerFull))
		}
	}
	if c.hybrid() {
		if c.Arch == "qwen35moe" {
			u("expert_shared_feed_forward_length", c.ExpertSharedFF)
		}
		u("ssm.conv_kernel", c.SSMConv)
		u("ssm.state_size", c.SSMState)
		u("ssm.group_count", c.SSMKeyHeads)
		u("ssm.time_step_rank", c.SSMValueHeads)
		u("ssm.inner_size", c.SSMValueHeads*c.SSMState)
		if c.Recurrent != nil {
			w.Set(a+"attention.recurrent_layers", gguf.BoolArray(append(append([]bool{}, c.Recurrent...), make([]bool, c.NextN)...)))
		}
		if !c.NoIntervalKey {
			u("full_attention_interval", c.FullAttnInterval)
		}
		u("rope.dimension_count", c.RopeDim)
		w.Set(a+"rope.dimension_sections", gguf.Int32Array(c.RopeSections))
	}
	if c.NextN > 0 {
		u("nextn_predict_layers", c.NextN)
	}
	if c.RopeScale > 0 {
		w.Set(a+"rope.scaling.type", gguf.String("yarn"))
		f("rope.scaling.factor", c.RopeScale)
		u("rope.scaling.original_context_length", c.RopeOrigContext)
		f("rope.scaling.yarn_beta_fast", c.YarnBetaFast)
		f("rope.scaling.yarn_beta_slow", c.YarnBetaSlow)
		if c.mla() {
			f("rope.scaling.yarn_log_multiplier", c.YarnLogMultiplier)
		}
	}
	addVocab(w, c.Vocab)
}

// negExp adds a tensor of -exp(N(mean, std)) values, kept in F32: the
// DeltaNet decay rates ssm_a (-exp(A_log), always negative).
func (p *planner) negExp(name string, mean, std float64, n int) {
	p.f32(name, mean, std, n)
	if p.err == nil {
		p.tensors[len(p.tensors)-1].negExp = true
	}
}

func inv(n int) float64 { return 1 / math.Sqrt(float64(n)) }

// planFamily lists the tensors of the families in this file, in llama.cpp's
// order: the embedding, each block (NextN blocks after the trunk, their
// nextn.* tensors first), the head.
func (c *Config) planFamily(p *planner) {
	E := c.Embd
	p.matrix("token_embd.weight", c.EmbedType, 1, E, c.Vocab)
	for l := 0; l < c.Layers+c.NextN; l++ {
		pre := fmt.Sprintf("blk.%d.", l)
		if l >= c.Layers {
			p.matrix(pre+"nextn.eh_proj.weight", c.Type, inv(2*E), 2*E, E)
			if c.Arch == "glm4moe" {
				p.matrix(pre+"nextn.embed_tokens.weight", c.Type, 1, E, c.Vocab)
			}
			p.norm(pre+"nextn.enorm.weight", E)
			p.norm(pre+"nextn.hnorm.weight", E)
			if c.Arch == "glm4moe" {
				p.matrix(pre+"nextn.shared_head_head.weight", c.Type, inv(E), E, c.Vocab)
			}
			p.norm(pre+"nextn.shared_head_norm.weight", E)
		}
		p.norm(pre+"attn_norm.weight", E)
		switch {
		case c.mla():
			c.planMLA(p, pre, l)
		case c.recurrent(l):
			c.planDeltaNet(p, pre)
		default:
			c.planGQA(p, pre)
		}
		if c.mla() {
			p.norm(pre+"ffn_norm.weight", E)
		} else {
			p.norm(pre+"post_attention_norm.weight", E)
		}
		c.planFamilyFFN(p, pre, l)
	}
	p.norm("output_norm.weight", E)
	if !c.TiedOutput {
		p.matrix("output.weight", c.Type, inv(E), E, c.Vocab)
	}
}

// planMLA: multi-head latent attention, and on glm-dsa's full layers the
// indexer.
func (c *Config) planMLA(p *planner, pre string, l int) {
	E, H, qk := c.Embd, c.Heads, c.QKNopeDim+c.RopeDim
	if c.QLoraRank > 0 {
		p.matrix(pre+"attn_q_a.weight", c.Type, inv(E), E, c.QLoraRank)
		p.norm(pre+"attn_q_a_norm.weight", c.QLoraRank)
		p.matrix(pre+"attn_q_b.weight", c.Type, inv(c.QLoraRank), c.QLoraRank, H*qk)
	} else {
		p.matrix(pre+"attn_q.weight", c.Type, inv(E), E, H*qk)
	}
	p.matrix(pre+"attn_kv_a_mqa.weight", c.Type, inv(E), E, c.KVLoraRank+c.RopeDim)
	p.norm(pre+"attn_kv_a_norm.weight", c.KVLoraRank)
	// kv_b split per head and pre-transposed: K_b[h] takes a query's nope
	// dims into the latent, V_b[h] the latent to the value dims.
	p.matrix(pre+"attn_k_b.weight", c.Type, inv(c.QKNopeDim), c.QKNopeDim, c.KVLoraRank, H)
	p.matrix(pre+"attn_v_b.weight", c.Type, inv(c.KVLoraRank), c.KVLoraRank, c.VHeadDim, H)
	p.matrix(pre+"attn_output.weight", c.Type, inv(H*c.VHeadDim), H*c.VHeadDim, E)
	if c.Arch == "glm-dsa" && c.indexerFull(l) {
		D, IH := c.IndexerDim, c.IndexerHeads
		p.norm(pre+"indexer.k_norm.weight", D)
		p.f32(pre+"indexer.k_norm.bias", 0, 0.1, D)
		p.matrix(pre+"indexer.proj.weight", c.Type, inv(E), E, IH)
		p.matrix(pre+"indexer.attn_k.weight", c.Type, inv(E), E, D)
		p.matrix(pre+"indexer.attn_q_b.weight", c.Type, inv(c.QLoraRank), c.QLoraRank, IH*D)
	}
}

// planGQA: glm4moe's attention (q/k/v biases, QK norm unless NoQKNorm) or
// qwen35's gated attention (attn_q yields a query and an output gate per
// head, QK norm).
func (c *Config) planGQA(p *planner, pre string) {
	E, q, kv := c.Embd, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	qrows := q
	if c.hybrid() {
		qrows = 2 * q
	}
	p.matrix(pre+"attn_q.weight", c.Type, inv(E), E, qrows)
	p.matrix(pre+"attn_k.weight", c.Type, inv(E), E, kv)
	p.matrix(pre+"attn_v.weight", c.Type, inv(E), E, kv)
	if c.Arch == "glm4moe" {
		p.f32(pre+"attn_q.bias", 0, 0.1, q)
		p.f32(pre+"attn_k.bias", 0, 0.1, kv)
		p.f32(pre+"attn_v.bias", 0, 0.1, kv)
	}
	if !c.NoQKNorm {
		p.norm(pre+"attn_q_norm.weight", c.HeadDim)
		p.norm(pre+"attn_k_norm.weight", c.HeadDim)
	}
	p.matrix(pre+"attn_output.weight", c.Type, inv(q), q, E)
}

// planDeltaNet: a Gated DeltaNet layer. The conv taps are N(0, 1/conv),
// dt biases N(0, 1), and the decay rates ssm_a = -exp(N(-1, 1)), so that a
// step keeps e^g of the state with g = softplus(...)·ssm_a mostly between
// 0.1 and 1, as trained models do.
func (c *Config) planDeltaNet(p *planner, pre string) {
	E, S, KH, VH := c.Embd, c.SSMState, c.SSMKeyHeads, c.SSMValueHeads
	ch := 2*KH*S + VH*S
	p.matrix(pre+"attn_qkv.weight", c.Type, inv(E), E, ch)
	p.matrix(pre+"attn_gate.weight", c.Type, inv(E), E, VH*S)
	p.f32(pre+"ssm_conv1d.weight", 0, inv(c.SSMConv), c.SSMConv, ch)
	p.f32(pre+"ssm_dt.bias", 0, 1, VH)
	p.negExp(pre+"ssm_a", -1, 1, VH)
	p.matrix(pre+"ssm_beta.weight", c.Type, inv(E), E, VH)
	p.matrix(pre+"ssm_alpha.weight", c.Type, inv(E), E, VH)
	p.norm(pre+"ssm_norm.weight", S)
	p.matrix(pre+"ssm_out.weight", c.Type, inv(VH*S), VH*S, E)
}

// planFamilyFFN: block l's feed-forward.
func (c *Config) planFamilyFFN(p *planner, pre string, l int) {
	E := c.Embd
	dense := c.Arch == "qwen35" || c.deepseekMoE() && l < c.LeadingDense
	if dense {
		p.matrix(pre+"ffn_gate.weight", c.Type, inv(E), E, c.FF)
		p.matrix(pre+"ffn_up.weight", c.Type, inv(E), E, c.FF)
		p.matrix(pre+"ffn_down.weight", c.Type, inv(c.FF), c.FF, E)
		return
	}
	X, F := c.Experts, c.ExpertFF
	p.f32(pre+"ffn_gate_inp.weight", 0, inv(E), E, X)
	if c.deepseekMoE() && c.ExpertGating == 2 {
		p.f32(pre+"exp_probs_b.bias", 0, 0.1, X)
	}
	p.matrix(pre+"ffn_gate_exps.weight", c.Type, inv(E), E, F, X)
	p.matrix(pre+"ffn_up_exps.weight", c.Type, inv(E), E, F, X)
	p.matrix(pre+"ffn_down_exps.weight", c.Type, inv(F), F, E, X)
	shared := c.ExpertShared * F
	if c.Arch == "qwen35moe" {
		p.f32(pre+"ffn_gate_inp_shexp.weight", 0, inv(E), E)
		shared = c.ExpertSharedFF
	}
	if shared > 0 {
		p.matrix(pre+"ffn_gate_shexp.weight", c.Type, inv(E), E, shared)
		p.matrix(pre+"ffn_up_shexp.weight", c.Type, inv(E), E, shared)
		p.matrix(pre+"ffn_down_shexp.weight", c.Type, inv(shared), shared, E)
	}
}
