package model

// The Qwen family rotates halves (NeoX layout). qwen2 adds biases to Q, K and
// V; qwen3 normalises each query and key head (QK-norm); qwen3moe replaces the
// FFN by a router over experts.
func init() {
	archs["qwen2"] = arch{neox: true, qkvBias: true}
	archs["qwen3"] = arch{neox: true, qkNorm: true}
	archs["qwen3moe"] = arch{neox: true, qkNorm: true, moe: true}
}
