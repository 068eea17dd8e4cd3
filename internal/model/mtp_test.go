package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/sharedtest"
)

// TestMTPHead runs the MTP (NextN) head of every shared model that has
// reference files: the trunk's final-normed hidden states against
// llama.cpp's (F32 files), then the head's logits for every position, each
// from its token and the trunk state of the position before, against
// llama.cpp's MTP logits, with the tolerances of the trunk comparison.
func TestMTPHead(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedModels, "*", "*.mtp.json"))
	if len(files) == 0 {
		sharedtest.Missing(t, "no MTP reference files under %s", sharedModels)
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, ref := range files {
		base := strings.TrimSuffix(ref, ".mtp.json")
		name := filepath.Base(base)
		kvf32 := strings.HasSuffix(base, ".kvf32")
		path := strings.TrimSuffix(base, ".kvf32") + ".gguf"
		t.Run(name, func(t *testing.T) {
			var g struct {
				Tokens []int32 `json:"tokens"`
				Argmax []int32 `json:"mtp_argmax"`
			}
			data, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &g); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := New(f, pool, Options{MTP: true})
			if err != nil {
				t.Fatal(err)
			}
			tol := tolerance(name)
			if strings.Contains(name, "qwen35") && !floatModel(name) {
				// The recurrence amplifies activation-rounding differences
				// (the shared README: an exact float64 emulation with tiny
				// noise already differs by up to 5e-2 on these files).
				tol = 5e-2
			}
			n, E, V := len(g.Tokens), m.Cfg.Embd, m.Cfg.Vocab
			cache, err := m.NewCache(CacheSize{Positions: 64, F32: kvf32})
			if err != nil {
				t.Fatal(err)
			}
			var b Batch
			for i, tok := range g.Tokens {
				b.Add(tok, int32(i), 0, true)
			}
			logits, hidden := make([]float32, n*V), make([]float32, n*E)
			if err := m.ForwardHidden(cache, &b, logits, hidden); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(base + ".mtp_h.f32"); err == nil {
				want := readF32(t, base+".mtp_h.f32")
				for p := 0; p < n; p++ {
					compareRow(t, fmt.Sprintf("trunk hidden state at %d", p), hidden[p*E:(p+1)*E], want[p*E:(p+1)*E], tol)
				}
			}
			// Row k: token k with the trunk state of position k-1.
			hprev := make([]float32, n*E)
			copy(hprev[E:], hidden[:(n-1)*E])
			mcache, err := m.NewMTPCache(CacheSize{Positions: 64, F32: kvf32})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n*V)
			if err := m.ForwardMTP(mcache, &b, hprev, got); err != nil {
				t.Fatal(err)
			}
			want := readF32(t, base+".mtp_logits.f32")
			for p := 0; p < n; p++ {
				compareRow(t, fmt.Sprintf("MTP row %d", p), got[p*V:(p+1)*V], want[p*V:(p+1)*V], tol)
			}
			// The head alone, as a split's coordinator holds it: the same
			// logits bit for bit, and the trunk's output head.
			hm, err := NewMTPHead(f, pool, 64)
			if err != nil {
				t.Fatal(err)
			}
			hc, err := hm.NewMTPCache(CacheSize{Positions: 64, F32: kvf32})
			if err != nil {
				t.Fatal(err)
			}
			alone := make([]float32, n*V)
			if err := hm.ForwardMTP(hc, &b, hprev, alone); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(alone, got) {
				t.Error("NewMTPHead's logits differ from the whole model's head")
			}
			last := hidden[(n-1)*E:]
			if err := m.Head(last, got[:V]); err != nil {
				t.Fatal(err)
			}
			if err := hm.Head(last, alone[:V]); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(alone[:V], got[:V]) {
				t.Error("NewMTPHead's output head differs from the whole model's")
			}
			if err := hm.Forward(hc, &b, alone); err == nil || !strings.Contains(err.Error(), "MTP head alone") {
				t.Errorf("the head alone ran a trunk step: %v", err)
			}
		})
	}
}
