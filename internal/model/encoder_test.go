package model

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/kernels"
	"braid/internal/modelgen"
	"braid/internal/tokenizer"
)

type encoderRef struct {
	Pooling int `json:"pooling"`
	NEmbd   int `json:"n_embd"`
	Cases   []struct {
		IDs       []int32   `json:"ids"`
		Embedding []float32 `json:"embedding"`
	} `json:"cases"`
}

// TestEncoderReference: every encoder variant (bert and nomic-bert; mean,
// cls and last pooling), written as braid genmodel --variant writes it,
// tokenizes the texts of testdata/encoders/texts.txt to llama.cpp's ids and
// embeds them to llama.cpp's unit vectors (testdata/encoders, made by
// scripts/ref-encoders.sh), within 2e-5 per component (measured: up to
// 7.6e-6 in F32, where a GELU input near a half-precision rounding edge
// can take the neighbouring table entry; under 1e-7 in Q8_0, whose
// products both quantize the activations the same way).
func TestEncoderReference(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	raw, err := os.ReadFile(filepath.Join("testdata", "encoders", "texts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for _, v := range modelgen.EncoderVariantNames() {
		for _, typ := range []string{"F32", "Q8_0"} {
			name := v + "-" + typ
			t.Run(name, func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("testdata", "encoders", name+".json"))
				if err != nil {
					t.Fatalf("%v (scripts/ref-encoders.sh writes the reference files)", err)
				}
				var ref encoderRef
				if err := json.Unmarshal(data, &ref); err != nil {
					t.Fatalf("%s.json: %v", name, err)
				}
				if len(ref.Cases) != len(texts) {
					t.Fatalf("%d reference cases for %d texts", len(ref.Cases), len(texts))
				}
				cfg, err := modelgen.Variant(v, typ)
				if err != nil {
					t.Fatal(err)
				}
				f := genModel(t, cfg)
				enc, err := NewEncoder(f, pool)
				if err != nil {
					t.Fatal(err)
				}
				if int(enc.Cfg.Pooling) != ref.Pooling || enc.Cfg.Embd != ref.NEmbd {
					t.Fatalf("pooling %v, width %d; llama.cpp %d, %d", enc.Cfg.Pooling, enc.Cfg.Embd, ref.Pooling, ref.NEmbd)
				}
				tk, err := tokenizer.FromGGUF(f)
				if err != nil {
					t.Fatal(err)
				}
				const tol = 2e-5
				worst := 0.0
				for i, c := range ref.Cases {
					if ids := tk.Encode(texts[i], true, false); !slices.Equal(ids, c.IDs) {
						t.Errorf("text %d %q: ids %v, llama.cpp %v", i, texts[i], ids, c.IDs)
					}
					got, err := enc.Embed(c.IDs)
					if err != nil {
						t.Fatal(err)
					}
					for k := range got {
						worst = max(worst, math.Abs(float64(got[k]-c.Embedding[k])))
					}
				}
				if worst > tol {
					t.Errorf("largest difference from llama.cpp's embeddings %.3g, over %g", worst, tol)
				}
				t.Logf("largest difference %.3g (tolerance %g)", worst, tol)
			})
		}
	}
}

// TestEncoderRefusals: the decoder paths refuse an encoder by name
// (ErrEncoder), a split of one included, and so does an encoder without
// pooling; bad inputs fail with errors naming them.
func TestEncoderRefusals(t *testing.T) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	cfg, err := modelgen.Variant("bert-mean", "F32")
	if err != nil {
		t.Fatal(err)
	}
	f := genModel(t, cfg)
	if _, err := ReadConfig(f); !errors.Is(err, ErrEncoder) || !strings.Contains(err.Error(), "embeddings") {
		t.Errorf("ReadConfig: %v, want ErrEncoder naming embeddings", err)
	}
	for _, sh := range []*Shard{nil, {TPRank: 0, TPSize: 2}, {First: 0, Last: 1}} {
		if _, err := New(f, pool, Options{Shard: sh}); !errors.Is(err, ErrEncoder) {
			t.Errorf("New with shard %+v: %v, want ErrEncoder", sh, err)
		}
	}
	enc, err := NewEncoder(f, pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Embed(nil); err == nil {
		t.Error("empty input embedded")
	}
	if _, err := enc.Embed([]int32{2, 9999}); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Errorf("token 9999: %v, want an error naming it", err)
	}
	if _, err := enc.Embed(make([]int32, enc.Cfg.Context+1)); err == nil || !strings.Contains(err.Error(), "context_length") {
		t.Errorf("input past the context: %v, want an error naming context_length", err)
	}
	for _, tc := range []struct {
		pooling int
		want    string
	}{{0, "none"}, {4, "rank"}} {
		c := cfg
		c.Pooling = tc.pooling
		if _, err := NewEncoder(genModel(t, c), pool); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pooling %d: %v, want a refusal naming %s", tc.pooling, err, tc.want)
		}
	}
}
