package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/sample"
)

// TestPipelineScheduler runs the scheduler on layer splits of 2 and 3
// stages over real worker processes: the steps of groups of sequences
// overlap (as many in flight as stages, from the scheduler's counter), and
// every request gets exactly the greedy tokens of the schedule that runs
// one step at a time over all of them as micro-batches. The prompts are of
// equal length, so that each group's step holds the tokens of one of those
// micro-batches and every rank runs the same products in the same order.
func TestPipelineScheduler(t *testing.T) {
	// A trained model: its greedy tokens vary, where a random one repeats.
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	env := workerEnv(t)
	ws := []*proc{startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)}
	for _, tc := range []struct{ workers, requests int }{{1, 4}, {2, 3}} {
		t.Run(fmt.Sprintf("stages%d", 1+tc.workers), func(t *testing.T) {
			cfg := Config{Model: path, Split: "layer", Threads: 1, MaxBatch: 64, Ctx: 64, Parallel: 4, KVF32: true,
				Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, Logger: quietLogger(t), HashCacheDir: t.TempDir()}
			for _, w := range ws[:tc.workers] {
				cfg.Nodes = append(cfg.Nodes, Node{Addr: w.addr})
			}
			c, err := Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Stages() != 1+tc.workers {
				t.Fatalf("%d stages over %d ranks of a layer split", c.Stages(), 1+tc.workers)
			}
			run := func(noOverlap bool) ([][]int32, engine.Counters) {
				s, err := engine.NewScheduler(c, engine.SchedulerConfig{Parallel: 4, Context: 64, NoOverlap: noOverlap})
				if err != nil {
					t.Fatal(err)
				}
				var streams []*engine.Stream
				for i := range tc.requests {
					p := sample.DefaultParams()
					p.Temperature = 0
					smp, err := sample.New(p, c.Vocab())
					if err != nil {
						t.Fatal(err)
					}
					prompt := []int32{1, int32(100 + 7*i), int32(200 + 3*i), int32(300 + i)}
					st, err := s.Submit(context.Background(), engine.Job{Prompt: prompt, MaxTokens: 16, Sampler: smp, TopLogprobs: -1})
					if err != nil {
						t.Fatal(err)
					}
					streams = append(streams, st)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { s.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()
				out := make([][]int32, len(streams))
				for i, st := range streams {
					var toks []engine.Token
					for {
						var end bool
						if toks, end, err = st.Recv(context.Background(), toks); err != nil {
							t.Fatal(err)
						}
						if end {
							break
						}
					}
					if r := st.Result(); r.Finish != engine.FinishLength {
						t.Fatalf("request %d: %v (%v) after %d tokens", i, r.Finish, r.Err, len(toks))
					}
					for _, tk := range toks {
						out[i] = append(out[i], tk.ID)
					}
				}
				return out, s.Counters()
			}
			ref, rc := run(true)
			got, gc := run(false)
			for i := range ref {
				if fmt.Sprint(got[i]) != fmt.Sprint(ref[i]) {
					t.Errorf("request %d: overlapped steps gave %v, one step at a time %v", i, got[i], ref[i])
				}
			}
			if gc.MaxInFlight != c.Stages() || gc.OverlappedSteps == 0 {
				t.Errorf("overlapped: at most %d steps in flight over %d stages, %d launched beside another", gc.MaxInFlight, c.Stages(), gc.OverlappedSteps)
			}
			if rc.MaxInFlight != 0 {
				t.Errorf("one step at a time: %d in flight", rc.MaxInFlight)
			}
			if c.InFlight() != 0 {
				t.Errorf("%d steps still in flight after the run", c.InFlight())
			}
		})
	}
}
