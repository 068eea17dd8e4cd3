package engine

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/sample"
	"braid/internal/sharedtest"
)

const stories = "../../../shared/testdata/models/stories260K/stories260K-F32"

// TestGreedyFromBOS generates 200 tokens greedily from BOS with the real
// stories260K model; llama.cpp and llama2.c both produce these 200 ids.
func TestGreedyFromBOS(t *testing.T) {
	data, err := os.ReadFile(stories + ".bos_greedy200.json")
	if err != nil {
		sharedtest.Missing(t, "shared test data absent (%v): skipping the llama2.c greedy comparison", err)
	}
	var g struct {
		Greedy []int32 `json:"greedy_200"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(stories + ".gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := kernels.NewPool(2)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: 256})
	if err != nil {
		t.Fatal(err)
	}
	p := sample.DefaultParams()
	p.Temperature = 0
	smp, err := sample.New(p, m.Cfg.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	st, err := NewGenerator(NewLocal(m, cache)).Generate(context.Background(), Request{
		Prompt: []int32{1}, MaxTokens: len(g.Greedy), Sampler: smp,
		Emit: func(id int32) error { got = append(got, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.GenTokens != len(g.Greedy) || len(got) != len(g.Greedy) {
		t.Fatalf("generated %d tokens (stats %d), want %d", len(got), st.GenTokens, len(g.Greedy))
	}
	for i := range got {
		if got[i] != g.Greedy[i] {
			t.Fatalf("token %d: got %d, want %d (first %d agree)", i, got[i], g.Greedy[i], i)
		}
	}
	if cache.Len(0) != 0 {
		t.Errorf("sequence left in the cache with %d positions", cache.Len(0))
	}
}

// TestGenerateStopsAndLimits checks the stop function, the token limit and
// the context limit on a generated model.
func TestGenerateLimits(t *testing.T) {
	f, err := gguf.Open(stories + ".gguf")
	if err != nil {
		sharedtest.Missing(t, "shared test data absent (%v)", err)
	}
	defer f.Close()
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: 64})
	if err != nil {
		t.Fatal(err)
	}
	p := sample.DefaultParams()
	p.Temperature = 0
	tests := []struct {
		name    string
		req     Request
		wantGen int
		wantErr bool
	}{
		{"max tokens", Request{Prompt: []int32{1}, MaxTokens: 5}, 5, false},
		{"context", Request{Prompt: []int32{1, 2, 3}, MaxTokens: 50, Context: 10}, 7, false},
		{"stop at once", Request{Prompt: []int32{1}, MaxTokens: 50, Stop: func(int32) bool { return true }}, 0, false},
		{"prompt fills context", Request{Prompt: []int32{1, 2, 3}, MaxTokens: 5, Context: 3}, 0, true},
		{"empty prompt", Request{MaxTokens: 5}, 0, true},
		{"bad token", Request{Prompt: []int32{1, 100000}, MaxTokens: 5}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			smp, _ := sample.New(p, m.Cfg.Vocab)
			tc.req.Sampler = smp
			st, err := NewGenerator(NewLocal(m, cache)).Generate(context.Background(), tc.req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if st.GenTokens != tc.wantGen {
				t.Fatalf("generated %d, want %d", st.GenTokens, tc.wantGen)
			}
		})
	}
}
