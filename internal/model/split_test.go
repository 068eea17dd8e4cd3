package model

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/modelgen"
	"braid/internal/quant"
	"braid/internal/sharedmodels"
)

// world runs every rank of a split model in this process: one goroutine per
// rank, each with its own Model, Pool (one thread) and KV cache, tensor-
// parallel groups joined by LocalGroups and stages by LocalStages. The rank
// goroutines live as long as the test, so a step allocates nothing.
type world struct {
	tp, pp int
	vocab  int
	shards []Shard
	models []*Model
	caches []*kvcache.Cache
	groups []*LocalGroup
	stages [][]*LocalStage // [tp rank][stage]
	logits [][]float32     // per rank: its vocabulary slice of each output row
	topk   [][]Candidate
	start  []chan *Batch
	done   chan error
	errs   []error
}

func newWorld(t testing.TB, f *gguf.Model, shards []Shard, tp, pp, positions int, f32 bool) *world {
	t.Helper()
	w := &world{tp: tp, pp: pp, shards: shards, done: make(chan error)}
	for s := 0; s < pp; s++ {
		w.groups = append(w.groups, NewLocalGroup(tp))
	}
	for r := 0; r < tp; r++ {
		w.stages = append(w.stages, NewLocalStages(pp))
	}
	for rank, sh := range shards {
		s, r := rank/tp, rank%tp
		pool := kernels.NewPool(1)
		t.Cleanup(pool.Close)
		opt := Options{MaxBatch: 16, Comm: w.groups[s].Comm(r), Shard: &shards[rank]}
		if pp > 1 {
			opt.Stage = w.stages[r][s]
		}
		m, err := New(f, pool, opt)
		if err != nil {
			t.Fatalf("rank %d (%s): %v", rank, sh.String(), err)
		}
		cache, err := m.NewCache(CacheSize{Positions: positions, F32: f32})
		if err != nil {
			t.Fatal(err)
		}
		w.vocab = m.Cfg.Vocab
		w.models = append(w.models, m)
		w.caches = append(w.caches, cache)
		w.logits = append(w.logits, make([]float32, 64*m.sh.Vocab()))
		w.topk = append(w.topk, make([]Candidate, 0, 4))
		w.start = append(w.start, make(chan *Batch))
	}
	w.errs = make([]error, len(shards))
	// The rank goroutines start only now: the appends above move the
	// slices they read.
	for rank, start := range w.start {
		go w.rank(rank, start)
		t.Cleanup(func() { close(start) })
	}
	return w
}

// rank runs one rank's steps as they come.
func (w *world) rank(rank int, start chan *Batch) {
	m := w.models[rank]
	for b := range start {
		lg := w.logits[rank][:b.Outputs()*m.sh.Vocab()]
		err := m.Forward(w.caches[rank], b, lg)
		if err != nil {
			err = fmt.Errorf("rank %d: %w", rank, err)
			// Wake the peers waiting for this rank.
			w.groups[rank/w.tp].Abort(err)
			w.stages[rank%w.tp][0].Abort(err)
		}
		w.done <- err
	}
}

// forward runs b on every rank at once and assembles the full logits of the
// output rows from the last stage's vocabulary slices.
func (w *world) forward(b *Batch, full []float32) error {
	rows := b.Outputs()
	for _, start := range w.start {
		start <- b
	}
	failed := false
	for i := range w.start {
		w.errs[i] = <-w.done
		failed = failed || w.errs[i] != nil
	}
	if failed {
		return errors.Join(w.errs...)
	}
	for rank := (w.pp - 1) * w.tp; rank < len(w.models); rank++ {
		sh := &w.shards[rank]
		if err := PutVocabSlice(full, w.vocab, w.logits[rank][:rows*sh.Vocab()], sh.VocabLo, sh.VocabHi); err != nil {
			return err
		}
	}
	return nil
}

// greedy is the next token after output row row, chosen as the coordinator
// does: merging each last-stage rank's top candidates.
func (w *world) greedy(row int) int32 {
	var lists [][]Candidate
	for rank := (w.pp - 1) * w.tp; rank < len(w.models); rank++ {
		V := w.shards[rank].Vocab()
		w.topk[rank] = TopK(w.topk[rank], w.logits[rank][row*V:(row+1)*V], int32(w.shards[rank].VocabLo), 4)
		lists = append(lists, w.topk[rank])
	}
	return MergeTopK(nil, 4, lists...)[0].ID
}

// splitCase is one way to split a model: tp x pp ranks and their weights
// (nil = even), as --split tensor=TP,layer=PP --tensor-split W... says.
type splitCase struct {
	tp, pp  int
	weights []float64
}

func (sc splitCase) String() string {
	s := fmt.Sprintf("tp%d", sc.tp)
	if sc.pp > 1 {
		s = fmt.Sprintf("pp%d", sc.pp)
		if sc.tp > 1 {
			s = fmt.Sprintf("tp%dxpp%d", sc.tp, sc.pp)
		}
	}
	if sc.weights != nil {
		s += fmt.Sprintf("-w%v", sc.weights)
	}
	return strings.ReplaceAll(s, " ", ",")
}

func splitCases(c *Config) []splitCase {
	cs := []splitCase{{tp: 2, pp: 1}, {tp: 3, pp: 1}, {tp: 2, pp: 1, weights: []float64{3, 1}}, {tp: 3, pp: 1, weights: []float64{1, 2, 3}},
		{tp: 1, pp: 2}}
	if c.Layers >= 3 {
		cs = append(cs, splitCase{tp: 1, pp: 3}, splitCase{tp: 1, pp: 2, weights: []float64{1, 3}})
	}
	if c.Layers >= 2 {
		cs = append(cs, splitCase{tp: 2, pp: 2})
	}
	return cs
}

// run is a reference run: the prompt's logits at every position, then
// greedy steps, each step's token and logits.
type run struct {
	prompt []float32
	tokens []int32
	steps  [][]float32
}

const greedySteps = 16

var testPrompt = []int32{1, 39, 460, 112, 14, 255, 240, 120, 164, 303, 255, 249}

// generate runs the prompt in one batch, then greedySteps decode steps, on a
// forward function; next picks each token.
func generate(t testing.TB, vocab int, fwd func(*Batch, []float32) error, next func([]float32) int32, prompt []int32) run {
	t.Helper()
	var r run
	var b Batch
	for i, tok := range prompt {
		b.Add(tok%int32(vocab), int32(i), 0, true)
	}
	r.prompt = make([]float32, len(prompt)*vocab)
	if err := fwd(&b, r.prompt); err != nil {
		t.Fatal(err)
	}
	row := r.prompt[(len(prompt)-1)*vocab:]
	pos := int32(len(prompt))
	for step := 0; step < greedySteps; step++ {
		tok := next(row)
		r.tokens = append(r.tokens, tok)
		b.Reset()
		b.Add(tok, pos, 0, true)
		pos++
		row = make([]float32, vocab)
		if err := fwd(&b, row); err != nil {
			t.Fatalf("greedy step %d: %v", step, err)
		}
		r.steps = append(r.steps, row)
	}
	return r
}

// relDiff is max |a-b| over a row divided by the spread of b.
func relDiff(a, b []float32) float64 {
	lo, hi := b[0], b[0]
	for _, v := range b {
		lo, hi = min(lo, v), max(hi, v)
	}
	d, _ := maxDiff(a, b)
	return d / float64(hi-lo)
}

// splitTolerance bounds the logits of a split relative to world size 1, as
// max |diff| / spread of the row. A split sums the same products in another
// order: each row-parallel projection adds per-rank partial sums in the
// all-reduce instead of one long dot product. With F32 weights that moves
// logits by a few float32 roundings (seen: at most 3.5e-7). F16 weights
// multiply activations rounded to half precision, and quantized weights
// activations quantized per block: both sides cut at the same block
// boundaries, but a last-bit difference in an activation can flip one
// rounding in a later layer, which moves the logits more (seen: 1.8e-4 for
// F16, 3.2e-3 for quantized models, as in the llama.cpp comparisons).
func splitTolerance(name string) float64 {
	switch {
	case strings.Contains(name, "-F32"):
		return 1e-5
	case strings.Contains(name, "-F16"), strings.Contains(name, "-BF16"):
		return 1e-3
	}
	return 2e-2
}

// checkSplit runs one split of f and compares it with the reference run.
func checkSplit(t *testing.T, f *gguf.Model, name string, c *Config, sc splitCase, ref run, f32 bool) (worst float64) {
	t.Helper()
	shards, err := Split(c, ColumnBlocks(f, c), sc.tp, sc.pp, sc.weights)
	if msg, refused := sharedmodels.Check(name, sc.tp, sc.pp, sc.weights, err); msg != "" {
		t.Fatalf("%s: %s", sc, msg)
	} else if refused {
		t.Logf("%s: refused, as the refusal table says: %v", sc, err)
		return 0
	}
	w := newWorld(t, f, shards, sc.tp, sc.pp, 64, f32)
	tol := splitTolerance(name)
	V := c.Vocab
	prompt := len(ref.prompt) / V
	step := 0
	var b Batch
	for i := 0; i < prompt; i++ {
		b.Add(testPrompt[i]%int32(V), int32(i), 0, true)
	}
	full := make([]float32, prompt*V)
	if err := w.forward(&b, full); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < prompt; p++ {
		d := relDiff(full[p*V:(p+1)*V], ref.prompt[p*V:(p+1)*V])
		worst = max(worst, d)
		if d > tol {
			t.Errorf("%s: prompt position %d: logits differ from world 1 by %.3g of the spread (tolerance %.0e)", sc, p, d, tol)
		}
	}
	// Greedy from the split's own logits, through the per-rank candidates.
	pos := int32(prompt)
	row, outRow := full[(prompt-1)*V:], prompt-1
	for ; step < greedySteps; step++ {
		tok := w.greedy(outRow)
		if am := argmax(row); tok != am {
			t.Fatalf("%s: step %d: merged top candidates chose %d, argmax of the full row %d", sc, step, tok, am)
		}
		if tok != ref.tokens[step] {
			// The split's logits are within tol of the spread of world
			// 1's, so it may pick another token only where world 1's own
			// two are within twice that: a near tie of random weights,
			// after which the two runs continue from different tokens
			// and there is nothing more to compare.
			want := ref.prompt[(prompt-1)*V:]
			if step > 0 {
				want = ref.steps[step-1]
			}
			lo, hi := slices.Min(want), slices.Max(want)
			margin := float64(want[ref.tokens[step]]-want[tok]) / float64(hi-lo)
			if margin > 2*tol {
				t.Fatalf("%s: greedy step %d chose %d, world 1 chose %d by %.3g of the spread (more than twice the tolerance %.0e)", sc, step, tok, ref.tokens[step], margin, tol)
			}
			t.Logf("%s: greedy step %d chose %d, world 1 chose %d by %.3g of the spread (a tie within the tolerance %.0e); the runs part there", sc, step, tok, ref.tokens[step], margin, tol)
			break
		}
		outRow = 0
		b.Reset()
		b.Add(tok, pos, 0, true)
		pos++
		row = make([]float32, V)
		if err := w.forward(&b, row); err != nil {
			t.Fatalf("%s: step %d: %v", sc, step, err)
		}
		d := relDiff(row, ref.steps[step])
		worst = max(worst, d)
		if d > tol {
			t.Errorf("%s: greedy step %d: logits differ from world 1 by %.3g of the spread (tolerance %.0e)", sc, step, d, tol)
		}
	}
	return worst
}

// splitModels are the shared models the split tests run: all of them, or
// with -short one per architecture (llama twice: tiny and stories).
func splitModels(t *testing.T) []string {
	files := sharedFiles(t)
	if !testing.Short() {
		return files
	}
	var out []string
	for _, f := range files {
		b := filepath.Base(f)
		if strings.HasSuffix(b, "-Q8_0.gguf") && (strings.Contains(b, "qwen") || strings.Contains(b, "stories")) || b == "tiny-llama-Q4_K_M.gguf" || b == "tiny-gpt-oss-MXFP4_MOE.gguf" {
			out = append(out, f)
		}
	}
	return out
}

// TestSplitsMatchWorld1 runs every shared model on every split in-process
// and checks that greedy generation picks the same tokens as world size 1
// and that the logits agree within splitTolerance.
func TestSplitsMatchWorld1(t *testing.T) {
	for _, path := range splitModels(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			checkAllSplits(t, f, name, true, splitCases)
		})
	}
}

// checkAllSplits runs the model on world size 1, then on every split cases
// gives, comparing each with world 1.
func checkAllSplits(t *testing.T, f *gguf.Model, name string, f32 bool, cases func(*Config) []splitCase) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := New(f, pool, Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(CacheSize{Positions: 64, F32: f32})
	if err != nil {
		t.Fatal(err)
	}
	c := &m.Cfg
	ref := generate(t, c.Vocab, func(b *Batch, lg []float32) error { return m.Forward(cache, b, lg) }, argmax, testPrompt)
	for _, sc := range cases(c) {
		worst := checkSplit(t, f, name, c, sc, ref, f32)
		t.Logf("%-22s worst logit difference %.2g of the spread", sc, worst)
	}
}

// TestSplitsKQuantMoE runs tensor parallelism over K-quant experts: a
// qwen3moe whose experts are three Q4_K blocks wide (768 columns) and whose
// attention output takes two (8 heads of 64), on 2 and 3 ranks, even and
// uneven. The shared Q4_K_M MoE models have experts one block wide, so they
// refuse every tensor split; without this model no K-quant expert slice
// would ever run.
func TestSplitsKQuantMoE(t *testing.T) {
	f := genModel(t, modelgen.Config{Arch: "qwen3moe", Layers: 2, Embd: 256, FF: 768, Heads: 8, KVHeads: 4, HeadDim: 64,
		Vocab: 300, Type: quant.Q4_K, Experts: 4, ExpertsUsed: 2, ExpertFF: 768, Seed: 13})
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if tt, ok := f.Tensor("blk.0.ffn_down_exps.weight"); !ok || tt.Type != quant.Q4_K {
		t.Fatalf("blk.0.ffn_down_exps.weight: %+v, want a Q4_K tensor", tt)
	}
	cases := []splitCase{{tp: 2, pp: 1}, {tp: 3, pp: 1}, {tp: 2, pp: 1, weights: []float64{2, 1}},
		{tp: 3, pp: 1, weights: []float64{1, 1, 2}}, {tp: 2, pp: 2}}
	// Every rank holds a slice of the experts, cut on Q4_K's 256 columns.
	for _, sc := range cases {
		shards, err := Split(c, ColumnBlocks(f, c), sc.tp, sc.pp, sc.weights)
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		for r, sh := range shards {
			if sh.ExpFFHi <= sh.ExpFFLo || sh.ExpFFLo%256 != 0 || sh.ExpFFHi%256 != 0 {
				t.Fatalf("%s: rank %d holds expert columns [%d,%d), want a non-empty slice on 256-column blocks", sc, r, sh.ExpFFLo, sh.ExpFFHi)
			}
		}
	}
	if testing.Short() {
		// One even and one uneven split: the race run's share.
		cases = []splitCase{cases[0], cases[3]}
	}
	checkAllSplits(t, f, "qwen3moe-kquant-Q4_K", true, func(*Config) []splitCase { return cases })
}

// TestPipelineMicroBatches runs a layer split as a pipeline: each stage works
// through its stream of micro-batches on its own, so stage 0 runs the next
// micro-batch while stage 1 runs the previous one (teacher-forced tokens, so
// no step waits for a sampled token). Two sequences alternate; every output
// must match world size 1 running the same batches one after the other.
func TestPipelineMicroBatches(t *testing.T) {
	f := genModel(t, modelgen.Config{Arch: "qwen3", Layers: 4, Embd: 64, FF: 96, Heads: 4, KVHeads: 2, Vocab: 300, Type: quant.F32})
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	// Micro-batches: prompts of two sequences, then 12 decode steps of each,
	// alternating.
	var batches []*Batch
	for seq := 0; seq < 2; seq++ {
		b := &Batch{}
		for i := 0; i < 5; i++ {
			b.Add(int32(10+7*i+seq), int32(i), kvcache.SeqID(seq), i == 4)
		}
		batches = append(batches, b)
	}
	for step := 0; step < 12; step++ {
		for seq := 0; seq < 2; seq++ {
			b := &Batch{}
			b.Add(int32(100+3*step+seq), int32(5+step), kvcache.SeqID(seq), true)
			batches = append(batches, b)
		}
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	one, err := New(f, pool, Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := one.NewCache(CacheSize{Positions: 128, Ctx: 64, F32: true})
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]float32, len(batches))
	for i, b := range batches {
		want[i] = make([]float32, c.Vocab)
		if err := one.Forward(cache, b, want[i]); err != nil {
			t.Fatal(err)
		}
	}

	shards, err := Split(c, ColumnBlocks(f, c), 1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Stage 1 holds micro-batch 0 (received, not yet run) until stage 0
	// has run all of micro-batch 1 and is sending it: the stages work at
	// the same time, or the test times out.
	local := NewLocalStages(2)
	ran1 := make(chan struct{})
	links := []StageLink{
		&hookLink{StageLink: local[0], beforeSend: func(n int) {
			if n == 1 {
				close(ran1)
			}
		}},
		&hookLink{StageLink: local[1], afterRecv: func(n int) error {
			if n == 0 {
				select {
				case <-ran1:
				case <-time.After(20 * time.Second):
					return errors.New("stage 0 did not run micro-batch 1 while stage 1 held micro-batch 0: the stages do not pipeline")
				}
			}
			return nil
		}},
	}
	got := make([][]float32, len(batches))
	errs := make(chan error, 2)
	for s := range shards {
		p := kernels.NewPool(1)
		defer p.Close()
		m, err := New(f, p, Options{MaxBatch: 16, Shard: &shards[s], Comm: Single{}, Stage: links[s]})
		if err != nil {
			t.Fatal(err)
		}
		cache, err := m.NewCache(CacheSize{Positions: 128, Ctx: 64, F32: true})
		if err != nil {
			t.Fatal(err)
		}
		go func(s int) {
			for i, b := range batches {
				var lg []float32
				if s == 1 {
					lg = make([]float32, c.Vocab)
					got[i] = lg
				}
				if err := m.Forward(cache, b, lg); err != nil {
					local[s].Abort(err)
					errs <- err
					return
				}
			}
			errs <- nil
		}(s)
	}
	for range shards {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range batches {
		if d := relDiff(got[i], want[i]); d != 0 {
			t.Errorf("micro-batch %d: logits differ from world 1 by %.3g of the spread (a layer split alone changes no sum)", i, d)
		}
	}
}

// hookLink calls hooks around a StageLink's transfers, counting them.
type hookLink struct {
	StageLink
	sends, recvs int
	beforeSend   func(n int)
	afterRecv    func(n int) error
}

func (h *hookLink) Send(x []float32) error {
	if h.beforeSend != nil {
		h.beforeSend(h.sends)
	}
	h.sends++
	return h.StageLink.Send(x)
}

func (h *hookLink) Recv(x []float32) error {
	if err := h.StageLink.Recv(x); err != nil {
		return err
	}
	h.recvs++
	if h.afterRecv != nil {
		return h.afterRecv(h.recvs - 1)
	}
	return nil
}
