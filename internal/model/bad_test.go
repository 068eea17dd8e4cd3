package model

import (
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/modelgen"
	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// rewrite copies a generated model through edit, which may drop or change
// metadata and tensors, and returns the new file's path.
func rewrite(t *testing.T, edit func(key string, v gguf.Value) (gguf.Value, bool), editT func(ti *gguf.Tensor) (shape []int64, keep bool)) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.gguf")
	if err := modelgen.WriteFile(src, modelgen.Config{Layers: 1, Embd: 64, FF: 96, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.F32}); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w := gguf.NewWriter()
	for _, kv := range m.KVs() {
		if v, ok := edit(kv.Key, kv.Value); ok {
			w.Set(kv.Key, v)
		}
	}
	for _, ti := range m.Tensors {
		shape, keep := editT(ti)
		if !keep {
			continue
		}
		if err := w.AddTensor(ti.Name, ti.Type, shape, ti.Data); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "bad.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBadModels(t *testing.T) {
	keepKV := func(k string, v gguf.Value) (gguf.Value, bool) { return v, true }
	keepT := func(ti *gguf.Tensor) ([]int64, bool) { return ti.Shape, true }
	tests := []struct {
		name  string
		kv    func(string, gguf.Value) (gguf.Value, bool)
		ten   func(*gguf.Tensor) ([]int64, bool)
		wants []string
	}{
		{"unknown architecture", func(k string, v gguf.Value) (gguf.Value, bool) {
			if k == "general.architecture" {
				return gguf.String("gpt9"), true
			}
			return v, true
		}, keepT, []string{`"gpt9"`, "not supported"}},
		{"missing metadata", func(k string, v gguf.Value) (gguf.Value, bool) { return v, k != "llama.block_count" }, keepT, []string{"llama.block_count"}},
		{"missing tensor", keepKV, func(ti *gguf.Tensor) ([]int64, bool) { return ti.Shape, ti.Name != "blk.0.ffn_up.weight" }, []string{"blk.0.ffn_up.weight", "missing"}},
		{"wrong shape", keepKV, func(ti *gguf.Tensor) ([]int64, bool) {
			if ti.Name == "blk.0.attn_k.weight" {
				return []int64{ti.Shape[1], ti.Shape[0]}, true
			}
			return ti.Shape, true
		}, []string{"blk.0.attn_k.weight", "shape"}},
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := rewrite(t, tc.kv, tc.ten)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = New(f, pool, Options{})
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestBadBatch(t *testing.T) {
	path := rewrite(t, func(k string, v gguf.Value) (gguf.Value, bool) { return v, true }, func(ti *gguf.Tensor) ([]int64, bool) { return ti.Shape, true })
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := New(f, pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache, _ := m.NewCache(CacheSize{Positions: 64})
	logits := make([]float32, 4*m.Cfg.Vocab)
	tests := []struct {
		name string
		b    Batch
		want string
	}{
		{"token out of vocabulary", Batch{Tokens: []int32{300}, Pos: []int32{0}, Seq: []kvcache.SeqID{0}, Output: []bool{true}}, "outside the vocabulary"},
		{"negative token", Batch{Tokens: []int32{-1}, Pos: []int32{0}, Seq: []kvcache.SeqID{0}, Output: []bool{true}}, "outside the vocabulary"},
		{"gap in positions", Batch{Tokens: []int32{5, 6}, Pos: []int32{0, 2}, Seq: []kvcache.SeqID{0, 0}, Output: []bool{true, true}}, "want 1"},
		{"mismatched lengths", Batch{Tokens: []int32{5, 6}, Pos: []int32{0}, Seq: []kvcache.SeqID{0, 0}, Output: []bool{true, true}}, "positions"},
		{"cache exhausted", Batch{Tokens: make([]int32, 100), Pos: seqPos(100), Seq: make([]kvcache.SeqID, 100), Output: make([]bool, 100)}, "out of blocks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Forward(cache, &tc.b, logits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			if cache.Len(0) != 0 {
				t.Fatalf("a failed batch committed %d positions", cache.Len(0))
			}
		})
	}
}

func seqPos(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i)
	}
	return p
}

// TestBadGptOss refuses gpt-oss variants and damage at load, naming what is
// wrong: a window larger than the context, a gating function it does not
// implement, a window pattern that does not fit the layers, an expert
// tensor whose expert count does not match the metadata, missing sinks.
func TestBadGptOss(t *testing.T) {
	src := filepath.Join(sharedModels, "gpt-oss", "tiny-gpt-oss-F32.gguf")
	base, err := gguf.Open(src)
	if err != nil {
		sharedtest.Missing(t, "no shared gpt-oss model: %v", err)
	}
	defer base.Close()
	keepT := func(ti *gguf.Tensor) ([]int64, bool) { return ti.Shape, true }
	setKV := func(key string, val gguf.Value) func(string, gguf.Value) (gguf.Value, bool) {
		return func(k string, v gguf.Value) (gguf.Value, bool) {
			if k == key {
				return val, true
			}
			return v, true
		}
	}
	addKV := func(key string, val gguf.Value) func(*gguf.Writer) { return func(w *gguf.Writer) { w.Set(key, val) } }
	tests := []struct {
		name  string
		kv    func(string, gguf.Value) (gguf.Value, bool)
		add   func(*gguf.Writer)
		ten   func(*gguf.Tensor) ([]int64, bool)
		wants []string
	}{
		{"window beyond context", setKV("gpt-oss.attention.sliding_window", gguf.Uint32(200000)), nil, keepT, []string{"sliding window 200000", "131072"}},
		{"sigmoid gating", nil, addKV("gpt-oss.expert_gating_func", gguf.Uint32(2)), keepT, []string{"expert_gating_func", "not supported"}},
		{"window pattern", nil, addKV("gpt-oss.attention.sliding_window_pattern", gguf.Uint32(9)), keepT, []string{"sliding_window_pattern", "9"}},
		{"expert count", setKV("gpt-oss.expert_count", gguf.Uint32(8)), nil, keepT, []string{"blk.0.ffn_gate_inp.weight", "shape"}},
		{"missing sinks", nil, nil, func(ti *gguf.Tensor) ([]int64, bool) { return ti.Shape, ti.Name != "blk.1.attn_sinks.weight" }, []string{"blk.1.attn_sinks.weight", "missing"}},
		{"used beyond experts", setKV("gpt-oss.expert_used_count", gguf.Uint32(5)), nil, keepT, []string{"5 experts used", "4 experts"}},
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := gguf.NewWriter()
			for _, kv := range base.KVs() {
				if tc.kv == nil {
					w.Set(kv.Key, kv.Value)
				} else if v, ok := tc.kv(kv.Key, kv.Value); ok {
					w.Set(kv.Key, v)
				}
			}
			if tc.add != nil {
				tc.add(w)
			}
			for _, ti := range base.Tensors {
				if shape, keep := tc.ten(ti); keep {
					if err := w.AddTensor(ti.Name, ti.Type, shape, ti.Data); err != nil {
						t.Fatal(err)
					}
				}
			}
			path := filepath.Join(t.TempDir(), "bad.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = New(f, pool, Options{})
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, want := range tc.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}
