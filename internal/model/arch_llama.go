package model

// llama: Llama 1/2/3.x, Mistral and llama2.c conversions. RoPE rotates
// adjacent pairs; llama3's frequency scaling arrives as the rope_freqs tensor.
func init() { archs["llama"] = arch{} }
