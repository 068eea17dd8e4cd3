package spec

import (
	"context"
	"testing"

	"braid/internal/engine"
	"braid/internal/grammar"
	"braid/internal/model"
	"braid/internal/sample"
	"braid/internal/tokenizer"
)

// TestSchedulerSpecWithSchemas: structured outputs stay valid with
// speculation on. JSON-schema-constrained requests share the batches with
// free requests that draft (a draft model, sampled drafts verified by
// rejection sampling); every constrained reply that finishes validates
// against its schema and every reply cut by max_tokens is a valid prefix,
// while the free ones draft and keep drafts. (Constrained sequences do not
// draft: their tokens are sampled under the grammar's mask.)
func TestSchedulerSpecWithSchemas(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-F32.gguf")
	lm := load(t, path, model.Options{}, 6*256)
	draft := load(t, sharedModel(t, "stories260K/stories260K-Q4_0.gguf"), model.Options{}, 6*256)
	dm, err := NewDraftModel(draft.m, draft.cache, lm.m.Cfg.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(lm.f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.CompileSchema([]byte(`{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
		"n": {"type": "integer", "minimum": 0, "maximum": 999}, "ok": {"type": "boolean"}}, "required": ["name", "n", "ok"],
		"additionalProperties": false}`))
	if err != nil {
		t.Fatal(err)
	}
	gd := grammar.NewGuide(g, grammar.NewVocab(grammar.TokenPieces(tok, nil), tok.EOGs()))
	sp := engine.Spec{Drafter: dm, NMin: 3, NMax: 3, Exact: exactOn(lm.pool)}
	s, err := engine.NewScheduler(engine.NewLocal(lm.m, lm.cache), engine.SchedulerConfig{Parallel: 6, Context: 256, Spec: &sp, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	p := sample.DefaultParams()
	type req struct {
		st          *engine.Stream
		constrained bool
	}
	var reqs []req
	for i := range 12 {
		p.Seed = uint64(i)
		job := engine.Job{Prompt: []int32{1, int32(403 + i)}, MaxTokens: 48, Sampler: sampler(t, p, lm.m.Cfg.Vocab), TopLogprobs: -1}
		c := i%2 == 0
		if c {
			job.Constraint = gd.NewConstraint()
		}
		st, err := s.Submit(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req{st, c})
	}
	finished := 0
	for i, r := range reqs {
		toks, res := collect(t, r.st)
		if res.Err != nil {
			t.Errorf("request %d: %v", i, res.Err)
			continue
		}
		if !r.constrained {
			continue
		}
		ids := make([]int32, len(toks))
		for k, x := range toks {
			ids[k] = x.ID
		}
		text := tok.Decode(ids)
		ok, complete := g.Check(text)
		if !ok || res.Finish == engine.FinishStop && !complete {
			t.Errorf("constrained request %d (%v): %q does not follow the schema", i, res.Finish, text)
		}
		if res.Finish == engine.FinishStop {
			finished++
		}
	}
	if finished == 0 {
		t.Error("no constrained request finished its object")
	}
	st := s.SpecStats()
	t.Logf("%s", st)
	if st.DraftedTotal() == 0 || st.AcceptedTotal() == 0 {
		t.Errorf("the free requests did not draft and keep drafts beside the constrained ones: %s", st)
	}
}
