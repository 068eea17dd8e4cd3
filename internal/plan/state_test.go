package plan

import (
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

// TestRecurrentStatePlan: for a qwen35 model the plan counts the
// recurrent-state slots (10 per sequence: live states and snapshots) in
// the KV cache, and the one-node figures are what the cache braid run and
// serve allocate holds (its bytes, its slots, their bytes); on a layer
// split the stage without recurrent layers holds no state but the same
// slot count, and the table prints the state per slot, per sequence and
// in all.
func TestRecurrentStatePlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.gguf")
	cfg := modelgen.Config{Arch: "qwen35", Layers: 4, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, HeadDim: 16, RopeDim: 8, Vocab: 300,
		Type: quant.Q8_0, SSMState: 16, SSMKeyHeads: 2, SSMValueHeads: 4, SSMConv: 4, FullAttnInterval: 4}
	if err := modelgen.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const ctx, par = 512, 3
	p, err := Make(f, Request{Ranks: ranks(0), Mode: Mode{1, 1}, Ctx: ctx, Parallel: par})
	if err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: ctx * par, Ctx: ctx}) // as braid run and serve size it
	if err != nil {
		t.Fatal(err)
	}
	r, cc := p.Ranks[0], cache.Config()
	// Three DeltaNet layers of (conv 3 x (2*2*16 + 4*16)) + 4 heads x 16 x 16.
	perSlot := int64(4 * 3 * (3*(64+64) + 4*16*16))
	if r.Slots != par*model.StateSlotsPerSeq || cc.Slots != r.Slots || r.SlotBytes != perSlot || r.State != cc.StateBytes() || r.KV != cache.Bytes() {
		t.Errorf("plan: %d slots of %d bytes, state %d, KV %d; the cache: %d slots, state %d, KV %d; want %d slots of %d bytes",
			r.Slots, r.SlotBytes, r.State, r.KV, cc.Slots, cc.StateBytes(), cache.Bytes(), par*model.StateSlotsPerSeq, perSlot)
	}
	lp, err := Make(f, Request{Ranks: ranks(0, 0), Mode: Mode{1, 2}, Weights: []float64{3, 1}, Ctx: ctx, Parallel: par})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := lp.Ranks[0], lp.Ranks[1]; a.Slots != r.Slots || b.Slots != r.Slots || a.State != r.State || b.State != 0 {
		t.Errorf("layer split 3:1: stage 0 %d slots, %d bytes of state; stage 1 (attention only) %d slots, %d bytes; want %d slots each, all the state on stage 0",
			a.Slots, a.State, b.Slots, b.State, r.Slots)
	}
	table := p.Table()
	for _, want := range []string{"recurrent state (in the kv cache): 30 slots, 10 per sequence", "rank 0: " + Bytes(perSlot) + " per slot, " + Bytes(10*perSlot) + " per sequence"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}
