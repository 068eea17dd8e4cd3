package model

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/modelgen"
)

// metaOnly writes the metadata of modelgen variant name (no tensors:
// ReadConfig reads none), each key passed through edit (false drops it;
// extra keys are added after), and returns it opened.
func metaOnly(t testing.TB, name string, edit func(key string, v gguf.Value) (gguf.Value, bool), extra map[string]gguf.Value) *gguf.Model {
	t.Helper()
	cfg, err := modelgen.Variant(name, "F32")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modelgen.Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.gguf")
	if err := f.WriteFile(src, nil); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := gguf.NewWriter()
	for _, kv := range m.KVs() {
		if v, ok := edit(kv.Key, kv.Value); ok {
			w.Set(kv.Key, v)
		}
	}
	for k, v := range extra {
		w.Set(k, v)
	}
	out := filepath.Join(dir, "meta.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	mm, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mm.Close() })
	return mm
}

// set replaces key's value (or adds it); drop removes keys.
func set(kv map[string]gguf.Value, drop ...string) func(string, gguf.Value) (gguf.Value, bool) {
	return func(k string, v gguf.Value) (gguf.Value, bool) {
		if nv, ok := kv[k]; ok {
			delete(kv, k)
			return nv, true
		}
		return v, !slices.Contains(drop, k)
	}
}

// TestHybridConfigKeys: the keys llama.cpp's qwen35, qwen35moe and glm-dsa
// loaders honour, read as they read them (qwen35Config, glmdsaConfig),
// and the combinations they refuse, refused by name.
func TestHybridConfigKeys(t *testing.T) {
	const q, qm, g = "qwen35.", "qwen35moe.", "glm-dsa."
	for _, tc := range []struct {
		name, variant string
		kv            map[string]gguf.Value
		drop          []string
		err           string // "" = must load
		check         func(t *testing.T, c *Config)
	}{
		{name: "as written", variant: "qwen35moe-hv", check: func(t *testing.T, c *Config) {
			if !slices.Equal(c.Recurrent[:c.Layers], []bool{true, false, false, true}) || c.SharedFF != 96 || c.ExpertFF != 64 ||
				!slices.Equal(c.Rope.Still, []int{1, 4}) || c.Gating != GateSoftmax || !c.NormTopKProb || c.ExpertWeightsScale != 1 {
				t.Fatalf("config %+v", c)
			}
		}},
		{name: "recurrent_layers of the trunk only", variant: "qwen35moe-hv",
			kv:  map[string]gguf.Value{qm + "attention.recurrent_layers": gguf.BoolArray([]bool{true, false, false, true})},
			err: "has 4 entries: want one per block, 5"},
		{name: "recurrent_layers one boolean", variant: "qwen35-hv",
			kv: map[string]gguf.Value{q + "attention.recurrent_layers": gguf.Bool(true)},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Recurrent, []bool{true, true, true, true}) {
					t.Fatalf("recurrent %v", c.Recurrent)
				}
			}},
		{name: "recurrent_layers not booleans", variant: "qwen35-hv",
			kv:  map[string]gguf.Value{q + "attention.recurrent_layers": gguf.Int32Array([]int32{1, 0, 0, 1})},
			err: "not a boolean"},
		{name: "no array, no interval: every 4th", variant: "qwen35-hv", drop: []string{q + "attention.recurrent_layers"},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Recurrent, []bool{true, true, true, false}) {
					t.Fatalf("recurrent %v", c.Recurrent)
				}
			}},
		{name: "no array: the interval", variant: "qwen35moe-hv", drop: []string{qm + "attention.recurrent_layers"},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Recurrent, []bool{true, false, true, false, false}) {
					t.Fatalf("recurrent %v", c.Recurrent)
				}
			}},
		{name: "interval 0", variant: "qwen35moe-hv", drop: []string{qm + "attention.recurrent_layers"},
			kv: map[string]gguf.Value{qm + "full_attention_interval": gguf.Uint32(0)}, err: "full_attention_interval 0"},
		{name: "no sections", variant: "qwen35-hv", drop: []string{q + "rope.dimension_sections"}, err: q + "rope.dimension_sections"},
		{name: "three sections", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "rope.dimension_sections": gguf.Int32Array([]int32{4, 2, 2})},
			err: "has 3 entries: want 4"},
		{name: "empty sections", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "rope.dimension_sections": gguf.Int32Array([]int32{0, 0, 0, 5})},
			err: "first three sections are empty"},
		{name: "sections past the head", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "rope.dimension_sections": gguf.Int32Array([]int32{30, 30, 10, 0})},
			err: "more than the head size 64"},
		{name: "negative section", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "rope.dimension_sections": gguf.Int32Array([]int32{4, -1, 2, 0})},
			err: "negative"},
		{name: "sections of the whole rope", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "rope.dimension_sections": gguf.Int32Array([]int32{3, 3, 2, 0})},
			check: func(t *testing.T, c *Config) {
				if len(c.Rope.Still) != 0 {
					t.Fatalf("still pairs %v", c.Rope.Still)
				}
			}},
		{name: "sections repeating", variant: "qwen35-hv",
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.Rope.Still, []int{0, 3, 4, 7}) {
					t.Fatalf("still pairs %v, want [0 3 4 7]", c.Rope.Still)
				}
			}},
		{name: "one section value", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "rope.dimension_sections": gguf.Int32(1)},
			check: func(t *testing.T, c *Config) {
				// [1 1 1 1]: sector 3 of every 4 is the fourth section.
				if !slices.Equal(c.Rope.Still, []int{3, 7}) {
					t.Fatalf("still pairs %v, want [3 7]", c.Rope.Still)
				}
			}},
		{name: "no rms epsilon", variant: "qwen35-hv", drop: []string{q + "attention.layer_norm_rms_epsilon"}, err: q + "attention.layer_norm_rms_epsilon"},
		{name: "inner size off", variant: "qwen35-hv", kv: map[string]gguf.Value{q + "ssm.inner_size": gguf.Uint32(48)}, err: "ssm.inner_size 48"},
		{name: "shared width from feed_forward_length", variant: "qwen35moe-hv", drop: []string{qm + "expert_shared_feed_forward_length"},
			kv: map[string]gguf.Value{qm + "feed_forward_length": gguf.Uint32(80)},
			check: func(t *testing.T, c *Config) {
				if c.SharedFF != 80 {
					t.Fatalf("shared width %d, want 80", c.SharedFF)
				}
			}},
		{name: "no shared width", variant: "qwen35moe-hv", drop: []string{qm + "expert_shared_feed_forward_length"}, err: "no shared expert width"},
		{name: "expert width from feed_forward_length", variant: "qwen35moe-hv", drop: []string{qm + "expert_feed_forward_length"},
			kv: map[string]gguf.Value{qm + "feed_forward_length": gguf.Uint32(128)},
			check: func(t *testing.T, c *Config) {
				if c.ExpertFF != 64 || c.SharedFF != 96 {
					t.Fatalf("expert width %d, shared %d: want 128/2 and 96", c.ExpertFF, c.SharedFF)
				}
			}},
		{name: "per-block expert counts: block 0's", variant: "qwen35moe-hv",
			kv: map[string]gguf.Value{qm + "expert_feed_forward_length": gguf.Uint32Array([]uint32{64, 32, 32, 32, 32}),
				qm + "expert_used_count": gguf.Uint32Array([]uint32{2, 1, 1, 1, 1})},
			check: func(t *testing.T, c *Config) {
				if c.ExpertFF != 64 || c.ExpertsUsed != 2 {
					t.Fatalf("expert width %d, used %d: want block 0's 64 and 2", c.ExpertFF, c.ExpertsUsed)
				}
			}},
		{name: "per-block expert width of the trunk only", variant: "qwen35moe-hv",
			kv:  map[string]gguf.Value{qm + "expert_feed_forward_length": gguf.Uint32Array([]uint32{64, 64, 64, 64})},
			err: "has 4 entries: want one value or one per block, 5"},
		{name: "no expert_used_count", variant: "qwen35moe-hv", drop: []string{qm + "expert_used_count"}, err: qm + "expert_used_count"},
		{name: "indexer LayerNorm epsilon not read", variant: "glm-dsa-allfull-top3",
			kv: map[string]gguf.Value{g + "attention.layer_norm_epsilon": gguf.Float32(1e-5)},
			check: func(t *testing.T, c *Config) {
				if c.MLA.Indexer.Eps != 0 {
					t.Fatalf("indexer eps %g, want 0", c.MLA.Indexer.Eps)
				}
			}},
		{name: "DeepSeek routing keys not read", variant: "qwen35moe-hv",
			kv: map[string]gguf.Value{qm + "expert_gating_func": gguf.Uint32(2), qm + "expert_weights_scale": gguf.Float32(2.5),
				qm + "expert_weights_norm": gguf.Bool(false), qm + "expert_shared_count": gguf.Uint32(3)},
			check: func(t *testing.T, c *Config) {
				if c.Gating != GateSoftmax || !c.NormTopKProb || c.ExpertWeightsScale != 1 || c.SharedFF != 96 {
					t.Fatalf("config %+v", c)
				}
			}},
		{name: "indexer key length 32", variant: "glm-dsa-allfull-top3", kv: map[string]gguf.Value{g + "attention.indexer.key_length": gguf.Uint32(32)},
			err: "power of two of at least 64"},
		{name: "indexer key length 192", variant: "glm-dsa-allfull-top3", kv: map[string]gguf.Value{g + "attention.indexer.key_length": gguf.Uint32(192)},
			err: "power of two of at least 64"},
		{name: "no indexer types, GLM-5 context", variant: "glm-dsa-allfull-top3",
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.MLA.Indexer.Full, []bool{true, true, true}) {
					t.Fatalf("full %v", c.MLA.Indexer.Full)
				}
			}},
		{name: "no indexer types, GLM-5.2 context", variant: "glm-dsa-allfull-top3",
			kv: map[string]gguf.Value{g + "context_length": gguf.Uint32(1 << 20), g + "block_count": gguf.Uint32(8)},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.MLA.Indexer.Full, []bool{true, true, true, false, false, false, true, false}) {
					t.Fatalf("full %v", c.MLA.Indexer.Full)
				}
			}},
		{name: "indexer types one boolean", variant: "glm-dsa-allfull-top3",
			kv: map[string]gguf.Value{g + "attention.indexer.types": gguf.Bool(true), g + "context_length": gguf.Uint32(1 << 20)},
			check: func(t *testing.T, c *Config) {
				if !slices.Equal(c.MLA.Indexer.Full, []bool{true, true, true}) {
					t.Fatalf("full %v", c.MLA.Indexer.Full)
				}
			}},
		{name: "indexer types all shared", variant: "glm-dsa-allfull-top3", kv: map[string]gguf.Value{g + "attention.indexer.types": gguf.Bool(false)},
			err: "layer 0 is shared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := map[string]gguf.Value{}
			for k, v := range tc.kv {
				kv[k] = v
			}
			edit := set(kv, tc.drop...)
			m := metaOnly(t, tc.variant, edit, kv)
			c, err := ReadConfig(m)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && err == nil:
				t.Fatalf("loaded, want an error with %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q, want %q in it", err, tc.err)
			case tc.check != nil:
				tc.check(t, c)
			}
		})
	}
}

// FuzzHybridConfig: whatever the layer-kind, rope-section and indexer keys
// hold, ReadConfig either refuses or returns a config whose per-layer kinds
// cover every block and whose still rope pairs lie inside the rotated ones;
// it never panics.
func FuzzHybridConfig(f *testing.F) {
	f.Add(uint8(0), []byte{1, 0, 0, 1, 0}, []byte{1, 0, 2, 0}, uint8(2), uint16(64), []byte{1, 1, 1})
	f.Add(uint8(1), []byte{1}, []byte{0, 0, 0, 0}, uint8(0), uint16(32), []byte{})
	f.Add(uint8(2), []byte{}, []byte{255, 3, 3}, uint8(4), uint16(128), []byte{0, 1})
	bases := map[uint8]*gguf.Model{}
	for i, v := range []string{"qwen35moe-hv", "qwen35-hv", "glm-dsa-allfull-top3"} {
		bases[uint8(i)] = metaOnly(f, v, func(_ string, v gguf.Value) (gguf.Value, bool) { return v, true }, nil)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, which uint8, rec, sec []byte, interval uint8, idim uint16, types []byte) {
		base := bases[which%3]
		arch := base.Arch() + "."
		w := gguf.NewWriter()
		for _, kv := range base.KVs() {
			w.Set(kv.Key, kv.Value)
		}
		bools := func(b []byte) []bool {
			out := make([]bool, len(b))
			for i, x := range b {
				out[i] = x&1 == 1
			}
			return out
		}
		if len(rec) == 1 {
			w.Set(arch+"attention.recurrent_layers", gguf.Bool(rec[0]&1 == 1))
		} else {
			w.Set(arch+"attention.recurrent_layers", gguf.BoolArray(bools(rec)))
		}
		s := make([]int32, len(sec))
		for i, x := range sec {
			s[i] = int32(int8(x))
		}
		w.Set(arch+"rope.dimension_sections", gguf.Int32Array(s))
		w.Set(arch+"full_attention_interval", gguf.Uint32(uint32(interval)))
		w.Set(arch+"attention.indexer.key_length", gguf.Uint32(uint32(idim)))
		w.Set(arch+"attention.indexer.types", gguf.BoolArray(bools(types)))
		path := filepath.Join(dir, "fuzz.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		m, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		c, err := ReadConfig(m)
		if err != nil {
			return
		}
		if c.SSM != nil && len(c.Recurrent) != c.Layers+c.NextN {
			t.Fatalf("%d layer kinds for %d+%d blocks", len(c.Recurrent), c.Layers, c.NextN)
		}
		for _, p := range c.Rope.Still {
			if p < 0 || p >= c.Rope.Dims/2 {
				t.Fatalf("still pair %d of %d", p, c.Rope.Dims/2)
			}
		}
		if x := c.MLA; x != nil && x.Indexer != nil && (len(x.Indexer.Full) != c.Layers || x.Indexer.Dim&(x.Indexer.Dim-1) != 0) {
			t.Fatalf("indexer %+v for %d layers", x.Indexer, c.Layers)
		}
	})
}
