package spec

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// world is a split model in this process as an engine.Backend: one
// goroutine per rank, each with its own Model, Pool and cache, tensor-
// parallel groups joined by LocalGroups and stages by LocalStages (as
// internal/model's split tests build them). The KV operations act on every
// rank's cache, as a cluster replays them. As a cluster's coordinator, it
// can hold the MTP head whole (withHead) and return the hidden states of
// the first rank of the last stage (engine.HiddenBackend).
type world struct {
	tp, pp int
	vocab  int
	shards []model.Shard
	models []*model.Model
	caches []*kvcache.Cache
	groups []*model.LocalGroup
	stages [][]*model.LocalStage
	logits [][]float32
	pools  []*kernels.Pool
	start  []chan *model.Batch
	done   chan error
	errs   []error
	// wantHidden is set before a step's batch goes out: the rank that
	// sends hidden states writes them to hidden.
	wantHidden bool
	hidden     []float32
	head       *model.Model
}

var (
	_ engine.HiddenBackend = (*world)(nil)
	_ engine.Resumer       = (*world)(nil)
)

const worldRows = 64

func newWorld(t testing.TB, path string, tp, pp int, weights []float64, positions int) *world {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := model.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := model.Split(c, model.ColumnBlocks(f, c), tp, pp, weights)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{tp: tp, pp: pp, shards: shards, done: make(chan error)}
	for s := 0; s < pp; s++ {
		w.groups = append(w.groups, model.NewLocalGroup(tp))
	}
	for r := 0; r < tp; r++ {
		w.stages = append(w.stages, model.NewLocalStages(pp))
	}
	for rank := range shards {
		s, r := rank/tp, rank%tp
		pool := kernels.NewPool(1)
		t.Cleanup(pool.Close)
		w.pools = append(w.pools, pool)
		opt := model.Options{MaxBatch: 64, Comm: w.groups[s].Comm(r), Shard: &shards[rank]}
		if pp > 1 {
			opt.Stage = w.stages[r][s]
		}
		m, err := model.New(f, pool, opt)
		if err != nil {
			t.Fatalf("rank %d (%s): %v", rank, shards[rank].String(), err)
		}
		cache, err := m.NewCache(model.CacheSize{Positions: positions})
		if err != nil {
			t.Fatal(err)
		}
		w.vocab = m.Cfg.Vocab
		w.models = append(w.models, m)
		w.caches = append(w.caches, cache)
		w.logits = append(w.logits, make([]float32, worldRows*shards[rank].Vocab()))
		w.start = append(w.start, make(chan *model.Batch))
	}
	w.errs = make([]error, len(shards))
	for rank, start := range w.start {
		go w.rank(rank, start)
		t.Cleanup(func() { close(start) })
	}
	return w
}

func (w *world) rank(rank int, start chan *model.Batch) {
	m := w.models[rank]
	for b := range start {
		var lg, hid []float32
		if sh := m.Shard(); sh.LastStage(&m.Cfg) {
			lg = w.logits[rank][:b.Outputs()*sh.Vocab()]
			if w.wantHidden && sh.TPRank == 0 {
				hid = w.hidden[:b.Outputs()*m.Cfg.Embd]
			}
		}
		err := m.ForwardHidden(w.caches[rank], b, lg, hid)
		if err != nil {
			err = fmt.Errorf("rank %d: %w", rank, err)
			w.groups[rank/w.tp].Abort(err)
			w.stages[rank%w.tp][0].Abort(err)
		}
		w.done <- err
	}
}

func (w *world) Vocab() int { return w.vocab }

// withHead loads the MTP head whole beside the ranks, as a cluster's
// coordinator does, with its own pool (exact sets the ranks' pools).
func (w *world) withHead(t testing.TB, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pool := kernels.NewPool(1)
	t.Cleanup(pool.Close)
	if w.head, err = model.NewMTPHead(f, pool, 64); err != nil {
		t.Fatal(err)
	}
	w.hidden = make([]float32, worldRows*w.head.Cfg.Embd)
	return w.head
}

func (w *world) Forward(b *model.Batch, out engine.Output, logits []float32) error {
	w.wantHidden = false
	return w.step(b, logits)
}

func (w *world) ForwardHidden(b *model.Batch, _ engine.Output, logits, hidden []float32) error {
	if w.hidden == nil {
		return errors.New("world: no head loaded (withHead)")
	}
	w.wantHidden = true
	if err := w.step(b, logits); err != nil {
		return err
	}
	copy(hidden, w.hidden[:b.Outputs()*w.head.Cfg.Embd])
	return nil
}

func (w *world) Head(hidden, logits []float32) error { return w.head.Head(hidden, logits) }

func (w *world) step(b *model.Batch, logits []float32) error {
	rows := b.Outputs()
	if rows > worldRows {
		return fmt.Errorf("world: %d output rows, at most %d", rows, worldRows)
	}
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
		if err := model.PutVocabSlice(logits, w.vocab, w.logits[rank][:rows*sh.Vocab()], sh.VocabLo, sh.VocabHi); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) each(op func(c *kvcache.Cache) error) error {
	var first error
	for i, c := range w.caches {
		if err := op(c); err != nil && i == 0 {
			first = err
		}
	}
	return first
}

func (w *world) Drop(seq kvcache.SeqID) {
	w.each(func(c *kvcache.Cache) error { c.Drop(seq); return nil })
}
func (w *world) Has(seq kvcache.SeqID) bool { return w.caches[0].Has(seq) }
func (w *world) Len(seq kvcache.SeqID) int  { return w.caches[0].Len(seq) }
func (w *world) Reserve(seq kvcache.SeqID, n int) error {
	return w.each(func(c *kvcache.Cache) error { return c.Reserve(seq, n) })
}
func (w *world) CopyPrefix(dst, src kvcache.SeqID, n int) error {
	return w.each(func(c *kvcache.Cache) error { return c.CopyPrefix(dst, src, n) })
}
func (w *world) Truncate(seq kvcache.SeqID, n int) error {
	return w.each(func(c *kvcache.Cache) error { return c.Truncate(seq, n) })
}
func (w *world) ResumePoint(seq kvcache.SeqID, n int) int { return w.caches[0].ResumePoint(seq, n) }
func (w *world) Snapshot(seq kvcache.SeqID, n int) error {
	if !w.KVConfig().Recurrent() {
		return nil
	}
	return w.each(func(c *kvcache.Cache) error { return c.Snapshot(seq, n) })
}
func (w *world) Forget(seq kvcache.SeqID, from int) {
	if w.KVConfig().Recurrent() && w.Has(seq) {
		w.each(func(c *kvcache.Cache) error { c.Forget(seq, from); return nil })
	}
}
func (w *world) KVConfig() kvcache.Config { return w.caches[0].Config() }
func (w *world) KVStats() kvcache.Stats   { return w.caches[0].Stats() }
func (w *world) Close() error             { return nil }

// TestGreedySameSplit: on tensor and layer splits in this process, every
// drafter gives the split's own plain greedy output token for token; the
// draft model runs on the coordinator.
func TestGreedySameSplit(t *testing.T) {
	cases := []struct {
		model  string
		tp, pp int
		w      []float64
	}{
		{"tiny-llama/tiny-llama-Q4_K_M.gguf", 2, 1, nil},
		{"tiny-llama/tiny-llama-F32.gguf", 3, 1, []float64{1, 2, 3}},
		{"tiny-qwen3/tiny-qwen3-Q8_0.gguf", 1, 2, nil},
		{"gpt-oss/tiny-gpt-oss-Q8_0.gguf", 2, 1, nil},
		{"deepseek2/tiny-deepseek2-Q8_0.gguf", 2, 1, nil},
		{"stories260K/stories260K-F32.gguf", 2, 2, nil},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s-tp%d-pp%d", filepath.Base(c.model), c.tp, c.pp)
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, sharedModel(t, c.model), c.tp, c.pp, c.w, 256)
			want := generate(t, engine.NewGenerator(w), w.Vocab(), prompt, genTokens)
			draft := load(t, sharedModel(t, "stories260K/stories260K-Q8_0.gguf"), model.Options{}, 256)
			specs := drafters(t, want, w.Vocab(), draft)
			for _, name := range sortedKeys(specs) {
				checkSame(t, w, exactOn(w.pools...), prompt, want, name, specs[name])
			}
		})
	}
}

// TestMTPGreedySameSplit: on tensor, layer and mixed splits in this
// process, the MTP head held whole beside the ranks (as a cluster's
// coordinator holds it, model.NewMTPHead), fed by the last stage's hidden
// states, gives the split's own plain greedy output token for token from
// the models' reference prompt; on glm4moe its drafts are accepted (the
// shaped head predicts repeats, which its greedy text has; qwen35's
// continuation never repeats a token at once, its README says, so
// nothing is accepted there and only the equality is checked).
func TestMTPGreedySameSplit(t *testing.T) {
	cases := []struct {
		model  string
		tp, pp int
		w      []float64
	}{
		{"glm4moe/tiny-glm4moe-Q8_0.gguf", 2, 1, nil},
		{"glm4moe/tiny-glm4moe-Q4_K_M.gguf", 1, 2, nil},
		{"glm4moe/tiny-glm4moe-Q8_0.gguf", 2, 2, []float64{1, 3, 1, 3}},
		{"glm4moe/tiny-glm4moe-Q8_0.gguf", 3, 1, nil},
		{"qwen35/tiny-qwen35-Q8_0.gguf", 2, 1, nil},
		{"qwen35/tiny-qwen35-Q8_0.gguf", 1, 3, nil},
		{"qwen35/tiny-qwen35-Q4_K_M.gguf", 2, 2, nil},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s-tp%d-pp%d", filepath.Base(c.model), c.tp, c.pp)
		t.Run(name, func(t *testing.T) {
			path := sharedModel(t, c.model)
			p, _ := readGreedy(t, path)
			w := newWorld(t, path, c.tp, c.pp, c.w, 256)
			want := generate(t, engine.NewGenerator(w), w.Vocab(), p, 32)
			head := w.withHead(t, path)
			for _, n := range []struct{ nmin, nmax int }{{3, 3}, {0, 4}} {
				d, mc := newMTPDrafter(t, head)
				st := checkSame(t, w, exactOn(w.pools...), p, want, fmt.Sprintf("mtp %d..%d", n.nmin, n.nmax), engine.Spec{Drafter: d, NMin: n.nmin, NMax: n.nmax})
				// Kept drafts from the shaped head at a fixed length; the
				// adaptive one may stop drafting where few are kept.
				if n.nmin == n.nmax && st.AcceptedTotal() == 0 && strings.Contains(c.model, "glm4moe") {
					t.Errorf("mtp %d..%d: no draft accepted (%s)", n.nmin, n.nmax, st)
				}
				if st.DraftedTotal() == 0 {
					t.Errorf("mtp %d..%d: nothing drafted (%s)", n.nmin, n.nmax, st)
				}
				if mc.Stats().BlocksUsed != 0 {
					t.Errorf("mtp %d..%d: the head's cache holds %d blocks after the generation", n.nmin, n.nmax, mc.Stats().BlocksUsed)
				}
			}
		})
	}
}
