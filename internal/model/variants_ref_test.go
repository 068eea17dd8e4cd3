package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"braid/internal/kernels"
	"braid/internal/modelgen"
)

// variantRef is the .json beside a variant's reference logits
// (scripts/ref-variants.sh).
type variantRef struct {
	Tokens  []int32   `json:"tokens"`
	NVocab  int       `json:"n_vocab"`
	Rows    []int     `json:"rows"`
	Greedy  []int32   `json:"greedy"`
	Margins []float32 `json:"greedy_margins"`
	KVType  string    `json:"kv_cache_type"`
}

// variantTypes are the file types every variant has reference logits for.
var variantTypes = []string{"F32", "Q8_0"}

// TestVariantLogits: every modelgen variant (the Qwen3.5 and GLM-5 shapes
// the shared models lack), written by modelgen as braid genmodel --variant
// writes it, gives llama.cpp's logits (internal/model/testdata/variants,
// made by scripts/ref-variants.sh): the 32-token sequence in one batch,
// positions 3, 7, ..., 31 compared, then llama.cpp's 8 greedy tokens fed one
// at a time, each step's logits compared and, for the float files, its
// argmax. The tolerances are TestGoldenLogits' (1e-3 of the spread for F32,
// 2e-2 for Q8_0), with no allowance for swapped near-ties in the DSA top-k.
func TestVariantLogits(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, v := range modelgen.VariantNames() {
		for _, typ := range variantTypes {
			name := v + "-" + typ
			t.Run(name, func(t *testing.T) {
				base := filepath.Join("testdata", "variants", name)
				data, err := os.ReadFile(base + ".json")
				if err != nil {
					t.Fatalf("%v (scripts/ref-variants.sh writes the reference files)", err)
				}
				var ref variantRef
				if err := json.Unmarshal(data, &ref); err != nil {
					t.Fatalf("%s.json: %v", base, err)
				}
				cfg, err := modelgen.Variant(v, typ)
				if err != nil {
					t.Fatal(err)
				}
				m, err := New(genModel(t, cfg), pool, Options{})
				if err != nil {
					t.Fatal(err)
				}
				V, tol := m.Cfg.Vocab, tolerance(name)
				if V != ref.NVocab || ref.KVType != "f16" {
					t.Fatalf("vocabulary %d, reference %d with a %s cache", V, ref.NVocab, ref.KVType)
				}
				want := readF32(t, base+".logits.f32")
				wantG := readF32(t, base+".greedy_logits.f32")
				if len(want) != len(ref.Rows)*V || len(wantG) != len(ref.Greedy)*V || len(ref.Greedy) == 0 {
					t.Fatalf("%d and %d reference logits for %d rows and %d greedy steps of %d", len(want), len(wantG), len(ref.Rows), len(ref.Greedy), V)
				}
				cache, err := m.NewCache(CacheSize{Positions: 64})
				if err != nil {
					t.Fatal(err)
				}
				var b Batch
				for i, tok := range ref.Tokens {
					b.Add(tok, int32(i), 0, true)
				}
				got := make([]float32, len(ref.Tokens)*V)
				if err := m.Forward(cache, &b, got); err != nil {
					t.Fatal(err)
				}
				for r, p := range ref.Rows {
					compareRow(t, fmt.Sprintf("prefill position %d", p), got[p*V:(p+1)*V], want[r*V:(r+1)*V], tol)
				}
				row := make([]float32, V)
				copy(row, got[(len(ref.Tokens)-1)*V:])
				pos := int32(len(ref.Tokens))
				for step, forced := range ref.Greedy {
					compareRow(t, fmt.Sprintf("greedy step %d", step), row, wantG[step*V:(step+1)*V], tol)
					if id := argmax(row); id != forced && floatModel(name) {
						t.Errorf("greedy step %d: chose %d, llama.cpp %d (margin %.3g)", step, id, forced, ref.Margins[step])
					}
					b.Reset()
					b.Add(forced, pos, 0, true)
					pos++
					if err := m.Forward(cache, &b, row); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}
