package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"braid/internal/kernels"
	"braid/internal/modelgen"
)

// familyVariant is a generated model of one of the MLA, GLM and Qwen3.5
// families in a shape the shared models lack, and what ReadConfig must
// make of it (so that the variant runs what its name says).
type familyVariant struct {
	name  string // ends in -F32 or -Q8_0: the split tolerance goes by it
	cfg   modelgen.Config
	check func(t *testing.T, c *Config)
}

func (v familyVariant) f32() bool { return strings.HasSuffix(v.name, "-F32") }

// config is the variant's Config in the file type its name ends in.
func (v familyVariant) config(t testing.TB) modelgen.Config {
	cfg := v.cfg
	typ, rule, err := modelgen.Mix(v.name[strings.LastIndex(v.name, "-")+1:])
	if err != nil {
		t.Fatal(err)
	}
	cfg.Type, cfg.TypeFor = typ, rule
	return cfg
}

// runVariants generates each variant, checks its config and runs it on
// every split splitCases gives (tp 2 and 3, even and uneven; pp 2, and pp
// 3 from three layers; tp 2 x pp 2) against world size 1.
//
// A split may legitimately pick another greedy token where world 1's top
// two logits nearly tie, so the seeds give every compared step (the
// prompt's last position and 15 greedy steps) a top-2 margin of at least
// 0.02 for the quantized variants (whose splits the split tolerance lets
// move by 2e-2 of the spread) and 0.005 for F32 ones; where the first
// seed tried fell short, its comment says so.
func runVariants(t *testing.T, vs []familyVariant) {
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			f := genModel(t, v.config(t))
			c, err := ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			if v.check != nil {
				v.check(t, c)
			}
			checkAllSplits(t, f, v.name, v.f32(), splitCases)
		})
	}
}

// TestDeepseek2VariantsSplit: MLA beyond the shared model's 4 heads and 3
// layers. F32: 6 heads (2/2/2 and 1/2/3 over 3 ranks) of a wider nope than
// rope, a value head unlike the nope, 4 layers of which 2 are dense, 12
// experts in 6 groups of which 3 are kept, 3 used, two shared experts,
// YaRN. Q8_0: DeepSeek-V2-Lite's direct attn_q (no q_lora) and softmax
// router without selection bias or groups, 5 heads (3/2, 2/2/1), value
// and expert widths on Q8_0's 32-column blocks.
func TestDeepseek2VariantsSplit(t *testing.T) { runVariants(t, deepseek2Variants) }

var deepseek2Variants = []familyVariant{
	{"deepseek2-6h-groups-F32", modelgen.Config{Arch: "deepseek2", Layers: 4, LeadingDense: 2, Embd: 96, FF: 80, Heads: 6,
		Vocab: 300, QLoraRank: 48, KVLoraRank: 40, QKNopeDim: 24, RopeDim: 8, VHeadDim: 20,
		Experts: 12, ExpertsUsed: 3, ExpertFF: 24, ExpertShared: 2, ExpertGroups: 6, ExpertGroupsUsed: 3,
		RopeScale: 8, RopeOrigContext: 256, Seed: 31},
		func(t *testing.T, c *Config) {
			if c.MLA == nil || c.MLA.QLora != 48 || c.MLA.Nope != 24 || c.MLA.VDim != 20 || c.ExpertGroups != 6 ||
				c.ExpertGroupsUsed != 3 || c.ExpertShared != 2 || c.Gating != GateSigmoid || c.MoE(1) || !c.MoE(2) {
				t.Fatalf("config %+v, MLA %+v", c, c.MLA)
			}
		}},
	{"deepseek2-lite-5h-Q8_0", modelgen.Config{Arch: "deepseek2", Layers: 3, LeadingDense: 1, Embd: 128, FF: 96, Heads: 5,
		Vocab: 300, KVLoraRank: 64, QKNopeDim: 32, RopeDim: 16, VHeadDim: 32, ExpertGating: 1, ExpertWeightsScale: 1,
		Experts: 6, ExpertsUsed: 2, ExpertFF: 64, ExpertShared: 1, Seed: 32},
		func(t *testing.T, c *Config) {
			if c.MLA == nil || c.MLA.QLora != 0 || c.Gating != GateSoftmax || c.NormTopKProb || c.ExpertGroups != 0 {
				t.Fatalf("config %+v, MLA %+v", c, c.MLA)
			}
		}},
}

// TestGlmDsaVariantsSplit: the indexer beyond the shared model. F32: 4
// layers full, shared, shared, full (two layers reusing one selection), a
// top-5 under a 12-token prompt, 3 indexer heads of 64, 6 heads. Q8_0:
// every layer full (no attention.indexer.types key), a top-3, 5 heads,
// expert groups.
func TestGlmDsaVariantsSplit(t *testing.T) { runVariants(t, glmDsaVariants) }

var glmDsaVariants = []familyVariant{
	{"glm-dsa-shared2-top5-F32", modelgen.Config{Arch: "glm-dsa", Layers: 4, LeadingDense: 1, Embd: 96, FF: 80, Heads: 6,
		Vocab: 300, QLoraRank: 48, KVLoraRank: 32, QKNopeDim: 16, RopeDim: 8, VHeadDim: 16,
		Experts: 6, ExpertsUsed: 2, ExpertFF: 32, ExpertShared: 1,
		IndexerHeads: 3, IndexerDim: 64, IndexerTopK: 5, IndexerFull: []bool{true, false, false, true}, Seed: 41},
		func(t *testing.T, c *Config) {
			x := c.MLA.Indexer
			if x == nil || x.TopK != 5 || x.Heads != 3 || x.Dim != 64 || !slices.Equal(x.Full, []bool{true, false, false, true}) {
				t.Fatalf("indexer %+v", x)
			}
		}},
	// Seed 44: seed 42 had a greedy step with a top-2 margin of 0.007.
	{"glm-dsa-allfull-top3-Q8_0", modelgen.Config{Arch: "glm-dsa", Layers: 3, LeadingDense: 1, Embd: 128, FF: 96, Heads: 5,
		Vocab: 300, QLoraRank: 64, KVLoraRank: 64, QKNopeDim: 32, RopeDim: 16, VHeadDim: 32,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 64, ExpertShared: 1, ExpertGroups: 4, ExpertGroupsUsed: 2,
		IndexerHeads: 2, IndexerDim: 64, IndexerTopK: 3, Seed: 44},
		func(t *testing.T, c *Config) {
			x := c.MLA.Indexer
			if x == nil || x.TopK != 3 || !slices.Equal(x.Full, []bool{true, true, true}) || c.ExpertGroups != 4 {
				t.Fatalf("indexer %+v, groups %d", x, c.ExpertGroups)
			}
		}},
}

// TestGlm4moeVariantsSplit: F32: 3 trunk layers, all MoE (no leading dense
// layer), 6 heads over 3 KV heads (one KV head a rank over 3), 2 NextN
// blocks after the trunk (skipped), rope on 12 of 24 dims. Q8_0:
// GLM-4.5-Air's attention without QK norm, multi-query (1 KV head), 2
// leading dense layers, expert groups.
func TestGlm4moeVariantsSplit(t *testing.T) { runVariants(t, glm4moeVariants) }

var glm4moeVariants = []familyVariant{
	{"glm4moe-6h3kv-nextn2-F32", modelgen.Config{Arch: "glm4moe", Layers: 3, NextN: 2, Embd: 96, FF: 64, Heads: 6, KVHeads: 3,
		HeadDim: 24, RopeDim: 12, Vocab: 300, Experts: 6, ExpertsUsed: 3, ExpertFF: 40, ExpertShared: 1, Seed: 51},
		func(t *testing.T, c *Config) {
			if c.Layers != 3 || !c.MoE(0) || c.Rope.Dims != 12 || c.KVHeads != 3 {
				t.Fatalf("config %+v", c)
			}
		}},
	{"glm4moe-air-mqa-Q8_0", modelgen.Config{Arch: "glm4moe", Layers: 4, LeadingDense: 2, NoQKNorm: true, Embd: 128, FF: 96,
		Heads: 4, KVHeads: 1, HeadDim: 32, Vocab: 300, Experts: 8, ExpertsUsed: 2, ExpertFF: 64, ExpertShared: 1,
		ExpertGroups: 4, ExpertGroupsUsed: 2, Seed: 52},
		func(t *testing.T, c *Config) {
			if c.KVHeads != 1 || c.MoE(1) || !c.MoE(2) || c.ExpertGroups != 4 {
				t.Fatalf("config %+v", c)
			}
		}},
}

// TestQwen35VariantsSplit: DeltaNet beyond the shared model. F32: 6
// layers in the pattern DeltaNet, attention, DeltaNet, DeltaNet,
// attention, DeltaNet (attention.recurrent_layers), 2 key heads read by 6
// value heads (3/3, 2/2/2, 1/2/3 a rank), state 16, 6 query heads over 2
// KV heads. Q8_0: full attention every 2nd layer (the interval), 3 key
// heads read by 6 value heads of 16, so that a 32-column Q8_0 block of
// ssm_out holds two value heads and the split goes in steps of two (4/2
// over 2 ranks), a conv of 3 taps, MQA.
func TestQwen35VariantsSplit(t *testing.T) { runVariants(t, qwen35Variants) }

var qwen35VariantsPattern = []bool{true, false, true, true, false, true}

var qwen35Variants = []familyVariant{
	{"qwen35-pattern-6vh-F32", modelgen.Config{Arch: "qwen35", Layers: 6, Embd: 96, FF: 80, Heads: 6, KVHeads: 2, HeadDim: 16,
		Vocab: 300, SSMState: 16, SSMKeyHeads: 2, SSMValueHeads: 6, Recurrent: qwen35VariantsPattern, Seed: 61},
		func(t *testing.T, c *Config) {
			if !slices.Equal(c.Recurrent[:c.Layers], qwen35VariantsPattern) || c.SSM.VHeads != 6 || c.SSM.KHeads != 2 || c.SSM.State != 16 {
				t.Fatalf("recurrent %v, SSM %+v", c.Recurrent, c.SSM)
			}
		}},
	// Seed 66: seeds 62 to 65 had greedy steps with top-2 margins of 0.001
	// to 0.01.
	{"qwen35-interval2-mqa-Q8_0", modelgen.Config{Arch: "qwen35", Layers: 4, Embd: 128, FF: 96, Heads: 4, KVHeads: 1, HeadDim: 32,
		Vocab: 300, SSMState: 16, SSMKeyHeads: 3, SSMValueHeads: 6, SSMConv: 3, FullAttnInterval: 2, Seed: 66},
		func(t *testing.T, c *Config) {
			if !slices.Equal(c.Recurrent[:c.Layers], []bool{true, false, true, false}) || c.SSM.Conv != 3 {
				t.Fatalf("recurrent %v, SSM %+v", c.Recurrent, c.SSM)
			}
		}},
}

// TestQwen35moeVariantsSplit: F32: 5 layers (attention at the 4th), 8
// value heads over 2 key heads, 6 experts with 3 used, a shared expert
// two experts wide, a NextN block. Q8_0: attention first then DeltaNet
// (pattern), 4 experts with 1 used, MQA.
func TestQwen35moeVariantsSplit(t *testing.T) { runVariants(t, qwen35moeVariants) }

var qwen35moeVariants = []familyVariant{
	{"qwen35moe-8vh-shared2x-F32", modelgen.Config{Arch: "qwen35moe", Layers: 5, NextN: 1, Embd: 96, Heads: 4, KVHeads: 2,
		HeadDim: 24, Vocab: 300, SSMState: 16, SSMKeyHeads: 2, SSMValueHeads: 8,
		Experts: 6, ExpertsUsed: 3, ExpertFF: 24, ExpertSharedFF: 48, Seed: 71},
		func(t *testing.T, c *Config) {
			if !slices.Equal(c.Recurrent[:c.Layers], []bool{true, true, true, false, true}) || c.SharedFF != 48 || c.ExpertsUsed != 3 {
				t.Fatalf("recurrent %v, config %+v", c.Recurrent, c)
			}
		}},
	// Seed 73: seed 72 had a greedy step with a top-2 margin of 6e-4.
	{"qwen35moe-attnfirst-top1-Q8_0", modelgen.Config{Arch: "qwen35moe", Layers: 3, Embd: 128, Heads: 4, KVHeads: 1, HeadDim: 32,
		Vocab: 300, SSMState: 32, SSMKeyHeads: 2, SSMValueHeads: 4, Recurrent: []bool{false, true, true},
		Experts: 4, ExpertsUsed: 1, ExpertFF: 64, Seed: 73},
		func(t *testing.T, c *Config) {
			if !slices.Equal(c.Recurrent[:c.Layers], []bool{false, true, true}) || c.ExpertsUsed != 1 {
				t.Fatalf("recurrent %v, config %+v", c.Recurrent, c)
			}
		}},
}

// TestFamilyPresetsLoad: every preset of these families, cut down (fewer
// layers, heads, experts, a narrower model and a 512-token vocabulary, the
// per-head geometry, routing and layer kinds kept) and written in its
// default mix, loads and runs a prompt and a decode step to finite logits
// that are not all equal. The presets themselves are gigabytes: modelgen's
// TestFamilyPresets checks that they lay out.
func TestFamilyPresetsLoad(t *testing.T) {
	if raceEnabled && testing.Short() {
		// The presets' real-width matrices (glm5-small's q_b alone is 33M
		// values) take minutes to quantize under the race detector; the
		// plain run checks the presets, the race run is for interleavings.
		t.Skip("under -race -short: the plain test run loads the presets")
	}
	for _, name := range modelgen.PresetNames() {
		p := modelgen.Presets[name]
		switch p.Arch {
		case "deepseek2", "glm-dsa", "glm4moe", "qwen35", "qwen35moe":
		default:
			continue
		}
		t.Run(name, func(t *testing.T) {
			c := p
			c.Vocab, c.Embd = 512, 256
			switch c.Arch {
			case "deepseek2", "glm-dsa":
				// One dense layer, then one MoE layer; 4 heads, the experts
				// cut to 2 per group (or 8 without groups), 256 columns.
				c.Layers, c.Heads, c.FF, c.ExpertFF = c.LeadingDense+1, 4, 512, 256
				c.Experts = max(2*c.ExpertGroups, 8)
				if c.IndexerHeads > 0 {
					c.IndexerHeads, c.IndexerTopK = 4, 4
				}
			default:
				// One DeltaNet x3 + attention block, the heads halved or
				// more (their ratios kept), 8 experts.
				c.Heads, c.KVHeads = c.Heads/c.KVHeads*2, 2
				c.SSMKeyHeads, c.SSMValueHeads = 2, 2*c.SSMValueHeads/c.SSMKeyHeads
				if c.FF > 0 {
					c.FF = 512
				} else {
					c.Experts, c.ExpertFF, c.ExpertSharedFF = 8, 256, 256
				}
			}
			typ, rule, err := modelgen.Mix(modelgen.DefaultMix(c))
			if err != nil {
				t.Fatal(err)
			}
			c.Type, c.TypeFor = typ, rule
			f := genModel(t, c)
			pool := kernels.NewPool(2)
			defer pool.Close()
			m, err := New(f, pool, Options{MaxBatch: 16})
			if err != nil {
				t.Fatal(err)
			}
			cache, err := m.NewCache(CacheSize{Positions: 64})
			if err != nil {
				t.Fatal(err)
			}
			mc := &m.Cfg
			t.Logf("%s cut down: %s, %d layers, MLA %+v, SSM %+v", name, mc.Arch, mc.Layers, mc.MLA, mc.SSM)
			// The preset's per-head geometry and routing, as braid reads them.
			switch {
			case mc.MLA != nil:
				a := mc.MLA
				if a.QLora != p.QLoraRank || a.KVLora != p.KVLoraRank || a.Nope != p.QKNopeDim || a.Rope != p.RopeDim || a.VDim != p.VHeadDim ||
					mc.ExpertGroups != p.ExpertGroups || mc.ExpertGroupsUsed != p.ExpertGroupsUsed || mc.ExpertsUsed != p.ExpertsUsed ||
					mc.Gating != GateSigmoid || !mc.NormTopKProb || mc.ExpertWeightsScale != 2.5 || (a.Indexer != nil) != (p.IndexerHeads > 0) {
					t.Fatalf("MLA %+v, config %+v: not the preset's geometry and routing", a, mc)
				}
			case mc.SSM != nil:
				if mc.SSM.State != p.SSMState || mc.HeadDim != p.HeadDim || mc.Rope.Dims != p.RopeDim ||
					!slices.Equal(mc.Recurrent[:mc.Layers], []bool{true, true, true, false}) || mc.ExpertsUsed != p.ExpertsUsed {
					t.Fatalf("SSM %+v, config %+v: not the preset's geometry", mc.SSM, mc)
				}
			default:
				t.Fatalf("config %+v", mc)
			}
			V := m.Cfg.Vocab
			var b Batch
			for i, tok := range testPrompt[:8] {
				b.Add(tok, int32(i), 0, i == 7)
			}
			row := make([]float32, V)
			check := func(what string) {
				lo, hi := row[0], row[0]
				for _, v := range row {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("%s: logit %g", what, v)
					}
					lo, hi = min(lo, v), max(hi, v)
				}
				if hi-lo <= 0 {
					t.Fatalf("%s: every logit is %g", what, lo)
				}
			}
			if err := m.Forward(cache, &b, row); err != nil {
				t.Fatal(err)
			}
			check("prompt")
			b.Reset()
			b.Add(argmax(row), 8, 0, true)
			if err := m.Forward(cache, &b, row); err != nil {
				t.Fatal(err)
			}
			check("decode step")
		})
	}
}

// TestReferenceVariantsSplit: modelgen's reference variants (those
// TestVariantLogits compares with llama.cpp: the qwen35moe shared expert
// 96 wide beside experts of 64, cut at its own block boundaries; the
// qwen35 layer kinds from attention.recurrent_layers with equal key and
// value heads and still rope pairs; glm-dsa's every-layer indexer with a
// top-3) in F32 and Q8_0, on every split splitCases gives, against world
// size 1. The split harness compares greedy tokens, so where a variant's
// own seed leaves world 1 a near-tie the shape runs with another seed
// (referenceSplitSeeds).
func TestReferenceVariantsSplit(t *testing.T) {
	for _, v := range modelgen.VariantNames() {
		for _, typ := range variantTypes {
			name := v + "-" + typ
			t.Run(name, func(t *testing.T) {
				cfg, err := modelgen.Variant(v, typ)
				if err != nil {
					t.Fatal(err)
				}
				if s, ok := referenceSplitSeeds[name]; ok {
					cfg.Seed = s
				}
				checkAllSplits(t, genModel(t, cfg), name, typ == "F32", splitCases)
			})
		}
	}
}

// referenceSplitSeeds replace a reference variant's seed in
// TestReferenceVariantsSplit: qwen35moe-hv-Q8_0's own (2901) has a greedy
// step with a world-1 top-2 margin of 0.0015, inside what a Q8_0 split may
// move; 2913 has the widest smallest margin of 2904-2915 (0.099).
var referenceSplitSeeds = map[string]uint64{"qwen35moe-hv-Q8_0": 2913}
