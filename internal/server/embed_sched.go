package server

import (
	"context"
	"fmt"

	"braid/internal/engine"
	"braid/internal/model"
)

// SchedEmbedder computes embeddings with the scheduler's own backend,
// between its steps (engine.Scheduler.Exclusive): the way for a model
// split over a cluster, whose backend only the scheduler's loop may use.
// The final-normed hidden states come from the backend's ForwardHidden (on
// a split, from the last stage with its result), mean-pooled and scaled to
// unit length as LocalEmbedder does. Each input is one exclusive turn, so
// running generations wait at most one input's evaluation.
type SchedEmbedder struct {
	sched     *engine.Scheduler
	hb        engine.HiddenBackend
	dim       int
	vocab     int
	maxTokens int
	chunk     int
}

// NewSchedEmbedder makes an embedder on sched's backend b, with inputs of
// up to maxTokens tokens evaluated chunk at a time. It fails when b cannot
// return hidden states.
func NewSchedEmbedder(sched *engine.Scheduler, b engine.Backend, dim, maxTokens, chunk int) (*SchedEmbedder, error) {
	hb, ok := b.(engine.HiddenBackend)
	if !ok {
		return nil, fmt.Errorf("%w: this backend does not return hidden states", ErrNoEmbeddings)
	}
	if dim <= 0 || maxTokens <= 0 {
		return nil, fmt.Errorf("embeddings: width %d, longest input %d: want both positive", dim, maxTokens)
	}
	// Every position is an output row: a chunk costs chunk full logits
	// rows on the coordinator (kept small, as the vocabulary may be large).
	return &SchedEmbedder{sched: sched, hb: hb, dim: dim, vocab: b.Vocab(), maxTokens: maxTokens, chunk: min(max(chunk, 1), 32)}, nil
}

// Dim is the embedding width.
func (e *SchedEmbedder) Dim() int { return e.dim }

// MaxTokens is the longest input.
func (e *SchedEmbedder) MaxTokens() int { return e.maxTokens }

// Embed runs each input as one sequence of its own, every position an
// output, in one exclusive turn of the scheduler.
func (e *SchedEmbedder) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	out := make([][]float32, len(inputs))
	logits := make([]float32, e.chunk*e.vocab)
	hidden := make([]float32, e.chunk*e.dim)
	var b model.Batch
	for i, ids := range inputs {
		if len(ids) > e.maxTokens {
			return nil, fmt.Errorf("input %d has %d tokens; at most %d fit", i, len(ids), e.maxTokens)
		}
		sum := make([]float64, e.dim)
		err := e.sched.Exclusive(ctx, func(x *engine.Exclusive) error {
			if err := x.Reserve(len(ids)); err != nil {
				return fmt.Errorf("embeddings: room for %d positions: %w", len(ids), err)
			}
			for lo := 0; lo < len(ids); lo += e.chunk {
				if err := ctx.Err(); err != nil {
					return err
				}
				hi := min(lo+e.chunk, len(ids))
				b.Reset()
				for p := lo; p < hi; p++ {
					b.Add(ids[p], int32(p), x.Seq, true)
				}
				// One candidate per row: the logits are not read, and a
				// vocabulary-parallel head then sends 8 bytes a row.
				if err := e.hb.ForwardHidden(&b, engine.Output{TopK: 1}, logits, hidden); err != nil {
					return err
				}
				for r := 0; r < hi-lo; r++ {
					for k, v := range hidden[r*e.dim : (r+1)*e.dim] {
						sum[k] += float64(v)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out[i] = normalize(sum, len(ids))
	}
	return out, nil
}
