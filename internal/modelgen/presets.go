package modelgen

import (
	"fmt"
	"sort"
	"strings"

	"braid/internal/quant"
)

// Presets are real model shapes, for benchmarks that must stress the same
// matrices a user's model does.
var Presets = map[string]Config{
	// Llama-3.2-1B's shape.
	"llama-1b": {Arch: "llama", Layers: 16, Embd: 2048, FF: 8192, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 128256, Context: 8192, RopeBase: 500000, TiedOutput: true},
	// A drafter for llama-1b (speculative decoding, --spec draft): the same
	// vocabulary and tokenizer (addVocab depends on the size alone), 2
	// layers 512 wide, about 1/14 of its bytes as Q4_K_M (59 against 801
	// MiB), most of them the tied embedding and head, as in the small
	// drafters of real families.
	"llama-1b-draft": {Arch: "llama", Layers: 2, Embd: 512, FF: 2048, Heads: 8, KVHeads: 2, HeadDim: 64, Vocab: 128256, Context: 8192, RopeBase: 500000, TiedOutput: true},
	// A Qwen3-MoE shape with 64 experts, 8 used (fewer layers than the
	// released models, to stay near 1B parameters).
	"qwen3moe-64x": {Arch: "qwen3moe", Layers: 4, Embd: 2048, FF: 6144, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936, Context: 8192, Experts: 64, ExpertsUsed: 8, ExpertFF: 768, RopeBase: 1000000},
	// gpt-oss-20b's shape: 24 layers alternating a 128-key sliding window
	// with full attention, 32 experts of which 4 are used, YaRN rope. About
	// 21B parameters; as MXFP4_MOE (its published format) 12 GB.
	"gpt-oss-20b": {Arch: "gpt-oss", Layers: 24, Embd: 2880, FF: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Vocab: 201088,
		Context: 131072, Experts: 32, ExpertsUsed: 4, ExpertFF: 2880, RopeBase: 150000, NormEps: 1e-5, SlidingWindow: 128,
		RopeScale: 32, RopeOrigContext: 4096, YarnBetaFast: 32, YarnBetaSlow: 1},
	// DeepSeek-V3's attention and routing at reduced width and depth, about
	// 2.1B parameters. From DeepSeek-V3's config.json: 128 heads, MLA with
	// q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
	// qk_rope_head_dim 64, v_head_dim 128; 8 of the routed experts used
	// per token, chosen in n_group 8 groups of which topk_group 4 are
	// kept, by a sigmoid router with its selection bias (noaux_tc), the
	// weights normalised and scaled by routed_scaling_factor 2.5; one
	// shared expert; vocabulary 129280, context 163840, rope_theta 10000,
	// rms_norm_eps 1e-6, YaRN factor 40 over original_max_position_embeddings
	// 4096 with beta_fast 32, beta_slow 1 and mscale_all_dim 1 (written as
	// yarn_log_multiplier 0.1, as llama.cpp's converter does). Reduced:
	// hidden 2048 (7168), 6 layers (61) of which the first is dense (3),
	// 64 experts (256) of 512 columns (2048), the dense FFN 5376 wide
	// (18432 scaled by 2048/7168, rounded to 256-column blocks).
	"deepseek-v3-small": {Arch: "deepseek2", Layers: 6, LeadingDense: 1, Embd: 2048, FF: 5376, Heads: 128, Vocab: 129280,
		Context: 163840, QLoraRank: 1536, KVLoraRank: 512, QKNopeDim: 128, RopeDim: 64, VHeadDim: 128,
		Experts: 64, ExpertsUsed: 8, ExpertFF: 512, ExpertShared: 1, ExpertGroups: 8, ExpertGroupsUsed: 4, ExpertGating: 2,
		ExpertWeightsScale: 2.5, RopeBase: 10000, NormEps: 1e-6, RopeScale: 40, RopeOrigContext: 4096, YarnBetaFast: 32,
		YarnBetaSlow: 1, YarnLogMultiplier: 0.1},
	// GLM-5's attention, indexer and routing at reduced width and depth,
	// about 2.8B parameters. From zai-org/GLM-5's config.json: 64 heads,
	// MLA with q_lora_rank 2048, kv_lora_rank 512, qk_nope_head_dim 192,
	// qk_rope_head_dim 64, v_head_dim 256; the DSA indexer with
	// index_n_heads 32 of index_head_dim 128 selecting index_topk 2048
	// keys, in every layer (GLM-5 has no indexer_types: all full); 8
	// routed experts used per token by a sigmoid router (noaux_tc), no
	// groups (n_group 1), weights normalised and scaled by 2.5, one shared
	// expert; vocabulary 154880, context 202752, rope_theta 1e6,
	// rms_norm_eps 1e-5. Reduced: hidden 2048 (6144), 6 layers (78) of
	// which the first is dense (3), the dense FFN 4096 (12288, the same
	// 2x the hidden size), 64 experts (256) of 768 columns (2048, about a
	// third of the hidden size, rounded to 256-column blocks).
	"glm5-small": {Arch: "glm-dsa", Layers: 6, LeadingDense: 1, Embd: 2048, FF: 4096, Heads: 64, Vocab: 154880,
		Context: 202752, QLoraRank: 2048, KVLoraRank: 512, QKNopeDim: 192, RopeDim: 64, VHeadDim: 256,
		IndexerHeads: 32, IndexerDim: 128, IndexerTopK: 2048,
		Experts: 64, ExpertsUsed: 8, ExpertFF: 768, ExpertShared: 1, ExpertGating: 2, ExpertWeightsScale: 2.5,
		RopeBase: 1e6, NormEps: 1e-5},
	// Qwen3.6-27B's layers at reduced depth, about 1.9B parameters. From
	// its config.json (model_type qwen3_5): hidden 5120, intermediate 17408;
	// Gated DeltaNet with 16 key heads and 48 value heads of 128
	// (linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
	// linear_value_head_dim), conv kernel 4; gated attention with 24 query
	// and 4 KV heads of 256, partial_rotary_factor 0.25 (64 rope dims,
	// mrope sections [11, 11, 10]), rope_theta 1e7; full attention every
	// 4th layer; context 262144, rms_norm_eps 1e-6, untied head. Reduced:
	// 4 layers (64), one DeltaNet x3 + attention block, so that every
	// layer matrix has its real shape; the vocabulary cut to 32768
	// (248320), whose embedding and head alone would hold 2.5B parameters.
	// No NextN block (the real model has one; braid runs the trunk).
	"qwen3.6-27b-small": {Arch: "qwen35", Layers: 4, Embd: 5120, FF: 17408, Heads: 24, KVHeads: 4, HeadDim: 256, RopeDim: 64,
		RopeSections: []int32{11, 11, 10, 0}, Vocab: 32768, Context: 262144, SSMState: 128, SSMKeyHeads: 16, SSMValueHeads: 48,
		SSMConv: 4, FullAttnInterval: 4, RopeBase: 1e7, NormEps: 1e-6},
	// Qwen3.6-35B-A3B's layers at reduced depth and expert count, about
	// 2.0B parameters. From its config.json (model_type qwen3_5_moe):
	// hidden 2048; Gated DeltaNet with 16 key heads and 32 value heads of
	// 128, conv kernel 4; gated attention with 16 query and 2 KV heads of
	// 256, 64 rope dims (sections [11, 11, 10]), rope_theta 1e7; full
	// attention every 4th layer; experts of moe_intermediate_size 512, 8
	// used per token (softmax, renormalised), a shared expert of
	// shared_expert_intermediate_size 512 behind its sigmoid gate;
	// vocabulary 248320, context 262144, rms_norm_eps 1e-6, untied head.
	// Reduced: 4 layers (40), one DeltaNet x3 + attention block; 64 experts
	// (256). No NextN block.
	"qwen3.6-35b-a3b-small": {Arch: "qwen35moe", Layers: 4, Embd: 2048, Heads: 16, KVHeads: 2, HeadDim: 256, RopeDim: 64,
		RopeSections: []int32{11, 11, 10, 0}, Vocab: 248320, Context: 262144, Experts: 64, ExpertsUsed: 8, ExpertFF: 512,
		ExpertSharedFF: 512, SSMState: 128, SSMKeyHeads: 16, SSMValueHeads: 32, SSMConv: 4, FullAttnInterval: 4,
		RopeBase: 1e7, NormEps: 1e-6},
	// Small and quick, for tests and the demo.
	"tiny": {Arch: "llama", Layers: 4, Embd: 256, FF: 768, Heads: 8, KVHeads: 4, Vocab: 1024, Context: 2048},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Mix returns the matrix type and the per-tensor rule of a file type name:
// a plain type ("Q8_0", "F16") or a llama.cpp-like mix: "Q4_K_M" (Q4_K with
// attn_v, ffn_down and the output head in Q6_K, as llama-quantize does for
// most of them, and MLA's attn_k_b in Q5_0, its fallback for rows no K-quant
// block divides) or "MXFP4_MOE" (expert matrices MXFP4, every other matrix
// Q8_0, as llama-quantize's MXFP4_MOE writes gpt-oss; other MoE models get
// MXFP4 experts too, dense ones are all Q8_0).
func Mix(name string) (quant.Type, func(string) quant.Type, error) {
	switch strings.ToUpper(name) {
	case "Q4_K_M":
		return quant.Q4_K, func(t string) quant.Type {
			switch {
			case strings.HasSuffix(t, "attn_v.weight"), strings.HasSuffix(t, "ffn_down.weight"),
				strings.HasSuffix(t, "ffn_down_exps.weight"), t == "output.weight", t == "token_embd.weight":
				return quant.Q6_K
			case strings.HasSuffix(t, "attn_k_b.weight"):
				// MLA's K_b rows are qk_nope wide (128 in DeepSeek-V3,
				// 192 in GLM-5), which no 256-value K-quant block
				// divides: llama-quantize falls back to Q5_0 there.
				return quant.Q5_0
			}
			return 0
		}, nil
	case "MXFP4_MOE":
		return quant.Q8_0, func(t string) quant.Type {
			if strings.HasSuffix(t, "_exps.weight") {
				return quant.MXFP4
			}
			return 0
		}, nil
	}
	t, err := quant.ParseType(name)
	if err != nil {
		return 0, nil, fmt.Errorf("modelgen: %q is neither a tensor type nor a known mix (%s)", name, strings.Join(Mixes, ", "))
	}
	return t, nil, nil
}

// Mixes are the mix names Mix knows besides the plain types.
var Mixes = []string{"Q4_K_M", "MXFP4_MOE"}

// DefaultMix is the file type a preset is written in unless one is asked
// for: the format the model is published in (MXFP4_MOE for gpt-oss, whose
// 2880-wide rows K-quants cannot hold), else Q4_K_M.
func DefaultMix(c Config) string {
	if c.Arch == "gpt-oss" {
		return "MXFP4_MOE"
	}
	return "Q4_K_M"
}
