package modelgen

import (
	"fmt"

	"braid/internal/gguf"
)

// Encoders: bert (BERT, BGE, MiniLM: learned positions, separate q/k/v
// with biases, GELU feed-forward with biases) and nomic-bert (rotary
// positions, fused attn_qkv, SwiGLU without biases), with the keys, tensor
// names and WordPiece vocabulary llama.cpp's converter writes for them
// (conversion/bert.py: "▁" before word-initial pieces, continuations bare,
// control tokens as they are).

func (c *Config) encoder() bool { return c.Arch == "bert" || c.Arch == "nomic-bert" }

// fillEncoder checks an encoder's shape and fills its defaults.
func (c *Config) fillEncoder() error {
	if c.Name == "" {
		c.Name = "braid-random-" + c.Arch
	}
	if c.Layers <= 0 || c.Embd <= 0 || c.FF <= 0 || c.Heads <= 0 || c.Embd%c.Heads != 0 {
		return fmt.Errorf("modelgen: %s: bad shape layers=%d embd=%d ff=%d heads=%d (embd a multiple of heads)", c.Arch, c.Layers, c.Embd, c.FF, c.Heads)
	}
	if c.KVHeads != 0 && c.KVHeads != c.Heads || c.HeadDim != 0 && c.HeadDim != c.Embd/c.Heads {
		return fmt.Errorf("modelgen: %s: encoders have as many KV heads as heads and heads Embd/Heads wide", c.Arch)
	}
	if c.moe() || c.NextN != 0 || c.SlidingWindow != 0 || c.RopeScale != 0 {
		return fmt.Errorf("modelgen: %s: no experts, NextN blocks, sliding window or rope scaling on an encoder", c.Arch)
	}
	c.KVHeads, c.HeadDim = c.Heads, c.Embd/c.Heads
	if c.Vocab < len(wpmBase()) {
		return fmt.Errorf("modelgen: %s: a WordPiece vocabulary of %d tokens is smaller than its %d fixed pieces", c.Arch, c.Vocab, len(wpmBase()))
	}
	if c.Context == 0 {
		c.Context = 128
	}
	if c.Pooling < 0 || c.Pooling > 4 {
		return fmt.Errorf("modelgen: %s: pooling type %d is not one of llama.cpp's 0..4", c.Arch, c.Pooling)
	}
	if c.TokenTypes == 0 {
		c.TokenTypes = 2
	}
	if c.EmbedType == 0 {
		c.EmbedType = c.Type
	}
	c.NormEps = orF(c.NormEps, 1e-12)
	c.RopeBase = orF(c.RopeBase, 1000)
	return nil
}

func (c *Config) setEncoderMetadata(w *gguf.Writer) {
	a := c.Arch + "."
	w.Set("general.architecture", gguf.String(c.Arch))
	w.Set("general.name", gguf.String(c.Name))
	w.Set(a+"block_count", gguf.Uint32(uint32(c.Layers)))
	w.Set(a+"context_length", gguf.Uint32(uint32(c.Context)))
	w.Set(a+"embedding_length", gguf.Uint32(uint32(c.Embd)))
	w.Set(a+"feed_forward_length", gguf.Uint32(uint32(c.FF)))
	w.Set(a+"attention.head_count", gguf.Uint32(uint32(c.Heads)))
	w.Set(a+"attention.layer_norm_epsilon", gguf.Float32(c.NormEps))
	w.Set(a+"attention.causal", gguf.Bool(false))
	w.Set(a+"pooling_type", gguf.Uint32(uint32(c.Pooling)))
	if c.Arch == "nomic-bert" {
		w.Set(a+"rope.freq_base", gguf.Float32(c.RopeBase))
	}
	w.Set("tokenizer.ggml.token_type_count", gguf.Uint32(uint32(c.TokenTypes)))
	addWPMVocab(w, c.Vocab)
}

func (c *Config) planEncoder(p *planner) {
	E, F := c.Embd, c.FF
	p.matrix("token_embd.weight", c.EmbedType, 1, E, c.Vocab)
	p.f32("token_types.weight", 0, 0.1, E, c.TokenTypes)
	if c.Arch == "bert" {
		p.f32("position_embd.weight", 0, 0.1, E, c.Context)
	}
	p.norm("token_embd_norm.weight", E)
	p.f32("token_embd_norm.bias", 0, 0.1, E)
	for l := 0; l < c.Layers; l++ {
		pre := fmt.Sprintf("blk.%d.", l)
		if c.Arch == "nomic-bert" {
			p.matrix(pre+"attn_qkv.weight", c.Type, inv(E), E, 3*E)
		} else {
			p.matrix(pre+"attn_q.weight", c.Type, inv(E), E, E)
			p.f32(pre+"attn_q.bias", 0, 0.1, E)
			p.matrix(pre+"attn_k.weight", c.Type, inv(E), E, E)
			p.f32(pre+"attn_k.bias", 0, 0.1, E)
			p.matrix(pre+"attn_v.weight", c.Type, inv(E), E, E)
			p.f32(pre+"attn_v.bias", 0, 0.1, E)
		}
		p.matrix(pre+"attn_output.weight", c.Type, inv(E), E, E)
		if c.Arch == "bert" {
			p.f32(pre+"attn_output.bias", 0, 0.1, E)
		}
		p.norm(pre+"attn_output_norm.weight", E)
		p.f32(pre+"attn_output_norm.bias", 0, 0.1, E)
		p.matrix(pre+"ffn_up.weight", c.Type, inv(E), E, F)
		if c.Arch == "nomic-bert" {
			p.matrix(pre+"ffn_gate.weight", c.Type, inv(E), E, F)
		} else {
			p.f32(pre+"ffn_up.bias", 0, 0.1, F)
		}
		p.matrix(pre+"ffn_down.weight", c.Type, inv(F), F, E)
		if c.Arch == "bert" {
			p.f32(pre+"ffn_down.bias", 0, 0.1, E)
		}
		p.norm(pre+"layer_output_norm.weight", E)
		p.f32(pre+"layer_output_norm.bias", 0, 0.1, E)
	}
}

// wpmBase is the fixed part of the generated WordPiece vocabulary: BERT's
// specials, every printable ASCII punctuation and symbol character as a
// word, the digits and letters as word starts and continuations, a few
// longer pieces (so the greedy longest match has choices) and CJK
// ideographs (words of one character).
func wpmBase() []string {
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for c := byte('!'); c <= '~'; c++ {
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		toks = append(toks, "▁"+string(c))
	}
	for _, c := range "0123456789abcdefghijklmnopqrstuvwxyz" {
		toks = append(toks, "▁"+string(c), string(c))
	}
	toks = append(toks, "▁hello", "▁hell", "▁world", "▁the", "▁token", "izer", "ing", "ed", "lo", "▁un", "able",
		"▁bert", "▁embed", "ding", "▁##", "▁中", "▁文", "▁日", "▁本", "▁é")
	return toks
}

// addWPMVocab writes a WordPiece vocabulary of n tokens: wpmBase, then
// "▁w<i>" word pieces up to n. The special ids are written explicitly
// (llama.cpp's defaults, 101 and up, are BERT-base's).
func addWPMVocab(w *gguf.Writer, n int) {
	toks := wpmBase()
	for i := len(toks); len(toks) < n; i++ {
		toks = append(toks, fmt.Sprintf("▁w%d", i))
	}
	types := make([]int32, n)
	for i := range types {
		types[i] = 1
		if i < 5 {
			types[i] = 3
		}
	}
	w.Set("tokenizer.ggml.model", gguf.String("bert"))
	w.Set("tokenizer.ggml.pre", gguf.String("bert-bge"))
	w.Set("tokenizer.ggml.tokens", gguf.StringArray(toks))
	w.Set("tokenizer.ggml.token_type", gguf.Int32Array(types))
	w.Set("tokenizer.ggml.padding_token_id", gguf.Uint32(0))
	w.Set("tokenizer.ggml.unknown_token_id", gguf.Uint32(1))
	w.Set("tokenizer.ggml.bos_token_id", gguf.Uint32(2))
	w.Set("tokenizer.ggml.cls_token_id", gguf.Uint32(2))
	w.Set("tokenizer.ggml.seperator_token_id", gguf.Uint32(3))
	w.Set("tokenizer.ggml.mask_token_id", gguf.Uint32(4))
}
