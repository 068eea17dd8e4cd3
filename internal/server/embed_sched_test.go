package server

import (
	"context"
	"sync"
	"testing"

	"braid/internal/engine"
	"braid/internal/model"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

// TestSchedEmbedder: embeddings computed between the scheduler's steps on
// its own backend (what a cluster serves) equal the one-token-at-a-time
// mean of the hidden states, while a generation runs beside them and ends
// as it would alone.
func TestSchedEmbedder(t *testing.T) {
	f, m := openModel(t)
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	const parallel, ctx = 2, 128
	cache, err := m.NewCache(model.CacheSize{Positions: parallel * ctx, Ctx: ctx})
	if err != nil {
		t.Fatal(err)
	}
	b := engine.NewLocal(m, cache)
	sched, err := engine.NewScheduler(b, engine.SchedulerConfig{Parallel: parallel, Context: ctx, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := sched.Start(sctx)
	t.Cleanup(func() { stop(); <-done })
	emb, err := NewSchedEmbedder(sched, b, m.Cfg.Embd, ctx-1, 7)
	if err != nil {
		t.Fatal(err)
	}
	p := sample.DefaultParams()
	p.Temperature = 0
	gen := func() []int32 {
		smp, err := sample.New(p, m.Cfg.Vocab)
		if err != nil {
			t.Fatal(err)
		}
		st, err := sched.Submit(context.Background(), engine.Job{Prompt: tok.Encode("Once upon a time", true, false), MaxTokens: 60, Sampler: smp, TopLogprobs: -1})
		if err != nil {
			t.Fatal(err)
		}
		var toks []engine.Token
		for {
			var fin bool
			if toks, fin, err = st.Recv(context.Background(), toks); err != nil {
				t.Fatal(err)
			}
			if fin {
				break
			}
		}
		ids := make([]int32, len(toks))
		for i, tk := range toks {
			ids[i] = tk.ID
		}
		return ids
	}
	alone := gen()
	texts := []string{"Once upon a time there was a little dog named Max.", "Hi", "The cat sat on the mat and looked at the big red ball, and then it ran away."}
	var inputs [][]int32
	for _, s := range texts {
		inputs = append(inputs, tok.Encode(s, true, false))
	}
	var wg sync.WaitGroup
	var beside []int32
	wg.Go(func() { beside = gen() })
	got, err := emb.Embed(context.Background(), inputs)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for i, ids := range inputs {
		if want := oracleEmbedding(t, m, ids); !closeVec(got[i], want, 2e-4) {
			t.Errorf("input %d (%q): differs from the one-token-at-a-time mean of the hidden states", i, texts[i])
		}
	}
	if len(beside) != len(alone) {
		t.Fatalf("the generation beside the embeddings gave %d tokens, alone %d", len(beside), len(alone))
	}
	for i := range alone {
		if beside[i] != alone[i] {
			t.Fatalf("token %d: %d beside the embeddings, %d alone", i, beside[i], alone[i])
		}
	}
	if _, err := emb.Embed(context.Background(), [][]int32{make([]int32, ctx)}); err == nil {
		t.Fatal("an input longer than the context: no error")
	}
}
