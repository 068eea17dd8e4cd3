package cluster

import (
	"testing"

	"braid/internal/engine"
	"braid/internal/model"
)

// TestRankStepTimes: every rank's step time holds its waits. A pipeline
// stage waits for the previous one inside its forward pass, so its step is
// at least its pipeline time; the local rank's step time was read before
// the forward pass ran (zero for every one-micro-batch step: decode).
func TestRankStepTimes(t *testing.T) {
	path := sharedModel(t, faultModel)
	env := workerEnv(t)
	w1 := startWorker(t, "127.0.0.1:0", env)
	w2 := startWorker(t, "127.0.0.1:0", env)
	c := openCluster(t, path, "layer", nil, w1, w2)
	logits := make([]float32, c.Vocab())
	var b model.Batch
	b.Add(1, 0, 0, true)
	if err := c.Forward(&b, engine.FullLogits, logits); err != nil {
		t.Fatal(err)
	}
	for pos := int32(1); pos < 20; pos++ {
		b.Reset()
		b.Add(100+pos, pos, 0, true)
		if err := c.Forward(&b, engine.FullLogits, logits); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range c.RankStats() {
		if r.Steps != 20 || r.Step <= 0 {
			t.Errorf("rank %d: %d steps, %v in them", r.Rank, r.Steps, r.Step)
		}
		if r.Step < r.Pipeline+r.AllReduce {
			t.Errorf("rank %d: step time %v is less than its waits (pipeline %v, all-reduce %v)", r.Rank, r.Step, r.Pipeline, r.AllReduce)
		}
	}
}
