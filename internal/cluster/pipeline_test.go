package cluster

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/sample"
)

// TestPipelineScheduler runs the scheduler on layer splits of 2 and 3
// stages over real worker processes: the steps of groups of sequences
// overlap (as many in flight as Depth says, from the scheduler's counter),
// and every request gets exactly the greedy tokens of the schedule that
// runs one step at a time over all of them as micro-batches. Six requests
// with prompts of equal length: with 2 or 3 steps in flight (3 stages on 2
// cores keep 2), each group's step holds the tokens of one of Forward's
// micro-batches, so every rank runs the same products in the same order.
func TestPipelineScheduler(t *testing.T) {
	// A trained model: its greedy tokens vary, where a random one repeats.
	path := sharedModel(t, "stories260K/stories260K-Q8_0.gguf")
	env := workerEnv(t)
	ws := []*proc{startWorker(t, "127.0.0.1:0", env), startWorker(t, "127.0.0.1:0", env)}
	for _, tc := range []struct{ workers, requests int }{{1, 6}, {2, 6}} {
		t.Run(fmt.Sprintf("stages%d", 1+tc.workers), func(t *testing.T) {
			cfg := Config{Model: path, Split: "layer", Threads: 1, MaxBatch: 64, Ctx: 64, Parallel: 6, KVF32: true,
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
			if c.Depth() < 2 {
				t.Skipf("%d cores: the stages run one at a time (depth %d), nothing overlaps", runtime.NumCPU(), c.Depth())
			}
			run := func(noOverlap bool) ([][]int32, engine.Counters) {
				s, err := engine.NewScheduler(c, engine.SchedulerConfig{Parallel: 6, Context: 64, NoOverlap: noOverlap})
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
			if gc.MaxInFlight != c.Depth() || gc.OverlappedSteps == 0 {
				t.Errorf("overlapped: at most %d steps in flight (depth %d), %d launched beside another", gc.MaxInFlight, c.Depth(), gc.OverlappedSteps)
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

// TestPipelineDepth: a stage on this node's cores counts as far as they
// go; stages elsewhere count in full.
func TestPipelineDepth(t *testing.T) {
	one := func(int) int { return 1 }
	two := func(int) int { return 2 }
	all := func(int) bool { return true }
	only0 := func(r int) bool { return r == 0 }
	for _, tc := range []struct {
		pp, tp  int
		local   func(int) bool
		threads func(int) int
		cores   int
		want    int
	}{
		{3, 1, all, one, 2, 2},   // three 1-thread stages on 2 cores: two at once
		{3, 1, all, one, 16, 3},  // on 16 cores: all three
		{2, 1, all, one, 2, 2},   // two 1-thread stages on 2 cores
		{2, 1, all, two, 2, 1},   // two 2-thread stages on 2 cores: one at a time
		{3, 1, only0, one, 2, 3}, // the workers elsewhere
		{2, 2, all, one, 2, 1},   // 2x2 ranks of 1 thread on 2 cores: a stage takes both
		{2, 2, all, one, 4, 2},   // on 4 cores: both stages
		{4, 1, only0, two, 1, 4}, // rank 0 alone here, even on one core
		{1, 2, all, one, 2, 1},   // tensor parallel only
		{3, 1, all, one, 1, 1},   // one core for three local stages
	} {
		if got := pipelineDepth(tc.pp, tc.tp, tc.local, tc.threads, tc.cores); got != tc.want {
			t.Errorf("pp %d tp %d on %d cores: depth %d, want %d", tc.pp, tc.tp, tc.cores, got, tc.want)
		}
	}
}
