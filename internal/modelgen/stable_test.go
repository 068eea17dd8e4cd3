package modelgen

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"braid/internal/quant"
)

// TestOutputsStable: the files of the architectures modelgen wrote before
// the DeepSeek, GLM and Qwen3.5 families came are unchanged byte for byte
// (cached models and the seeds tests chose stay valid), pinned by their
// SHA-256. Files in K-quants or MXFP4 pin only their header (metadata and
// tensor directory: names, types, shapes, offsets), so that work on those
// quantizers does not trip this test; the F32, F16 and Q8_0 files pin the
// random stream.
func TestOutputsStable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		c          Config
		headerOnly bool
		want       string
	}{
		{"llama", Config{Arch: "llama", Layers: 2, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0, Seed: 3}, false,
			"f502cded7680afa6617ed07b80296055eb4be8870cad288d1ca0e087024e876f"},
		{"llama-tied-rope", Config{Layers: 1, Embd: 256, FF: 256, Heads: 2, Vocab: 259, Type: quant.Q4_K, TiedOutput: true, RopeBase: 500000, RopeScale: 8}, true,
			"2fb5db34f015966e1ea2f12f3cac6468e76fe3f725dee5a330480fb78b78e5cc"},
		{"qwen2", Config{Arch: "qwen2", Layers: 1, Embd: 64, FF: 96, Heads: 2, Vocab: 260, Type: quant.F16}, false,
			"fb054af22bbb21f4656a0c60be6c207e2b711f87ffe22d03e19182a2aa93c4f4"},
		{"qwen3", Config{Arch: "qwen3", Layers: 2, Embd: 64, FF: 96, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 300, Type: quant.F32, Seed: 7}, false,
			"83e13641a53da1372e5ebbf8594d8a324a5b9cc8ae4572644e3a5fd2de768ca8"},
		{"qwen3moe-F32", Config{Arch: "qwen3moe", Layers: 2, Embd: 64, FF: 64, Heads: 2, Vocab: 260, Experts: 4, ExpertsUsed: 2, ExpertFF: 32, Type: quant.F32, Seed: 5}, false,
			"008f7a0e104dc5eadea14c4a18b2b61368832a0bef05f188e213694fb85b3d44"},
		{"qwen3moe-Q4_K_M", withMix(t, Config{Arch: "qwen3moe", Layers: 1, Embd: 256, FF: 256, Heads: 2, Vocab: 300, Experts: 4, ExpertsUsed: 2}, "Q4_K_M"), true,
			"cae34b8936c0001ca6177b8dfa7852ee57290d13dffd7ba8fdd25fa9d1da9177"},
		{"gpt-oss-MXFP4_MOE", withMix(t, tinyGPTOSS, "MXFP4_MOE"), true,
			"babf92c53fb504491fea85810f31fef6c47eac883a3c0f835cf5da0fc7a082fd"},
		{"gpt-oss-F32", withMix(t, Config{Arch: "gpt-oss", Layers: 2, Embd: 64, FF: 32, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 300,
			Experts: 4, ExpertsUsed: 2, ExpertFF: 96, Seed: 4}, "F32"), false,
			"da001ebb96d89111b474f950642077910de8ede2ec04151398bbbe54c0cc64e9"},
		{"preset-tiny-Q8_0", withMix(t, Presets["tiny"], "Q8_0"), false,
			"c513a884da099299a907fbf7bc6e707991aaa32ba5172941b5b9dbb1728b61a8"},
	} {
		f, err := Plan(tc.c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h := sha256.New()
		if tc.headerOnly {
			h.Write(f.header)
		} else if _, err := f.WriteTo(h); err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != tc.want {
			t.Errorf("%s: SHA-256 %s, want %s", tc.name, got, tc.want)
		}
	}
}
