package modelgen

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestVariantsStable: every reference variant is written bit for bit as it
// was when scripts/ref-variants.sh took llama.cpp's logits from it (those
// logits, in internal/model/testdata/variants, hold only for these bytes),
// pinned by SHA-256; and written twice, it is the same.
func TestVariantsStable(t *testing.T) {
	want := map[string]string{
		"glm-dsa-allfull-top3-F32":  "4d698a548dae38d621906c65eb30b175e64e980cd86215ad1a4fb37cc4a8e8c0",
		"glm-dsa-allfull-top3-Q8_0": "2ac49e381d3c21cd658528dbbd0237eac13bda50a5a4fe9f6efb88df13546250",
		"qwen35-hv-F32":             "60b3a70c6436d25d69edeaea2eb6ffe61af377b121aea0833c30b4b34c8a81f2",
		"qwen35-hv-Q8_0":            "f9023a89f1ad4cff59413b94a94141f541bc1fb42c3e899e45abb591e206c472",
		"qwen35moe-hv-F32":          "0adbe5f71448f3089d0e6f3b54bedd80b65802547929109491c8ec21a8dea6d1",
		"qwen35moe-hv-Q8_0":         "36f7da866ffbc649891e778e5cae6b8eb1ad64fc4e719a5a636ebb276b1706e3",
	}
	seen := 0
	for _, v := range VariantNames() {
		for _, typ := range []string{"F32", "Q8_0"} {
			name := v + "-" + typ
			sum := func() string {
				c, err := Variant(v, typ)
				if err != nil {
					t.Fatal(err)
				}
				f, err := Plan(c)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				h := sha256.New()
				if _, err := f.WriteTo(h); err != nil {
					t.Fatal(err)
				}
				return hex.EncodeToString(h.Sum(nil))
			}
			got := sum()
			if again := sum(); again != got {
				t.Errorf("%s: two writes differ (%s, %s)", name, got, again)
			}
			w, ok := want[name]
			if !ok {
				t.Errorf("%s: no pinned SHA-256 (got %s): pin it with its reference logits", name, got)
				continue
			}
			seen++
			if got != w {
				t.Errorf("%s: SHA-256 %s, want %s (new bytes need new reference logits: scripts/ref-variants.sh)", name, got, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d pinned variants written", seen, len(want))
	}
}

// TestVariantErrors: an unknown variant or file type is refused by name.
func TestVariantErrors(t *testing.T) {
	if _, err := Variant("no-such", "F32"); err == nil {
		t.Error("unknown variant accepted")
	}
	if _, err := Variant("qwen35-hv", "Q9_9"); err == nil {
		t.Error("unknown file type accepted")
	}
}
