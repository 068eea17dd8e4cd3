package model

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

// prepackModel writes a small llama model with a tied head.
func prepackModel(t *testing.T) *gguf.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tied.gguf")
	cfg := modelgen.Config{Arch: "llama", Layers: 2, Embd: 128, FF: 256, Heads: 4, KVHeads: 2, Vocab: 320, Context: 64,
		Type: quant.Q8_0, Seed: 3, TiedOutput: true}
	if err := modelgen.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestPackPlan: the linear layers are listed with where their bytes lie;
// the tied head's embedding, also read by token, is not.
func TestPackPlan(t *testing.T) {
	f := prepackModel(t)
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	sh := FullShard(c)
	packs, err := PackPlan(f, c, &sh, kernels.X8, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range packs {
		names = append(names, p.Tensor)
		rb, _ := p.Matrix.Type.RowBytes(int64(p.Matrix.Cols))
		if p.Len*p.Count != rb*int64(p.Matrix.Rows) {
			t.Errorf("%s: %d runs of %d bytes for a %dx%d matrix", p.Tensor, p.Count, p.Len, p.Matrix.Rows, p.Matrix.Cols)
		}
	}
	if slices.Contains(names, "token_embd.weight") {
		t.Errorf("the tied embedding is in the plan: %v", names)
	}
	for _, want := range []string{"blk.0.attn_q.weight", "blk.1.attn_output.weight", "blk.1.ffn_down.weight"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not in the plan: %v", want, names)
		}
	}
	// Only the types asked for.
	none, err := PackPlan(f, c, &sh, kernels.X8, func(quant.Type) bool { return false })
	if err != nil || len(none) != 0 {
		t.Errorf("PackPlan with no type accepted: %d matrices, %v", len(none), err)
	}
}

// withKeys writes a copy of f with kvs set.
func withKeys(t *testing.T, f *gguf.Model, kvs map[string]gguf.Value) *gguf.Model {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KVs() {
		w.Set(kv.Key, kv.Value)
	}
	for k, v := range kvs {
		w.Set(k, v)
	}
	for _, tn := range f.Tensors {
		if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, tn.Data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "keys.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestShardLayoutRefused: a shard file of another layout version, one
// whose list is missing or names what cannot be repacked, and one whose
// types this node's kernels take plain are refused naming what is wrong.
func TestShardLayoutRefused(t *testing.T) {
	f := prepackModel(t)
	x8 := gguf.String(kernels.X8.Versioned())
	for _, tc := range []struct {
		name string
		kvs  map[string]gguf.Value
		want string
	}{
		{"old version", map[string]gguf.Value{KeyShardLayout: gguf.String("x8.v0"), KeyShardPacked: gguf.StringArray([]string{"blk.0.attn_q.weight"})}, `"x8.v0"`},
		{"no list", map[string]gguf.Value{KeyShardLayout: x8}, "no " + KeyShardPacked},
		{"unknown tensor", map[string]gguf.Value{KeyShardLayout: x8, KeyShardPacked: gguf.StringArray([]string{"blk.9.attn_q.weight"})}, "blk.9.attn_q.weight"},
		{"norm", map[string]gguf.Value{KeyShardLayout: x8, KeyShardPacked: gguf.StringArray([]string{"blk.0.attn_norm.weight"})}, "blk.0.attn_norm.weight (F32)"},
	} {
		g := withKeys(t, f, tc.kvs)
		if _, _, err := ShardLayout(g); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
		c, err := ReadConfig(g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := WeightBytes(g, c, ptr(FullShard(c))); err == nil {
			t.Errorf("%s: the binder took the file", tc.name)
		}
	}
	good := withKeys(t, f, map[string]gguf.Value{KeyShardLayout: x8, KeyShardPacked: gguf.StringArray([]string{"blk.0.attn_q.weight"})})
	kernels.SetRepack(false)
	_, _, err := ShardLayout(good)
	kernels.SetRepack(true)
	if err == nil || !strings.Contains(err.Error(), "Q8_0 in the plain layout") || !strings.Contains(err.Error(), "x8.v1") {
		t.Errorf("kernels taking plain: error %v, want one naming both layouts", err)
	}
	if kernels.LayoutFor(quant.Q8_0) == kernels.X8 {
		l, packed, err := ShardLayout(good)
		if err != nil || l != kernels.X8 || !packed["blk.0.attn_q.weight"] || len(packed) != 1 {
			t.Errorf("kernels taking x8: %v %v %v", l, packed, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
