package cluster

import (
	"testing"

	"braid/internal/engine"
	"braid/internal/model"
)

// TestProfile: a profiled decode over real workers counts what it must:
// every step on every rank, two all-reduces per layer of a tensor split with
// their bytes, hidden states between the stages of a layer split, one Step
// frame and one result per worker per step; and profiling leaves the
// tokens as they were.
func TestProfile(t *testing.T) {
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	env := workerEnv(t)
	w1, w2 := startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)
	for _, split := range []string{"tensor", "layer"} {
		t.Run(split, func(t *testing.T) {
			c := openCluster(t, path, split, nil, w1, w2)
			cfg := c.Config()
			logits := make([]float32, c.Vocab())
			var b model.Batch
			const steps = 6
			run := func() []int32 {
				c.Drop(0)
				var toks []int32
				tok := int32(1)
				for i := 0; i < steps; i++ {
					b.Reset()
					b.Add(tok, int32(i), 0, true)
					if err := c.Forward(&b, engine.Output{TopK: 1}, logits); err != nil {
						t.Fatal(err)
					}
					tok = argmax(logits)
					toks = append(toks, tok)
				}
				return toks
			}
			want := run()
			if err := c.StartProfile(); err != nil {
				t.Fatal(err)
			}
			got := run()
			p, err := c.StopProfile()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("profiled run made %d tokens, %d without", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("profiling changed the tokens: %v, without %v", got, want)
				}
			}
			if p.Steps != steps || len(p.Ranks) != 3 || len(p.Frames) != 2 {
				t.Fatalf("profile of %d steps, %d ranks, %d frame counters; want %d, 3, 2", p.Steps, len(p.Ranks), len(p.Frames), steps)
			}
			for _, f := range p.Frames {
				if f.Sent != 1 || f.Received != 1 {
					t.Errorf("rank %d: %.2f frames sent and %.2f received per step, want 1 and 1", f.Rank, f.Sent, f.Received)
				}
			}
			E := uint64(cfg.Embd)
			for i, r := range p.Ranks {
				if r.Rank != i || r.Steps != steps {
					t.Errorf("rank entry %d: rank %d with %d steps", i, r.Rank, r.Steps)
				}
				if r.Compute+r.AllReduce+r.Stage != r.Busy {
					t.Errorf("rank %d: compute %v + all-reduce %v + pipeline %v != busy %v", r.Rank, r.Compute, r.AllReduce, r.Stage, r.Busy)
				}
				switch split {
				case "tensor":
					L := uint64(cfg.Layers)
					if r.AllReduces != 2*L*steps || r.AllReduceBytes != 2*L*steps*4*E {
						t.Errorf("rank %d: %d all-reduces of %d bytes, want %d of %d", r.Rank, r.AllReduces, r.AllReduceBytes, 2*L*steps, 2*L*steps*4*E)
					}
					if len(r.LayerCompute) != cfg.Layers {
						t.Errorf("rank %d: %d layers timed, want %d", r.Rank, len(r.LayerCompute), cfg.Layers)
					}
					if r.BytesSent < r.AllReduceBytes*2 {
						t.Errorf("rank %d sent %d bytes, less than its partials to both peers (%d)", r.Rank, r.BytesSent, 2*r.AllReduceBytes)
					}
					// A sleep is a receive that waited past its spin: at
					// most one per partial received.
					if r.Sleeps > 2*r.AllReduces {
						t.Errorf("rank %d: %d sleeps in %d receives", r.Rank, r.Sleeps, 2*r.AllReduces)
					}
				case "layer":
					// The middle stage receives and sends, the ends one of the two.
					want := uint64(steps * 4 * E)
					if i == 1 {
						want *= 2
					}
					if r.AllReduces != 0 || r.StageBytes != want {
						t.Errorf("rank %d: %d all-reduces, %d bytes of hidden state; want 0 and %d", r.Rank, r.AllReduces, r.StageBytes, want)
					}
				}
			}
			if p.CommShare < 0 || p.CommShare > 1 {
				t.Errorf("communication share %v is not a fraction", p.CommShare)
			}
			if _, err := c.StopProfile(); err == nil {
				t.Error("a second StopProfile succeeded")
			}
		})
	}
}
