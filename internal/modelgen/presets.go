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
// a plain type ("Q8_0", "F16") or a llama.cpp-like mix ("Q4_K_M": Q4_K with
// attn_v, ffn_down and the output head in Q6_K, as llama-quantize does for
// most of them).
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
	}
	t, err := quant.ParseType(name)
	if err != nil {
		return 0, nil, fmt.Errorf("modelgen: %q is neither a tensor type nor a known mix (Q4_K_M)", name)
	}
	return t, nil, nil
}
