// Package engine drives a model over time on a Backend (one node, or a
// cluster): the Scheduler batches many sequences into each step
// (continuous batching, chunked prefill, prefix reuse, the output each step
// needs), the Generator runs one sequence (`braid run`), and the speculative
// generator verifies a drafter's tokens several at a time.
package engine

import (
	"context"
	"fmt"
	"time"

	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/sample"
)

// Stats are the timings of one generation.
type Stats struct {
	PromptTokens int
	GenTokens    int
	Prefill      time.Duration // prompt evaluation, up to the first logits
	Decode       time.Duration // every later step
	TTFT         time.Duration // from the call to the first token sampled
}

// PrefillTPS is prompt tokens per second.
func (s Stats) PrefillTPS() float64 { return rate(s.PromptTokens, s.Prefill) }

// DecodeTPS is generated tokens per second after the first.
func (s Stats) DecodeTPS() float64 { return rate(s.GenTokens-1, s.Decode) }

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generator runs one sequence at a time on a Backend: one node or a
// cluster.
type Generator struct {
	b      Backend
	batch  model.Batch
	logits []float32
	spec   *specState // speculative decoding (NewSpecGenerator), or nil
}

// NewGenerator makes a generator; it owns no goroutines.
func NewGenerator(b Backend) *Generator {
	return &Generator{b: b, logits: make([]float32, b.Vocab())}
}

// Request is one generation.
type Request struct {
	Seq       kvcache.SeqID
	Prompt    []int32
	MaxTokens int // most tokens to generate
	Context   int // most positions the sequence may reach; 0 = no limit but the cache's
	Sampler   *sample.Sampler
	// Stop reports whether a sampled token ends the generation (end of
	// generation tokens); the token is not emitted.
	Stop func(id int32) bool
	// Emit receives every generated token; an error ends the generation.
	Emit func(id int32) error
}

// Generate prefills the prompt on a fresh sequence, then samples up to
// MaxTokens tokens. The sequence is dropped from the cache afterwards.
func (g *Generator) Generate(ctx context.Context, r Request) (Stats, error) {
	if g.spec != nil {
		return g.generateSpec(ctx, r)
	}
	st := Stats{PromptTokens: len(r.Prompt)}
	if len(r.Prompt) == 0 {
		return st, fmt.Errorf("engine: empty prompt")
	}
	if r.Context > 0 && len(r.Prompt) >= r.Context {
		return st, fmt.Errorf("engine: prompt of %d tokens leaves no room in a context of %d", len(r.Prompt), r.Context)
	}
	g.b.Drop(r.Seq)
	defer g.b.Drop(r.Seq)
	// On a cluster each step asks for the ranks' best candidates where the
	// sampler can use them exactly, for full rows otherwise.
	need := func(history int) Output { return NeedFor(r.Sampler.Params(), history, false) }
	start := time.Now()
	g.batch.Reset()
	for i, id := range r.Prompt {
		g.batch.Add(id, int32(i), r.Seq, i == len(r.Prompt)-1)
	}
	if err := g.b.Forward(&g.batch, need(len(r.Prompt)), g.logits); err != nil {
		return st, err
	}
	st.Prefill = time.Since(start)
	for _, id := range r.Prompt {
		r.Sampler.Accept(id)
	}
	pos := int32(len(r.Prompt))
	decodeStart := time.Now()
	for st.GenTokens < r.MaxTokens {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		id := r.Sampler.Sample(g.logits)
		r.Sampler.Accept(id)
		if st.GenTokens == 0 {
			st.TTFT = time.Since(start)
			decodeStart = time.Now()
		}
		if r.Stop != nil && r.Stop(id) {
			break
		}
		st.GenTokens++
		if r.Emit != nil {
			if err := r.Emit(id); err != nil {
				return st, err
			}
		}
		if st.GenTokens == r.MaxTokens || (r.Context > 0 && int(pos)+1 >= r.Context) {
			break
		}
		g.batch.Reset()
		g.batch.Add(id, pos, r.Seq, true)
		pos++
		if err := g.b.Forward(&g.batch, need(int(pos)), g.logits); err != nil {
			return st, err
		}
	}
	st.Decode = time.Since(decodeStart)
	return st, nil
}
