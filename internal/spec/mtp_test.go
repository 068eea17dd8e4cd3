package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/engine"
	"braid/internal/kvcache"
	"braid/internal/model"
)

var mtpModels = []string{
	"glm4moe/tiny-glm4moe-F32.gguf",
	"glm4moe/tiny-glm4moe-Q8_0.gguf",
	"glm4moe/tiny-glm4moe-Q4_K_M.gguf",
}

// recorder wraps a drafter and keeps every request's tokens and drafts.
type recorder struct {
	engine.HiddenDrafter
	toks   [][]int32
	drafts [][]int32
}

func (r *recorder) Draft(reqs []engine.DraftRequest) error {
	err := r.HiddenDrafter.Draft(reqs)
	for _, q := range reqs {
		r.toks = append(r.toks, slices.Clone(q.Toks))
		r.drafts = append(r.drafts, slices.Clone(q.Out))
	}
	return err
}

func readGreedy(t *testing.T, gguf string) (tokens, greedy []int32) {
	data, err := os.ReadFile(strings.TrimSuffix(gguf, ".gguf") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Tokens []int32 `json:"tokens"`
		Greedy []int32 `json:"greedy_32"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g.Tokens, g.Greedy
}

// llamaMTP are llama.cpp's drafted and accepted counts with
// --spec-type draft-mtp (the glm4moe folder's README: llama-server, the
// 32-token prompt, 32 greedy tokens), by file and n-max.
var llamaMTP = map[string]map[int][2]int64{
	"tiny-glm4moe-F32.gguf":    {1: {22, 8}, 3: {48, 13}},
	"tiny-glm4moe-Q8_0.gguf":   {1: {22, 8}, 3: {48, 13}},
	"tiny-glm4moe-Q4_K_M.gguf": {1: {24, 6}, 3: {60, 9}},
}

// TestMTPGreedySame: with the model's own MTP head drafting, greedy output
// is the plain greedy output, token for token (and llama.cpp's greedy_32),
// and with a fixed draft length the drafted and accepted counts are
// llama.cpp's (the README calls them a coarse check, as they depend on
// when an engine drafts; braid drafts as llama.cpp does there: n-max
// every step, capped by the tokens left).
func TestMTPGreedySame(t *testing.T) {
	for _, rel := range mtpModels {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			path := sharedModel(t, rel)
			tokens, ref := readGreedy(t, path)
			lm := load(t, path, model.Options{MTP: true}, 256)
			b := engine.NewLocal(lm.m, lm.cache)
			want := generate(t, engine.NewGenerator(b), b.Vocab(), tokens, len(ref))
			if !slices.Equal(want, ref) {
				t.Logf("plain greedy differs from llama.cpp's greedy_32 (a near tie?):\n got %v\nwant %v", want, ref)
			}
			for _, c := range []struct {
				name       string
				nmin, nmax int
			}{{"n-max 1", 1, 1}, {"n-max 3", 3, 3}, {"adaptive 0..4", 0, 4}} {
				d, mc := newMTPDrafter(t, lm.m)
				st := &engine.SpecStats{}
				g, err := engine.NewSpecGenerator(b, engine.Spec{Drafter: d, NMin: c.nmin, NMax: c.nmax, Stats: st, Exact: exactOn(lm.pool)})
				if err != nil {
					t.Fatal(err)
				}
				got := generate(t, g, b.Vocab(), tokens, len(ref))
				if !slices.Equal(got, want) {
					t.Errorf("%s: MTP speculative output differs from plain greedy:\n got %v\nwant %v", c.name, got, want)
				}
				// A fixed length must have drafts kept (the shaped head
				// predicts the repeats of 426); the adaptive length must
				// draft, and may stop where few are kept (the Q4_K_M head,
				// 25 % at position 1, on a model whose step is all
				// per-token overhead).
				if c.nmin == c.nmax && st.AcceptedTotal() == 0 {
					t.Errorf("%s: no draft accepted (%s); the shaped head predicts the repeats of 426", c.name, st)
				}
				if st.DraftedTotal() == 0 {
					t.Errorf("%s: nothing drafted (%s)", c.name, st)
				}
				t.Logf("%s: %s", c.name, st)
				if want, ok := llamaMTP[filepath.Base(rel)][c.nmax]; ok && c.nmin == c.nmax {
					if got := [2]int64{st.DraftedTotal(), st.AcceptedTotal()}; got != want {
						t.Errorf("%s: drafted/accepted %v, llama.cpp's %v", c.name, got, want)
					}
				}
				if mc.Stats().BlocksUsed != 0 {
					t.Errorf("%s: the MTP cache still holds %d blocks after the generation", c.name, mc.Stats().BlocksUsed)
				}
			}
		})
	}
}

// TestMTPDraftsAreTheHeads: every first draft the drafter proposes is the
// argmax of the MTP head evaluated from scratch over the whole sequence in
// one batch (the trunk's hidden states of every position, the head over
// every position), so the head's cache, filled during the prefill in
// chunks and after each verification, is what a cold full evaluation
// gives; chained drafts are checked the same way with the head's own
// state.
func TestMTPDraftsAreTheHeads(t *testing.T) {
	path := sharedModel(t, "glm4moe/tiny-glm4moe-F32.gguf")
	// Steps of 16 tokens: the 39-token prompt is evaluated in three, and
	// the head's cache is filled over them.
	lm := load(t, path, model.Options{MTP: true, MaxBatch: 16}, 512)
	b := engine.NewLocal(lm.m, lm.cache)
	mc, err := lm.m.NewMTPCache(model.CacheSize{Positions: 512})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewMTP(lm.m, mc, 16)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{HiddenDrafter: d}
	g, err := engine.NewSpecGenerator(b, engine.Spec{Drafter: rec, NMin: 2, NMax: 2, Exact: exactOn(lm.pool)})
	if err != nil {
		t.Fatal(err)
	}
	long := slices.Concat(prompt, prompt, prompt[:7])
	want := generate(t, engine.NewGenerator(b), b.Vocab(), long, 24)
	if got := generate(t, g, b.Vocab(), long, 24); !slices.Equal(got, want) {
		t.Errorf("after a prompt of three steps: MTP speculative output differs from plain greedy:\n got %v\nwant %v", got, want)
	}
	if len(rec.toks) == 0 {
		t.Fatal("no drafts")
	}
	// The oracle evaluates whole sequences in one step.
	lm = load(t, path, model.Options{MTP: true, MaxBatch: 64}, 512)
	for i, toks := range rec.toks {
		L := len(toks)
		row, hout, _, hc := headFromScratch(t, lm.m, toks)
		if got, want := rec.drafts[i][0], argmax(row); got != want {
			t.Errorf("call %d (%d tokens): first draft %d, the head evaluated from scratch says %d", i, L, got, want)
		}
		if len(rec.drafts[i]) > 1 {
			var bt model.Batch
			bt.Add(rec.drafts[i][0], int32(L), 0, true)
			if err := lm.m.ForwardMTP(hc, &bt, hout, row); err != nil {
				t.Fatal(err)
			}
			if got, want := rec.drafts[i][1], argmax(row); got != want {
				t.Errorf("call %d (%d tokens): chained draft %d, the head says %d", i, L, got, want)
			}
		}
	}
	t.Logf("%d draft calls checked", len(rec.toks))
}

func argmax(row []float32) int32 {
	best := 0
	for j := range row {
		if row[j] > row[best] {
			best = j
		}
	}
	return int32(best)
}

// TestMTPRefusals: a model without an MTP head is refused.
func TestMTPRefusals(t *testing.T) {
	m := load(t, sharedModel(t, "stories260K/stories260K-F32.gguf"), model.Options{}, 256)
	if _, err := NewMTP(m.m, m.cache, 64); err == nil || !strings.Contains(err.Error(), "no MTP head") {
		t.Fatalf("got %v", err)
	}
}

// TestMTPDraftAfterPlainSteps: the Generator hands the drafter, after each
// verification, every token known by then, the pending one included; after
// 16 or more steps without drafts (a length controller that keeps to zero)
// the pending states are flushed through the head, and the next Draft must
// still find the pending token unevaluated (its output row is the first
// draft) and propose what the head evaluated from scratch proposes.
func TestMTPDraftAfterPlainSteps(t *testing.T) {
	path := sharedModel(t, "glm4moe/tiny-glm4moe-F32.gguf")
	lm := load(t, path, model.Options{MTP: true}, 256)
	E := lm.m.Cfg.Embd
	toks := slices.Concat(prompt, prompt, prompt[:5]) // 37 tokens
	L := len(toks)
	row, _, hidden, _ := headFromScratch(t, lm.m, toks)
	want := argmax(row)

	for _, plain := range []int{1, 15, 16, 17, 20} {
		d, _ := newMTPDrafter(t, lm.m)
		// The prompt, then plain steps each handing over one state with
		// the tokens known after it (the pending one included).
		P := L - 1 - plain
		if err := d.Observe(1, toks[:P], 0, hidden[:P*E]); err != nil {
			t.Fatalf("%d plain steps: prompt: %v", plain, err)
		}
		for n := P; n < L-1; n++ {
			if err := d.Observe(1, toks[:n+2], n, hidden[n*E:(n+1)*E]); err != nil {
				t.Fatalf("%d plain steps: step at %d: %v", plain, n, err)
			}
		}
		reqs := []engine.DraftRequest{{Seq: 1, Toks: toks, Max: 1}}
		if err := d.Draft(reqs); err != nil {
			t.Fatalf("%d plain steps: %v", plain, err)
		}
		if len(reqs[0].Out) != 1 || reqs[0].Out[0] != want {
			t.Errorf("%d plain steps: drafted %v, the head from scratch says %d", plain, reqs[0].Out, want)
		}
		d.End(1)
	}
}

// headFromScratch evaluates m's trunk over toks[:L-1] in one batch (the
// hidden state of every position) and then its MTP head over toks[0..L-1]
// (row j with the state of j-1), on fresh caches: the head's logits and
// post-norm state at the last position, the trunk's states, and the head's
// cache (for chained drafts).
func headFromScratch(t *testing.T, m *model.Model, toks []int32) (row, hout, hidden []float32, hc *kvcache.Cache) {
	t.Helper()
	L, E, V := len(toks), m.Cfg.Embd, m.Cfg.Vocab
	cache, err := m.NewCache(model.CacheSize{Positions: 512})
	if err != nil {
		t.Fatal(err)
	}
	var bt model.Batch
	for j := 0; j < L-1; j++ {
		bt.Add(toks[j], int32(j), 0, true)
	}
	logits, hidden := make([]float32, (L-1)*V), make([]float32, (L-1)*E)
	if err := m.ForwardHidden(cache, &bt, logits, hidden); err != nil {
		t.Fatal(err)
	}
	hprev := make([]float32, L*E)
	copy(hprev[E:], hidden)
	if hc, err = m.NewMTPCache(model.CacheSize{Positions: 512}); err != nil {
		t.Fatal(err)
	}
	bt.Reset()
	for j := 0; j < L; j++ {
		bt.Add(toks[j], int32(j), 0, j == L-1)
	}
	row, hout = make([]float32, V), make([]float32, E)
	if err := m.ForwardMTPHidden(hc, &bt, hprev, row, hout); err != nil {
		t.Fatal(err)
	}
	return row, hout, hidden, hc
}

// newMTPDrafter is an MTP drafter with m's head on a fresh cache of 256
// positions, batches of 64.
func newMTPDrafter(t *testing.T, m *model.Model) (*MTP, *kvcache.Cache) {
	t.Helper()
	mc, err := m.NewMTPCache(model.CacheSize{Positions: 256})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewMTP(m, mc, 64)
	if err != nil {
		t.Fatal(err)
	}
	return d, mc
}
