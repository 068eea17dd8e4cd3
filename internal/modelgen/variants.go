package modelgen

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Variants are small models of the Qwen3.5 and GLM-5 families in shapes the
// shared test models lack, each a combination the family's metadata allows
// and llama.cpp runs. internal/model compares braid's logits for them with
// llama.cpp's, kept in internal/model/testdata and made by
// scripts/ref-variants.sh (braid genmodel --variant NAME --type T writes
// the file, llama.cpp's logits are taken from it). The files are not kept:
// modelgen writes them bit for bit the same from these configs (see
// TestVariantsStable), so a change here must come with new reference
// logits.
var Variants = map[string]Config{
	// Qwen3.5-MoE: the layer kinds from attention.recurrent_layers, which
	// disagrees with full_attention_interval (2 says DeltaNet, attention,
	// DeltaNet, attention) and makes the last trunk layer a DeltaNet layer;
	// as many DeltaNet key heads as value heads; rope on 12 of 48 dims in
	// the sections [1, 0, 2, 0] (interleaved M-RoPE takes pair i's
	// position from sector i mod 3: pairs 1 and 4 fall in the empty
	// second section and take the fourth position, 0 for text tokens, so
	// they do not turn); a shared expert 96
	// wide beside experts of 64 (not a multiple); a model 160 wide; a
	// NextN block after the trunk.
	"qwen35moe-hv": {Arch: "qwen35moe", Layers: 4, NextN: 1, Embd: 160, Heads: 4, KVHeads: 2, HeadDim: 48, RopeDim: 12,
		RopeSections: []int32{1, 0, 2, 0},
		Vocab:        512, SSMState: 32, SSMKeyHeads: 4, SSMValueHeads: 4, FullAttnInterval: 2,
		Recurrent: []bool{true, false, false, true}, Experts: 4, ExpertsUsed: 2, ExpertFF: 64, ExpertSharedFF: 96, Seed: 2901},
	// Qwen3.5 dense: attention first and last in the recurrent_layers
	// array, no interval key (llama.cpp's default of 4 would say
	// otherwise), equal key and value heads, rope on 16 of 64 dims in
	// sections [0, 2, 2, 0] that cover 4 of its 8 pairs (the sectors
	// repeat: pair i is sector i mod 4; sectors 0 and 3 belong to no
	// section of text positions and do not turn, among them pair 0, the
	// fastest), MQA.
	"qwen35-hv": {Arch: "qwen35", Layers: 4, Embd: 192, FF: 128, Heads: 3, KVHeads: 1, HeadDim: 64, RopeDim: 16,
		RopeSections: []int32{0, 2, 2, 0},
		Vocab:        512, SSMState: 32, SSMKeyHeads: 2, SSMValueHeads: 2, Recurrent: []bool{false, true, true, false},
		NoIntervalKey: true, Seed: 2902},
	// GLM-5 (glm-dsa) with the indexer full at every layer (no
	// attention.indexer.types key) and a top-3 of a 32-token prompt.
	"glm-dsa-allfull-top3": {Arch: "glm-dsa", Layers: 3, LeadingDense: 1, Embd: 128, FF: 96, Heads: 4,
		Vocab: 512, QLoraRank: 64, KVLoraRank: 64, QKNopeDim: 32, RopeDim: 16, VHeadDim: 32,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 64, ExpertShared: 1,
		IndexerHeads: 2, IndexerDim: 64, IndexerTopK: 3, Seed: 2903},
}

// EncoderVariants are small encoders (bert, nomic-bert) with a WordPiece
// vocabulary, one per pooling kind, whose llama.cpp embeddings (and
// llama-tokenize ids) internal/model and internal/tokenizer keep in their
// testdata, made by scripts/ref-encoders.sh and scripts/ref-wpm.sh. Kept
// apart from Variants, which the decoder tests run; Variant and braid
// genmodel --variant take both.
var EncoderVariants = map[string]Config{
	// BERT (BGE, MiniLM) shape: learned positions, separate q/k/v, GELU,
	// mean pooling.
	"bert-mean": {Arch: "bert", Layers: 2, Embd: 64, FF: 128, Heads: 4, Vocab: 200, Context: 64, Pooling: 1, Seed: 2921},
	// [CLS] pooling, three heads of 32, one token type.
	"bert-cls": {Arch: "bert", Layers: 3, Embd: 96, FF: 160, Heads: 3, Vocab: 180, Context: 48, Pooling: 2, TokenTypes: 1, Seed: 2922},
	// nomic-bert: rotary, fused q|k|v, SwiGLU; last-token pooling.
	"nomic-bert-last": {Arch: "nomic-bert", Layers: 2, Embd: 64, FF: 96, Heads: 2, Vocab: 200, Context: 64, Pooling: 3, Seed: 2923},
}

// EncoderVariantNames lists the EncoderVariants, sorted.
func EncoderVariantNames() []string {
	names := make([]string, 0, len(EncoderVariants))
	for n := range EncoderVariants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// VariantNames lists the Variants, sorted.
func VariantNames() []string {
	names := make([]string, 0, len(Variants))
	for n := range Variants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Variant is the complete Config of variant name in file type typ (F32,
// Q8_0 or any other Mix name): the shape, its seed, and the name written
// into general.name, so that braid genmodel --variant and a test write the
// same bytes.
func Variant(name, typ string) (Config, error) {
	c, ok := Variants[name]
	if !ok {
		c, ok = EncoderVariants[name]
	}
	if !ok {
		return Config{}, fmt.Errorf("modelgen: no variant %q (known: %s)", name, strings.Join(append(VariantNames(), EncoderVariantNames()...), ", "))
	}
	t, rule, err := Mix(typ)
	if err != nil {
		return Config{}, err
	}
	c.Type, c.TypeFor = t, rule
	c.Name = fmt.Sprintf("braid-random %s %s", name, typ)
	// The slices are the map's: a caller that edits them must not edit
	// the variant.
	c.Recurrent = slices.Clone(c.Recurrent)
	c.IndexerFull = slices.Clone(c.IndexerFull)
	c.RopeSections = slices.Clone(c.RopeSections)
	return c, nil
}
