package modelgen

import (
	"path/filepath"
	"testing"

	"braid/internal/gguf"
	"braid/internal/quant"
	"braid/internal/spec"
)

func TestWriteFileOpens(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		tensors int
		want    []string
	}{
		{"llama q8_0", Config{Arch: "llama", Layers: 2, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0}, 2*9 + 3,
			[]string{"blk.1.ffn_down.weight", "output.weight"}},
		{"qwen2 biases", Config{Arch: "qwen2", Layers: 1, Embd: 64, FF: 96, Heads: 2, Vocab: 260, Type: quant.F16}, 12 + 3,
			[]string{"blk.0.attn_q.bias"}},
		{"qwen3 tied", Config{Arch: "qwen3", Layers: 1, Embd: 256, FF: 256, Heads: 2, Vocab: 300, Type: quant.Q4_K, TiedOutput: true}, 11 + 2,
			[]string{"blk.0.attn_k_norm.weight"}},
		{"gpt-oss", Config{Arch: "gpt-oss", Layers: 2, Embd: 64, FF: 64, Heads: 4, KVHeads: 2, Vocab: 300, Experts: 4, ExpertsUsed: 2, Type: quant.Q8_0}, 2*19 + 3,
			[]string{"blk.1.attn_sinks.weight", "blk.0.ffn_down_exps.bias", "output.weight"}},
		{"qwen3moe", Config{Arch: "qwen3moe", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 260, Experts: 4, ExpertsUsed: 2, Type: quant.F32}, 12 + 3,
			[]string{"blk.0.ffn_gate_exps.weight"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := WriteFile(path, tc.cfg); err != nil {
				t.Fatal(err)
			}
			m, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Arch() != tc.cfg.Arch {
				t.Errorf("arch %q, want %q", m.Arch(), tc.cfg.Arch)
			}
			if len(m.Tensors) != tc.tensors {
				t.Errorf("%d tensors, want %d", len(m.Tensors), tc.tensors)
			}
			for _, n := range tc.want {
				if _, ok := m.Tensor(n); !ok {
					t.Errorf("tensor %s missing", n)
				}
			}
			toks, _ := m.Strings("tokenizer.ggml.tokens")
			if len(toks) != tc.cfg.Vocab {
				t.Errorf("%d tokens, want %d", len(toks), tc.cfg.Vocab)
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{
		{Arch: "gpt9", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Type: quant.F32},
		{Layers: 1, Embd: 64, FF: 64, Heads: 3, KVHeads: 2, Vocab: 300, Type: quant.F32},
		{Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 10, Type: quant.F32},
		{Layers: 1, Embd: 100, FF: 64, Heads: 2, Vocab: 300, Type: quant.Q4_K},
		{Arch: "gpt-oss", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Experts: 4, ExpertsUsed: 2, Type: quant.F32, TiedOutput: true},
		{Arch: "gpt-oss", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Type: quant.F32},
		{Arch: "gpt-oss", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Experts: 4, ExpertsUsed: 5, Type: quant.F32},
		{Arch: "llama", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Type: quant.F32, SlidingWindow: 16},
		{Layers: 1, Embd: 256, FF: 256, Heads: 2, Vocab: 300, Type: quant.IQ2_XXS},
		{Arch: "llama", Layers: 1, Embd: 64, FF: 64, Heads: 2, Vocab: 300, Type: quant.F32, NextN: 1},
		{Arch: "qwen3moe", Layers: 1, Embd: 64, Heads: 2, Vocab: 300, Experts: 4, ExpertsUsed: 2, ExpertFF: 64, Type: quant.F32, NextN: 1},
	} {
		if _, err := Build(c); err == nil {
			t.Errorf("Build(%+v) succeeded, want an error", c)
		}
	}
}

// TestDraftPresetSharesVocab: llama-1b-draft passes the draft-model check
// against llama-1b (same tokenizer, token for token), so `--spec draft` can
// pair them, and it is a small fraction of the target's bytes, as a drafter
// must be. Both are written with their layers cut to one and their width to
// 256 (the vocabulary is what the check reads; the full files are 0.9 GB).
func TestDraftPresetSharesVocab(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) *gguf.Model {
		c := Presets[name]
		c.Layers, c.Embd, c.FF, c.Heads, c.KVHeads = 1, 256, 256, 4, 2
		c.Type = quant.Q8_0
		path := filepath.Join(dir, name+".gguf")
		if err := WriteFile(path, c); err != nil {
			t.Fatal(err)
		}
		m, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	target, draft := open("llama-1b"), open("llama-1b-draft")
	if err := spec.CheckVocab(target, draft); err != nil {
		t.Fatalf("llama-1b-draft cannot draft for llama-1b: %v", err)
	}
	size := func(name string) int64 {
		f, err := Plan(withMix(t, Presets[name], "Q4_K_M"))
		if err != nil {
			t.Fatal(err)
		}
		return f.Size()
	}
	if tb, db := size("llama-1b"), size("llama-1b-draft"); db*10 > tb {
		t.Errorf("llama-1b-draft is %d bytes as Q4_K_M, more than a tenth of llama-1b's %d", db, tb)
	}
}
