package sharedmodels

import (
	"slices"
	"strings"
)

// Refusal is a split of some shared models that must be refused, the
// refusal's text, and why the shapes allow nothing else. The split tests
// (internal/model, internal/cluster) check every refusal against this
// table: a refused split not listed here fails, and so does a listed one
// that runs, so a block rounding or plan change that silently stops a
// split from running cannot pass as "refused as it should be".
type Refusal struct {
	Models []string // file names without .gguf
	// Split says which splits: tp ranks per stage, pp stages, and the
	// weights (nil: any) of the dimension split.
	Split   func(tp, pp int, weights []float64) bool
	Splits  string // the same in words
	Err     string // a part of the refusal's text
	Because string
}

var kquantDense = []string{"tiny-llama-IQ4_XS", "tiny-llama-Q2_K", "tiny-llama-Q3_K_M", "tiny-llama-Q4_K_M",
	"tiny-llama-Q5_K_M", "tiny-llama-Q6_K", "tiny-qwen2-Q4_K_M", "tiny-qwen3-Q4_K_M"}

const noShare = "no attention heads and no FFN columns"

// Refusals is the table.
var Refusals = []Refusal{
	{
		Models: []string{"tiny-qwen3moe-Q4_K_M"},
		Split:  func(tp, pp int, _ []float64) bool { return tp > 1 },
		Splits: "every tensor split", Err: noShare,
		Because: "its attention output (Q5_K, 256 inputs) and its experts (Q4_K, 256 columns) are one 256-value K-quant block each: rank 0 takes both, and the other ranks would only relay",
	},
	{
		Models: []string{"tiny-gpt-oss-Q4_K_M"},
		Split:  func(tp, pp int, _ []float64) bool { return tp > 1 },
		Splits: "every tensor split", Err: noShare,
		Because: "its attention output (Q4_K, 256 inputs) is one K-quant block and its experts' 32 columns one Q5_0 block (ffn_down_exps): rank 0 takes both",
	},
	{
		Models: kquantDense,
		Split: func(tp, pp int, w []float64) bool {
			return tp == 2 && pp == 1 && slices.Equal(w, []float64{3, 1})
		},
		Splits: "tensor split 3:1 over 2 ranks", Err: noShare,
		Because: "the attention output (256 inputs) is one K-quant block, and a quarter of the FFN's 768 columns (three blocks of 256) rounds to no block",
	},
	{
		Models: []string{"tiny-qwen35moe-Q8_0", "tiny-qwen35moe-Q4_K_M"},
		Split: func(tp, pp int, w []float64) bool {
			return tp == 2 && pp == 1 && slices.Equal(w, []float64{3, 1})
		},
		Splits: "tensor split 3:1 over 2 ranks", Err: noShare,
		Because: "a quarter rounds to none of each: the 2 KV groups, the DeltaNet output's 64 inputs (two 32-value blocks), the experts' 32 columns (one block)",
	},
	{
		Models: []string{"tiny-qwen3moe-F32", "tiny-qwen3moe-Q8_0", "tiny-qwen3moe-Q4_K_M", "tiny-gpt-oss-F32",
			"tiny-gpt-oss-MXFP4_MOE", "tiny-gpt-oss-Q8_0", "tiny-gpt-oss-Q4_K_M", "tiny-glm4moe-F32", "tiny-glm4moe-Q8_0",
			"tiny-glm4moe-Q4_K_M"},
		Split:  func(tp, pp int, _ []float64) bool { return pp > 2 },
		Splits: "a layer split of 3 stages", Err: "pipeline stages for 2 layers",
		Because: "they have 2 decoder layers (glm4moe's third block is its MTP head)",
	},
}

// MustRefuse returns the entry of Refusals for splitting model (a file
// name, with or without .gguf) tp x pp with weights, or nil when that
// split must run.
func MustRefuse(model string, tp, pp int, weights []float64) *Refusal {
	model = strings.TrimSuffix(model, ".gguf")
	for i, r := range Refusals {
		if slices.Contains(r.Models, model) && r.Split(tp, pp, weights) {
			return &Refusals[i]
		}
	}
	return nil
}

// Check compares a split's outcome with the table: err is what splitting
// (or planning) returned. It returns a message for a mismatch, "" when the
// outcome is the one the table wants, and whether the split was refused as
// it must be (the caller then stops there).
func Check(model string, tp, pp int, weights []float64, err error) (msg string, refused bool) {
	r := MustRefuse(model, tp, pp, weights)
	switch {
	case r == nil && err != nil:
		return "refused, and the refusal table lists no such refusal: " + err.Error(), false
	case r == nil:
		return "", false
	case err == nil:
		return "ran, but must be refused (" + r.Splits + "): " + r.Because, false
	case !strings.Contains(err.Error(), r.Err):
		return "refused for another reason than the table's (" + r.Err + ": " + r.Because + "): " + err.Error(), false
	}
	return "", true
}
