package modelgen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// sharedShapes are the shapes of the llama.cpp-made tiny models of the
// shared test data (see each folder's README.md), as Configs.
var sharedShapes = map[string]Config{
	"deepseek2": {Arch: "deepseek2", Layers: 3, Embd: 256, FF: 128, Heads: 4, Vocab: 512, Context: 163840,
		QLoraRank: 64, KVLoraRank: 64, QKNopeDim: 32, RopeDim: 16, VHeadDim: 32,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 32, LeadingDense: 1, ExpertShared: 1, ExpertGroups: 4, ExpertGroupsUsed: 2,
		RopeScale: 40, RopeOrigContext: 4096},
	"glm-dsa": {Arch: "glm-dsa", Layers: 3, Embd: 256, FF: 128, Heads: 4, Vocab: 512, Context: 202752,
		QLoraRank: 64, KVLoraRank: 64, QKNopeDim: 32, RopeDim: 16, VHeadDim: 32,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 32, LeadingDense: 1, ExpertShared: 1,
		IndexerHeads: 4, IndexerDim: 64, IndexerTopK: 8, IndexerFull: []bool{true, false, true}},
	"glm4moe": {Arch: "glm4moe", Layers: 2, NextN: 1, Embd: 256, FF: 128, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 512,
		Context: 131072, Experts: 8, ExpertsUsed: 2, ExpertFF: 32, LeadingDense: 1, ExpertShared: 1, ExpertGroups: 1, ExpertGroupsUsed: 1},
	"qwen35": {Arch: "qwen35", Layers: 4, NextN: 1, Embd: 128, FF: 96, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 512,
		Context: 262144, SSMState: 32, SSMKeyHeads: 2, SSMValueHeads: 4},
	"qwen35moe": {Arch: "qwen35moe", Layers: 4, NextN: 1, Embd: 128, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 512,
		Context: 262144, Experts: 8, ExpertsUsed: 2, ExpertFF: 32, SSMState: 16, SSMKeyHeads: 2, SSMValueHeads: 4,
		Recurrent: []bool{true, true, true, false}},
}

// TestFamiliesMatchLlamaCpp: at the shape of each tiny model llama.cpp
// converted (shared test data), every <arch>.* key has the same type and
// value as in llama.cpp's file, there is no other, and the tensors come
// in the same order with the same names, shapes and types, in F32 and in
// Q8_0 (which llama-quantize writes with the norms, biases, routers,
// selection biases, conv taps and decay rates in F32, and the tensors in
// another order). The NextN/MTP blocks of glm4moe and qwen35 are part of
// it.
func TestFamiliesMatchLlamaCpp(t *testing.T) {
	for _, arch := range []string{"deepseek2", "glm-dsa", "glm4moe", "qwen35", "qwen35moe"} {
		for _, mix := range []string{"F32", "Q8_0"} {
			t.Run(arch+"-"+mix, func(t *testing.T) {
				ref, err := gguf.Open(sharedtest.Path("models", arch, "tiny-"+arch+"-"+mix+".gguf"))
				if errors.Is(err, fs.ErrNotExist) {
					sharedtest.Missing(t, "shared test data not available: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				m := writeAndOpen(t, withMix(t, sharedShapes[arch], mix))
				compareWithLlamaCpp(t, m, ref, arch, mix == "F32")
			})
		}
	}
}

// compareWithLlamaCpp compares m's <arch>.* keys and tensors with ref's,
// and with inOrder the tensors' order (that of llama.cpp's converter;
// llama-quantize writes them in another).
func compareWithLlamaCpp(t *testing.T, m, ref *gguf.Model, arch string, inOrder bool) {
	t.Helper()
	keys := func(m *gguf.Model) map[string]gguf.Value {
		out := map[string]gguf.Value{}
		for _, kv := range m.KVs() {
			if strings.HasPrefix(kv.Key, arch+".") {
				out[kv.Key] = kv.Value
			}
		}
		return out
	}
	got, want := keys(m), keys(ref)
	for k, v := range want {
		if g, ok := got[k]; !ok || !g.Equal(v) {
			t.Errorf("%s = %v (%v), llama.cpp's file has %v (%v)", k, g, g.Type(), v, v.Type())
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s = %v is not in llama.cpp's file", k, v)
		}
	}
	if m.Arch() != arch {
		t.Errorf("general.architecture %q", m.Arch())
	}
	if len(m.Tensors) != len(ref.Tensors) {
		t.Errorf("%d tensors, llama.cpp's file has %d", len(m.Tensors), len(ref.Tensors))
	}
	for i, rt := range ref.Tensors {
		if inOrder && i < len(m.Tensors) && m.Tensors[i].Name != rt.Name {
			t.Errorf("tensor %d is %s, llama.cpp's is %s", i, m.Tensors[i].Name, rt.Name)
		}
		gt, ok := m.Tensor(rt.Name)
		if !ok {
			t.Errorf("tensor %s missing", rt.Name)
			continue
		}
		if gt.Type != rt.Type || !slices.Equal(gt.Shape, rt.Shape) {
			t.Errorf("%s: %s %v, llama.cpp's %s %v", rt.Name, gt.Type, gt.Shape, rt.Type, rt.Shape)
		}
	}
}

// TestFamilyValues: the values are drawn as the planner says: norms near
// 1, the DeltaNet decay rates all negative, conv taps, dt biases and
// matrices centred on 0 with their spreads, readable back from Q8_0.
func TestFamilyValues(t *testing.T) {
	c := sharedShapes["qwen35moe"]
	c.Seed = 3
	m := writeAndOpen(t, withMix(t, c, "Q8_0"))
	read := func(name string) []float32 {
		tt, ok := m.Tensor(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		vals := make([]float32, tt.Elements())
		if err := quant.Dequantize(tt.Type, tt.Data, vals); err != nil {
			t.Fatal(err)
		}
		return vals
	}
	for _, tc := range []struct {
		name      string
		mean, std float64
	}{
		{"blk.4.nextn.enorm.weight", 1, 0.1},
		{"blk.0.ssm_norm.weight", 1, 0.1},
		{"blk.1.ssm_conv1d.weight", 0, 0.5},
		{"blk.2.ssm_dt.bias", 0, 1},
		{"blk.0.attn_qkv.weight", 0, 1 / math.Sqrt(128)},
		{"blk.3.ffn_down_exps.weight", 0, 1 / math.Sqrt(32)},
		{"blk.4.nextn.eh_proj.weight", 0, 1 / math.Sqrt(256)},
	} {
		vals := read(tc.name)
		var s, ss float64
		for _, v := range vals {
			s += float64(v)
			ss += float64(v) * float64(v)
		}
		mean := s / float64(len(vals))
		std := math.Sqrt(ss/float64(len(vals)) - mean*mean)
		if math.Abs(mean-tc.mean) > 4*tc.std/math.Sqrt(float64(len(vals)))+1e-3 || math.Abs(std/tc.std-1) > 0.5 {
			t.Errorf("%s: mean %.4f std %.4f, want about %g and %g", tc.name, mean, std, tc.mean, tc.std)
		}
	}
	for l := 0; l < 3; l++ {
		for _, a := range read(fmt.Sprintf("blk.%d.ssm_a", l)) {
			if !(a < 0) || a < -100 {
				t.Fatalf("blk.%d.ssm_a holds %g: a decay rate is -exp(A_log), negative", l, a)
			}
		}
	}
}

// TestFamilyVariants: shapes beyond the shared ones lay out as llama.cpp
// would write them: DeepSeek-V2-Lite's direct attn_q and softmax router
// (no exp_probs_b), every glm-dsa layer full without the types key,
// GLM-4.5-Air without QK norm, several NextN blocks, a qwen35 whose
// DeltaNet layers come from full_attention_interval and one whose pattern
// is written out.
func TestFamilyVariants(t *testing.T) {
	lite := sharedShapes["deepseek2"]
	lite.QLoraRank, lite.ExpertGating, lite.ExpertGroups, lite.ExpertGroupsUsed, lite.RopeScale = 0, 1, 0, 0, 0
	m := writeAndOpen(t, withMix(t, lite, "F32"))
	for name, want := range map[string]bool{"blk.0.attn_q.weight": true, "blk.0.attn_q_a.weight": false,
		"blk.1.exp_probs_b.bias": false, "blk.2.ffn_gate_shexp.weight": true} {
		if _, ok := m.Tensor(name); ok != want {
			t.Errorf("V2-Lite shape: %s present %v, want %v", name, ok, want)
		}
	}
	for key, want := range map[string]bool{"deepseek2.attention.q_lora_rank": false, "deepseek2.expert_group_count": false,
		"deepseek2.rope.scaling.yarn_log_multiplier": false} {
		if _, ok := m.Get(key); ok != want {
			t.Errorf("V2-Lite shape: %s present %v, want %v", key, ok, want)
		}
	}
	if g, _ := m.Uint("deepseek2.expert_gating_func"); g != 1 {
		t.Errorf("expert_gating_func %d, want 1", g)
	}
	if n, _ := m.Bool("deepseek2.expert_weights_norm"); n {
		t.Errorf("softmax gating with normalised weights")
	}

	dsa := sharedShapes["glm-dsa"]
	dsa.IndexerFull = nil
	m = writeAndOpen(t, withMix(t, dsa, "F32"))
	if _, ok := m.Get("glm-dsa.attention.indexer.types"); ok {
		t.Errorf("attention.indexer.types written without IndexerFull")
	}
	for l := 0; l < 3; l++ {
		if _, ok := m.Tensor(fmt.Sprintf("blk.%d.indexer.attn_q_b.weight", l)); !ok {
			t.Errorf("layer %d has no indexer", l)
		}
	}

	air := sharedShapes["glm4moe"]
	air.NoQKNorm, air.NextN = true, 2
	m = writeAndOpen(t, withMix(t, air, "F32"))
	if _, ok := m.Tensor("blk.0.attn_q_norm.weight"); ok {
		t.Errorf("NoQKNorm: attn_q_norm written")
	}
	if _, ok := m.Tensor("blk.3.nextn.shared_head_head.weight"); !ok {
		t.Errorf("second NextN block missing")
	}
	if n, _ := m.Uint("glm4moe.block_count"); n != 4 {
		t.Errorf("block_count %d, want 2 layers + 2 NextN", n)
	}

	q := sharedShapes["qwen35"]
	q.Layers, q.NextN, q.FullAttnInterval = 6, 0, 3
	m = writeAndOpen(t, withMix(t, q, "F32"))
	for l := 0; l < 6; l++ {
		_, deltaNet := m.Tensor(fmt.Sprintf("blk.%d.ssm_a", l))
		if want := (l+1)%3 != 0; deltaNet != want {
			t.Errorf("interval 3: layer %d DeltaNet %v, want %v", l, deltaNet, want)
		}
	}
	if _, ok := m.Get("qwen35.nextn_predict_layers"); ok {
		t.Errorf("nextn_predict_layers written without NextN blocks")
	}
	q.Recurrent = []bool{false, true, true, false, true, false}
	q.RopeDim = 16
	m = writeAndOpen(t, withMix(t, q, "F32"))
	v, _ := m.Get("qwen35.attention.recurrent_layers")
	if v.Len() != 6 {
		t.Fatalf("recurrent_layers %v", v)
	}
	for l, want := range q.Recurrent {
		if b, _ := v.Index(l).Bool(); b != want {
			t.Errorf("recurrent_layers[%d] = %v, want %v", l, b, want)
		}
		if _, ok := m.Tensor(fmt.Sprintf("blk.%d.attn_qkv.weight", l)); ok != want {
			t.Errorf("layer %d: attn_qkv present %v, want %v", l, ok, want)
		}
	}
	if s, _ := m.Get("qwen35.rope.dimension_sections"); s.String() != "[3, 3, 2, 0]" {
		t.Errorf("rope sections for 16 rope dims: %v, want [3, 3, 2, 0]", s)
	}
}

func TestBadFamilyConfigs(t *testing.T) {
	ok := func(arch string) Config { c := sharedShapes[arch]; c.Type = quant.F32; return c }
	for _, tc := range []struct {
		edit func(*Config)
		arch string
		want string
	}{
		{func(c *Config) { c.KVLoraRank = 0 }, "deepseek2", "kv_lora_rank"},
		{func(c *Config) { c.KVHeads = 4 }, "deepseek2", "one latent row"},
		{func(c *Config) { c.NextN = 1 }, "deepseek2", "NextN"},
		{func(c *Config) { c.ExpertGroups = 3 }, "deepseek2", "groups must divide"},
		{func(c *Config) { c.QLoraRank = 0 }, "glm-dsa", "low-rank"},
		{func(c *Config) { c.IndexerFull = []bool{false, true, true} }, "glm-dsa", "the first true"},
		{func(c *Config) { c.IndexerTopK = 0 }, "glm-dsa", "top-0"},
		{func(c *Config) { c.IndexerHeads = 4 }, "deepseek2", "indexer fields"},
		{func(c *Config) { c.SSMValueHeads = 3 }, "qwen35", "DeltaNet"},
		{func(c *Config) { c.Recurrent = []bool{true} }, "qwen35", "entries for 4 layers"},
		{func(c *Config) { c.FF = 64 }, "qwen35moe", "no dense FFN"},
		{func(c *Config) { c.SSMState = 8 }, "glm4moe", "DeltaNet fields"},
		{func(c *Config) { c.RopeDim = 40 }, "glm4moe", "rope dims"},
		{func(c *Config) { c.ExpertGating = 3 }, "glm4moe", "gating 3"},
		{func(c *Config) { c.LeadingDense = 1 }, "qwen35moe", "DeepSeek routing"},
		{func(c *Config) { c.NoQKNorm = true }, "qwen35", "NoQKNorm"},
	} {
		c := ok(tc.arch)
		tc.edit(&c)
		if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.arch, err, tc.want)
		}
	}
	for _, arch := range []string{"deepseek2", "glm-dsa", "glm4moe", "qwen35", "qwen35moe"} {
		if _, err := Plan(ok(arch)); err != nil {
			t.Errorf("%s: %v", arch, err)
		}
	}
}

// TestFamiliesStreamMatchBuild: the families' files written piece by
// piece are byte for byte the ones gguf.Writer writes from the model
// built in memory (NextN blocks, the decay rates' own draw, a mix).
func TestFamiliesStreamMatchBuild(t *testing.T) {
	for _, arch := range []string{"deepseek2", "glm-dsa", "glm4moe", "qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			c := withMix(t, sharedShapes[arch], "MXFP4_MOE")
			c.Seed = 21
			w, err := Build(c)
			if err != nil {
				t.Fatal(err)
			}
			var want, got bytes.Buffer
			if _, err := w.WriteTo(&want); err != nil {
				t.Fatal(err)
			}
			f, err := Plan(c)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := f.WriteTo(&got); err != nil || n != f.Size() {
				t.Fatalf("wrote %d bytes of %d: %v", n, f.Size(), err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("streamed file (%d bytes) differs from gguf.Writer's (%d bytes)", got.Len(), want.Len())
			}
		})
	}
}

// TestFamilyPresets: the presets of the new families have their real
// models' head geometry and routing, the parameter counts their comments
// give, and lay out in their default mix (Q4_K_M, MLA's attn_k_b falling
// back to Q5_0), in MXFP4_MOE and in Q8_0.
func TestFamilyPresets(t *testing.T) {
	type shape struct {
		name  string
		dims  []int64
		typ   quant.Type // in Q4_K_M; 0: not checked
		layer int
	}
	for _, tc := range []struct {
		preset   string
		min, max float64 // parameters, billions
		tensors  []shape
	}{
		{"deepseek-v3-small", 1, 3, []shape{
			{"attn_q_a.weight", []int64{2048, 1536}, quant.Q4_K, 1},
			{"attn_q_b.weight", []int64{1536, 128 * 192}, quant.Q4_K, 1},
			{"attn_kv_a_mqa.weight", []int64{2048, 512 + 64}, quant.Q4_K, 1},
			{"attn_k_b.weight", []int64{128, 512, 128}, quant.Q5_0, 1},
			{"attn_v_b.weight", []int64{512, 128, 128}, quant.Q4_K, 1},
			{"attn_output.weight", []int64{128 * 128, 2048}, quant.Q4_K, 1},
			{"ffn_down.weight", []int64{5376, 2048}, quant.Q6_K, 0},
			{"exp_probs_b.bias", []int64{64}, quant.F32, 5},
			{"ffn_down_exps.weight", []int64{512, 2048, 64}, quant.Q6_K, 5},
			{"ffn_up_shexp.weight", []int64{2048, 512}, quant.Q4_K, 5},
		}},
		{"glm5-small", 1, 3, []shape{
			{"attn_q_b.weight", []int64{2048, 64 * 256}, quant.Q4_K, 2},
			{"attn_k_b.weight", []int64{192, 512, 64}, quant.Q5_0, 2},
			{"attn_v_b.weight", []int64{512, 256, 64}, quant.Q4_K, 2},
			{"attn_output.weight", []int64{64 * 256, 2048}, quant.Q4_K, 2},
			{"indexer.attn_q_b.weight", []int64{2048, 32 * 128}, quant.Q4_K, 3},
			{"indexer.attn_k.weight", []int64{2048, 128}, quant.Q4_K, 3},
			{"indexer.proj.weight", []int64{2048, 32}, quant.Q4_K, 5},
			{"ffn_gate_exps.weight", []int64{2048, 768, 64}, quant.Q4_K, 1},
		}},
		{"qwen3.6-27b-small", 1, 2, []shape{
			{"attn_qkv.weight", []int64{5120, 2*16*128 + 48*128}, quant.Q4_K, 0},
			{"attn_gate.weight", []int64{5120, 48 * 128}, quant.Q4_K, 1},
			{"ssm_conv1d.weight", []int64{4, 2*16*128 + 48*128}, quant.F32, 2},
			{"ssm_out.weight", []int64{48 * 128, 5120}, quant.Q4_K, 2},
			{"attn_q.weight", []int64{5120, 2 * 24 * 256}, quant.Q4_K, 3},
			{"attn_k.weight", []int64{5120, 4 * 256}, quant.Q4_K, 3},
			{"ffn_down.weight", []int64{17408, 5120}, quant.Q6_K, 3},
		}},
		{"qwen3.6-35b-a3b-small", 1, 3, []shape{
			{"attn_qkv.weight", []int64{2048, 2*16*128 + 32*128}, quant.Q4_K, 0},
			{"ssm_beta.weight", []int64{2048, 32}, quant.Q4_K, 1},
			{"attn_q.weight", []int64{2048, 2 * 16 * 256}, quant.Q4_K, 3},
			{"attn_v.weight", []int64{2048, 2 * 256}, quant.Q6_K, 3},
			{"ffn_gate_inp_shexp.weight", []int64{2048}, quant.F32, 3},
			{"ffn_down_exps.weight", []int64{512, 2048, 64}, quant.Q6_K, 2},
		}},
	} {
		c := Presets[tc.preset]
		if mix := DefaultMix(c); mix != "Q4_K_M" {
			t.Errorf("%s: default mix %s", tc.preset, mix)
		}
		f, err := Plan(withMix(t, c, "Q4_K_M"))
		if err != nil {
			t.Fatalf("%s: %v", tc.preset, err)
		}
		var params int64
		byName := map[string]tensorSpec{}
		for _, ts := range f.tensors {
			params += ts.values
			byName[ts.name] = ts
		}
		if b := float64(params) / 1e9; b < tc.min || b > tc.max {
			t.Errorf("%s: %.2fB parameters, want %g-%gB", tc.preset, b, tc.min, tc.max)
		}
		for _, s := range tc.tensors {
			name := fmt.Sprintf("blk.%d.%s", s.layer, s.name)
			ts, ok := byName[name]
			if !ok {
				t.Errorf("%s: no %s", tc.preset, name)
				continue
			}
			if !slices.Equal(ts.shape, s.dims) || s.typ != 0 && ts.typ != s.typ {
				t.Errorf("%s: %s %s %v, want %s %v", tc.preset, name, ts.typ, ts.shape, s.typ, s.dims)
			}
		}
		t.Logf("%s: %.2fB parameters, %d tensors, %.2f GB as Q4_K_M", tc.preset, float64(params)/1e9, len(f.tensors), float64(f.Size())/1e9)
		for _, mix := range []string{"MXFP4_MOE", "Q8_0"} {
			if _, err := Plan(withMix(t, c, mix)); err != nil {
				t.Errorf("%s as %s: %v", tc.preset, mix, err)
			}
		}
	}
}
