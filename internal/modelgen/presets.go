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
	// A Qwen3-MoE shape with 64 experts, 8 used (fewer layers than the
	// released models, to stay near 1B parameters).
	"qwen3moe-64x": {Arch: "qwen3moe", Layers: 4, Embd: 2048, FF: 6144, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936, Context: 8192, Experts: 64, ExpertsUsed: 8, ExpertFF: 768, RopeBase: 1000000},
	// gpt-oss-20b's shape: 24 layers alternating a 128-key sliding window
	// with full attention, 32 experts of which 4 are used, YaRN rope. About
	// 21B parameters; as MXFP4_MOE (its published format) 12 GB.
	"gpt-oss-20b": {Arch: "gpt-oss", Layers: 24, Embd: 2880, FF: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Vocab: 201088,
		Context: 131072, Experts: 32, ExpertsUsed: 4, ExpertFF: 2880, RopeBase: 150000, NormEps: 1e-5, SlidingWindow: 128,
		RopeScale: 32, RopeOrigContext: 4096, YarnBetaFast: 32, YarnBetaSlow: 1},
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
// most of them) or "MXFP4_MOE" (expert matrices MXFP4, every other matrix
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
