package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

func ranges(sh []Shard, f func(*Shard) (int, int)) [][2]int {
	out := make([][2]int, len(sh))
	for i := range sh {
		a, b := f(&sh[i])
		out[i] = [2]int{a, b}
	}
	return out
}

func heads(s *Shard) (int, int) { return s.HeadLo, s.HeadHi }
func kvs(s *Shard) (int, int)   { return s.KVLo, s.KVHi }
func ffs(s *Shard) (int, int)   { return s.FFLo, s.FFHi }
func vocs(s *Shard) (int, int)  { return s.VocabLo, s.VocabHi }

func wantRanges(t *testing.T, what string, got, want [][2]int) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

var llama8B = Config{Arch: "llama", Layers: 32, Embd: 4096, FF: 14336, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256}

func TestTensorSplitByKVHeads(t *testing.T) {
	c := llama8B
	sh, err := TensorSplit(&c, Blocks{AttnOut: quant.Q4_K, Down: quant.Q6_K}, []float64{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	// 8 KV heads over 3 ranks: 3+3+2, query heads following their groups.
	wantRanges(t, "KV heads", ranges(sh, kvs), [][2]int{{0, 3}, {3, 6}, {6, 8}})
	wantRanges(t, "heads", ranges(sh, heads), [][2]int{{0, 12}, {12, 24}, {24, 32}})
	// 14336 = 56 blocks of 256: 19+19+18.
	wantRanges(t, "FFN", ranges(sh, ffs), [][2]int{{0, 4864}, {4864, 9728}, {9728, 14336}})
	wantRanges(t, "vocabulary", ranges(sh, vocs), [][2]int{{0, 42752}, {42752, 85504}, {85504, 128256}})
	// An even cut, 4778.67 columns, falls inside a block: said so.
	if want := "FFN columns cut at [0 4864 9728 14336], not [0 4779 9558 14336]: ffn_down is Q6_K, cut only at multiples of 256 columns"; len(sh[0].Notes) != 1 || sh[0].Notes[0] != want {
		t.Errorf("notes %q, want [%q]", sh[0].Notes, want)
	}
	for _, s := range sh {
		if err := s.Validate(&c); err != nil {
			t.Error(err)
		}
	}
	if sh, _ := TensorSplit(&c, Blocks{}, []float64{1, 1}); len(sh[0].Notes) != 0 {
		t.Errorf("an aligned split needs no notes, got %q", sh[0].Notes)
	}

	// Uneven weights, in the order given.
	sh, err = TensorSplit(&c, Blocks{}, []float64{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	wantRanges(t, "KV heads 1:3", ranges(sh, kvs), [][2]int{{0, 2}, {2, 8}})
	wantRanges(t, "FFN 1:3", ranges(sh, ffs), [][2]int{{0, 3584}, {3584, 14336}})
}

func TestTensorSplitReplicatesKVHeads(t *testing.T) {
	c := Config{Layers: 2, Embd: 256, FF: 512, Heads: 8, KVHeads: 2, HeadDim: 32, Vocab: 300}
	sh, err := TensorSplit(&c, Blocks{}, []float64{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	wantRanges(t, "heads", ranges(sh, heads), [][2]int{{0, 3}, {3, 6}, {6, 8}})
	wantRanges(t, "KV heads", ranges(sh, kvs), [][2]int{{0, 1}, {0, 2}, {1, 2}})
	if !strings.Contains(strings.Join(sh[0].Notes, " "), "KV heads replicated") {
		t.Errorf("replication is not noted: %q", sh[0].Notes)
	}
	sh, err = TensorSplit(&c, Blocks{}, []float64{1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	wantRanges(t, "KV heads over 4", ranges(sh, kvs), [][2]int{{0, 1}, {0, 1}, {1, 2}, {1, 2}})
	// Every KV head is held by some rank: none dropped.
	for kv := 0; kv < c.KVHeads; kv++ {
		held := false
		for _, s := range sh {
			held = held || s.KVLo <= kv && kv < s.KVHi
		}
		if !held {
			t.Errorf("KV head %d is held by no rank", kv)
		}
	}
}

func TestTensorSplitRoundsToBlocks(t *testing.T) {
	// attn_output of 8 heads x 8 values in Q4_0: a 32-column block covers
	// 4 heads, so the cut moves to 4-head steps and says so.
	c := Config{Layers: 2, Embd: 64, FF: 96, Heads: 8, KVHeads: 4, HeadDim: 8, Vocab: 300}
	sh, err := TensorSplit(&c, Blocks{AttnOut: quant.Q4_0, Down: quant.Q8_0}, []float64{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	wantRanges(t, "heads", ranges(sh, heads), [][2]int{{0, 4}, {4, 8}, {8, 8}})
	wantRanges(t, "KV heads", ranges(sh, kvs), [][2]int{{0, 2}, {2, 4}, {0, 0}})
	wantRanges(t, "FFN", ranges(sh, ffs), [][2]int{{0, 32}, {32, 64}, {64, 96}})
	if n := strings.Join(sh[0].Notes, " "); !strings.Contains(n, "steps of 4 query heads") || !strings.Contains(n, "Q4_0") {
		t.Errorf("rounding is not noted: %q", n)
	}
	for _, s := range sh {
		if err := s.Validate(&c); err != nil {
			t.Error(err)
		}
	}
	// Two ranks whose only FFN block goes to one of them: the other has
	// nothing to do and the split is refused with the reason.
	c = Config{Layers: 2, Embd: 256, Experts: 4, ExpertsUsed: 2, ExpertFF: 256, MoELayers: []bool{true, true}, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300}
	_, err = TensorSplit(&c, Blocks{AttnOut: quant.Q5_K, DownExps: quant.Q4_K}, []float64{1, 1})
	if err == nil || !strings.Contains(err.Error(), "rank 1 with no attention heads and no FFN columns") {
		t.Errorf("want a refusal naming rank 1, got %v", err)
	}
}

func TestSplitRefusals(t *testing.T) {
	c := llama8B
	for _, tc := range []struct {
		tp, pp  int
		weights []float64
		want    string
	}{
		{1, 33, nil, "33 pipeline stages for 32 layers"},
		{2, 1, []float64{1, 0}, "weight 1 is 0"},
		{2, 1, []float64{1, -2}, "weight 1 is -2"},
		{2, 1, []float64{math.NaN(), 1}, "weight 0 is NaN"},
		{2, 2, []float64{1, 1, 1}, "3 split weights for 4 ranks"},
		{0, 1, nil, "at least 1"},
	} {
		_, err := Split(&c, Blocks{}, tc.tp, tc.pp, tc.weights)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Split(tp %d, pp %d, %v): got %v, want an error containing %q", tc.tp, tc.pp, tc.weights, err, tc.want)
		}
	}
}

func TestLayerSplit(t *testing.T) {
	for _, tc := range []struct {
		layers  int
		weights []float64
		want    [][2]int
	}{
		{5, []float64{1, 1}, [][2]int{{0, 3}, {3, 5}}},
		{5, []float64{1, 3}, [][2]int{{0, 2}, {2, 5}}},
		{3, []float64{100, 1, 1}, [][2]int{{0, 1}, {1, 2}, {2, 3}}}, // every stage keeps a layer
		{3, []float64{1, 1, 100}, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{80, []float64{1, 1, 1}, [][2]int{{0, 27}, {27, 54}, {54, 80}}},
	} {
		got, err := LayerSplit(tc.layers, tc.weights)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("LayerSplit(%d, %v) = %v, want %v", tc.layers, tc.weights, got, tc.want)
		}
	}
}

func TestSplitCombined(t *testing.T) {
	c := llama8B
	sh, err := Split(&c, Blocks{}, 2, 2, []float64{1, 1, 1, 3})
	if err != nil {
		t.Fatal(err)
	}
	// Stage weights 2 and 4: layers 11 and 21; inside stage 1, 1:3.
	want := []struct{ first, last, tpRank, kvLo, kvHi int }{{0, 11, 0, 0, 4}, {0, 11, 1, 4, 8}, {11, 32, 0, 0, 2}, {11, 32, 1, 2, 8}}
	for i, w := range want {
		s := sh[i]
		if s.First != w.first || s.Last != w.last || s.TPRank != w.tpRank || s.TPSize != 2 || s.KVLo != w.kvLo || s.KVHi != w.kvHi {
			t.Errorf("rank %d: %s, want layers [%d,%d) tp %d/2 kv [%d,%d)", i, s.String(), w.first, w.last, w.tpRank, w.kvLo, w.kvHi)
		}
	}
}

// genModel writes a random model and opens it.
func genModel(t testing.TB, cfg modelgen.Config) *gguf.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := modelgen.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSplitsSynthetic covers shapes the shared models lack: fewer KV heads
// than ranks (replicated), head counts that do not divide by the ranks,
// multi-query attention, a rank left without heads by block rounding, MoE
// expert columns in 32-column steps, an F16 KV cache.
func TestSplitsSynthetic(t *testing.T) {
	tp := func(n int, w ...float64) splitCase { return splitCase{tp: n, pp: 1, weights: w} }
	for _, tc := range []struct {
		name  string
		cfg   modelgen.Config
		cases []splitCase
		f32   bool
	}{
		{"llama-6h-2kv-F32", modelgen.Config{Arch: "llama", Layers: 2, Embd: 96, FF: 100, Heads: 6, KVHeads: 2, HeadDim: 16, Vocab: 300, Type: quant.F32},
			[]splitCase{tp(3), tp(4), tp(4, 1, 2, 2, 1), {tp: 2, pp: 2}}, true},
		{"qwen2-mqa-5h-Q8_0", modelgen.Config{Arch: "qwen2", Layers: 2, Embd: 160, FF: 160, Heads: 5, KVHeads: 1, HeadDim: 32, Vocab: 300, Type: quant.Q8_0},
			[]splitCase{tp(2), tp(3), tp(3, 1, 1, 2)}, false},
		{"qwen3-blockround-Q4_0", modelgen.Config{Arch: "qwen3", Layers: 3, Embd: 64, FF: 96, Heads: 8, KVHeads: 4, HeadDim: 8, Vocab: 300, Type: quant.Q4_0},
			[]splitCase{tp(2), tp(3), tp(2, 1, 3), {tp: 1, pp: 3}}, true},
		{"qwen3moe-Q8_0", modelgen.Config{Arch: "qwen3moe", Layers: 2, Embd: 128, FF: 128, Heads: 4, KVHeads: 4, HeadDim: 32, Vocab: 300, Type: quant.Q8_0, Experts: 4, ExpertsUsed: 2, ExpertFF: 96},
			[]splitCase{tp(2), tp(3), tp(4), {tp: 2, pp: 2}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := genModel(t, tc.cfg)
			checkAllSplits(t, f, tc.name, tc.f32, func(*Config) []splitCase { return tc.cases })
		})
	}
}

// TestShardDecodeStepAllocs checks that a decode step of a tensor x pipeline
// split, collectives and stage transfers included, allocates nothing.
func TestShardDecodeStepAllocs(t *testing.T) {
	f := genModel(t, modelgen.Config{Arch: "qwen3moe", Layers: 2, Embd: 64, FF: 128, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0, Experts: 4, ExpertsUsed: 2})
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := Split(c, ColumnBlocks(f, c), 2, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, f, shards, 2, 2, 512, false)
	row := make([]float32, c.Vocab)
	var b Batch
	pos := int32(0)
	step := func() {
		b.Reset()
		b.Add(int32(pos%250)+3, pos, 0, true)
		pos++
		if err := w.forward(&b, row); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 64; i++ {
		step()
	}
	for _, cache := range w.caches {
		cache.Truncate(0, 0)
	}
	pos = 0
	for i := 0; i < 40; i++ {
		step()
	}
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Errorf("a decode step over 4 ranks allocates %.2f times", a)
	}
}

// TestShardSizes checks that the sizes a plan uses are what a shard really
// allocates: scratch, KV cache, and weights that add up over the stages.
func TestShardSizes(t *testing.T) {
	f := genModel(t, modelgen.Config{Arch: "qwen2", Layers: 4, Embd: 64, FF: 96, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0})
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	full := FullShard(c)
	fullBytes, err := WeightBytes(f, c, &full)
	if err != nil {
		t.Fatal(err)
	}
	var tensors int64
	for _, ti := range f.Tensors {
		tensors += ti.Size
	}
	if fullBytes != tensors {
		t.Errorf("whole model: WeightBytes %d, tensors %d", fullBytes, tensors)
	}
	shards, err := Split(c, ColumnBlocks(f, c), 2, 2, []float64{1, 1, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	// Without tensor parallelism the stages' weights add up to the model.
	stages, err := Split(c, Blocks{}, 1, 3, []float64{1, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	var stageSum int64
	for i := range stages {
		n, err := WeightBytes(f, c, &stages[i])
		if err != nil {
			t.Fatal(err)
		}
		stageSum += n
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for i := range shards {
		sh := &shards[i]
		n, err := WeightBytes(f, c, sh)
		if err != nil {
			t.Fatal(err)
		}
		if n <= 0 || n >= fullBytes {
			t.Errorf("rank %d holds %d of %d bytes", i, n, fullBytes)
		}
		var opt Options
		opt.MaxBatch, opt.Shard = 8, sh
		opt.Comm = NewLocalGroup(2).Comm(sh.TPRank)
		opt.Stage = NewLocalStages(2)[0]
		m, err := New(f, pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := scratchBytes(&m.s), ScratchBytes(c, sh, 8, 2, 0); got != want {
			t.Errorf("rank %d: scratch %d bytes, ScratchBytes says %d", i, got, want)
		}
		cache, err := m.NewCache(CacheSize{Positions: 100})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cache.Bytes(), KVBytes(CacheConfig(c, sh, CacheSize{Positions: 100, MaxStep: 8})); got != want {
			t.Errorf("rank %d: KV cache %d bytes, KVBytes says %d", i, got, want)
		}
	}
	if stageSum != fullBytes {
		t.Errorf("stages hold %d bytes together, the whole model %d", stageSum, fullBytes)
	}
}

// scratchBytes measures the step buffers, without the attention scores
// (which grow with the context).
func scratchBytes(s *scratch) int64 {
	n := 4 * int64(cap(s.x)+cap(s.h)+cap(s.tmp)+cap(s.q)+cap(s.k)+cap(s.v)+cap(s.att)+cap(s.gate)+cap(s.up)+
		cap(s.cos)+cap(s.sin)+cap(s.probs)+cap(s.score)+cap(s.sel)+cap(s.selW)+cap(s.expTok)+cap(s.hx)+cap(s.ex)+cap(s.outRows))
	for _, sl := range s.slots {
		n += 4*int64(cap(sl.qh)+cap(sl.out)) + 2*int64(cap(sl.qh16))
	}
	return n
}

func TestBadShards(t *testing.T) {
	f := genModel(t, modelgen.Config{Arch: "llama", Layers: 2, Embd: 64, FF: 96, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.Q8_0})
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	two := func(s Shard) Shard {
		s.TPSize = 2
		return s
	}
	full := FullShard(c)
	for _, tc := range []struct {
		name string
		sh   Shard
		comm Comm
		link StageLink
		want string
	}{
		{"empty layers", Shard{First: 1, Last: 1, TPSize: 1}, nil, nil, "layer range [1,1)"},
		{"layers past the end", Shard{Last: 3, TPSize: 1}, nil, nil, "layer range [0,3)"},
		{"heads past the end", two(Shard{Last: 2, HeadHi: 5, KVHi: 3}), NewLocalGroup(2).Comm(0), nil, "head range [0,5)"},
		{"wrong KV heads", two(Shard{Last: 2, HeadLo: 2, HeadHi: 4, KVLo: 0, KVHi: 2}), NewLocalGroup(2).Comm(0), nil, "read KV heads [1,2), not [0,2)"},
		{"FFN cut inside a block", two(Shard{Last: 2, HeadHi: 4, KVHi: 2, FFLo: 0, FFHi: 40, VocabHi: 300}), NewLocalGroup(2).Comm(0), nil, "do not fall on block boundaries"},
		{"comm of another size", full, NewLocalGroup(2).Comm(0), nil, "shard is tensor-parallel rank 0 of 1 but the Comm is rank 0 of 2"},
		{"stage without a link", Shard{Last: 1, TPSize: 1, HeadHi: 4, KVHi: 2, FFHi: 96, VocabHi: 300}, nil, nil, "no StageLink"},
		{"group of one missing heads", Shard{Last: 2, TPSize: 1, HeadHi: 2, KVHi: 1, FFHi: 96, VocabHi: 300}, nil, nil, "a group of one must hold every head"},
	} {
		sh := tc.sh
		_, err := New(f, pool, Options{Shard: &sh, Comm: tc.comm, Stage: tc.link})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestTopKMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		V := 1 + rng.IntN(300)
		row := make([]float32, V)
		for i := range row {
			row[i] = float32(rng.IntN(20)) // many ties
		}
		k := 1 + rng.IntN(8)
		want := TopK(nil, row, 0, k)
		if len(want) != min(k, V) || want[0].ID != argmax(row) {
			t.Fatalf("TopK of a whole row: %v, argmax %d", want, argmax(row))
		}
		// Random cut points, merged.
		cuts := []int{0}
		for len(cuts) < 4 {
			cuts = append(cuts, min(cuts[len(cuts)-1]+rng.IntN(V+1), V))
		}
		cuts = append(cuts, V)
		var lists [][]Candidate
		for i := 0; i+1 < len(cuts); i++ {
			lists = append(lists, TopK(nil, row[cuts[i]:cuts[i+1]], int32(cuts[i]), k))
		}
		got := MergeTopK(nil, k, lists...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %v cut at %v: merged %v, want %v", row, cuts, got, want)
		}
	}
	nan := []float32{float32(math.NaN()), 1, 2}
	if got := TopK(nil, nan, 10, 3); len(got) != 2 || got[0].ID != 12 {
		t.Errorf("NaN handling: %v", got)
	}
	buf := make([]Candidate, 0, 4)
	row := []float32{3, 1, 4, 1, 5}
	if a := testing.AllocsPerRun(100, func() { buf = TopK(buf, row, 0, 4) }); a != 0 {
		t.Errorf("TopK allocates %.0f times", a)
	}
}

func TestPutVocabSlice(t *testing.T) {
	full := make([]float32, 2*5)
	if err := PutVocabSlice(full, 5, []float32{1, 2, 3, 4}, 3, 5); err != nil {
		t.Fatal(err)
	}
	if want := []float32{0, 0, 0, 1, 2, 0, 0, 0, 3, 4}; !reflect.DeepEqual(full, want) {
		t.Errorf("got %v, want %v", full, want)
	}
	if err := PutVocabSlice(full, 5, []float32{1, 2, 3}, 3, 5); err == nil {
		t.Error("a part that is not whole rows was accepted")
	}
	if err := PutVocabSlice(full, 5, []float32{1}, 4, 6); err == nil {
		t.Error("a slice outside the vocabulary was accepted")
	}
}

func TestLocalGroup(t *testing.T) {
	g := NewLocalGroup(3)
	xs := [][]float32{{1, 2}, {10, 20}, {100, 200}}
	errs := make(chan error, 3)
	for r := range xs {
		go func(r int) { errs <- g.Comm(r).AllReduceSum(xs[r]) }(r)
	}
	for range xs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for r, x := range xs {
		if x[0] != 111 || x[1] != 222 {
			t.Errorf("rank %d: %v", r, x)
		}
	}
	// Lengths that differ fail on every rank.
	for r := range xs {
		go func(r int) { errs <- g.Comm(r).AllReduceSum(make([]float32, 1+r/2)) }(r)
	}
	for range xs {
		if err := <-errs; err == nil {
			t.Error("an all-reduce of different lengths succeeded")
		}
	}
	// A rank that never comes: Abort wakes the others.
	g = NewLocalGroup(2)
	go func() { errs <- g.Comm(0).AllReduceSum(make([]float32, 4)) }()
	time.Sleep(10 * time.Millisecond)
	g.Abort(errors.New("rank 1 failed"))
	if err := <-errs; !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 1 failed") {
		t.Errorf("aborted all-reduce: %v", err)
	}

	st := NewLocalStages(2)
	go func() { errs <- st[0].Send(make([]float32, 3)) }()
	if err := st[1].Recv(make([]float32, 4)); err == nil {
		t.Error("a transfer of the wrong length was received")
	}
	if err := <-errs; err == nil {
		t.Error("the sender of a transfer of the wrong length saw no error")
	}
	go func() { errs <- st[1].Recv(make([]float32, 4)) }()
	st[0].Abort(errors.New("stage 0 failed"))
	if err := <-errs; !errors.Is(err, ErrAborted) {
		t.Errorf("aborted receive: %v", err)
	}
}
