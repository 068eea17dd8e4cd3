package spec

import (
	"context"
	"math"
	"slices"
	"testing"

	"braid/internal/engine"
	"braid/internal/model"
	"braid/internal/sample"
)

func sampler(t testing.TB, p sample.Params, vocab int) *sample.Sampler {
	s, err := sample.New(p, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sampled(t testing.TB, g *engine.Generator, p sample.Params, vocab int, prompt []int32, n int) []int32 {
	t.Helper()
	var got []int32
	_, err := g.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n, Sampler: sampler(t, p, vocab),
		Emit: func(id int32) error { got = append(got, id); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSeededSameWithDeterministicDrafts: at a temperature, deterministic
// drafts (n-gram, scripted) are checked against the target's own sample,
// so a seeded run gives the same tokens as without speculation.
func TestSeededSameWithDeterministicDrafts(t *testing.T) {
	lm := load(t, sharedModel(t, "stories260K/stories260K-F32.gguf"), model.Options{}, 256)
	b := engine.NewLocal(lm.m, lm.cache)
	p := sample.DefaultParams()
	p.RepeatPenalty, p.RepeatLastN = 1.1, 16
	for seed := uint64(1); seed <= 6; seed++ {
		p.Seed = seed
		want := sampled(t, engine.NewGenerator(b), p, b.Vocab(), prompt, genTokens)
		for _, s := range []engine.Spec{
			{Drafter: &NGram{Min: 1, Max: 3}, NMin: 3, NMax: 3},
			{Drafter: &scripted{prompt: prompt, ref: want, vocab: b.Vocab()}, NMin: 4, NMax: 4},
		} {
			g, err := engine.NewSpecGenerator(b, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := sampled(t, g, p, b.Vocab(), prompt, genTokens); !slices.Equal(got, want) {
				t.Errorf("seed %d, %T: got %v, want %v", seed, s.Drafter, got, want)
			}
		}
	}
}

// TestSpeculativeSamplingDistribution: with a draft model sampling its
// drafts, the tokens produced by verification follow the target's own
// distribution (stories260K F32). Thousands of seeded runs from BOS draw
// t1 from the prefill and t2, t3 from one verification of two drafts; the
// counts of t2 given t1 and of t3 given t1 t2 are compared with the
// target's exact conditional probabilities (its logits for that context,
// through the same sampler chain) by a chi-square test over all contexts
// seen often enough. Two drafters: stories260K Q4_0, close to the target
// (most drafts kept), and the random-weight tiny-llama with the same
// vocabulary (most drafts rejected: the residual distribution at work).
// The control keeps every draft of the random model whatever the target
// says (synthetic acceptance): the test must see that it is wrong.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	runs := 1500
	if testing.Short() {
		runs = 500
	}
	for _, c := range []struct {
		name, draft string
		synth       []float64
		wrong       bool
	}{
		{"close draft", "stories260K/stories260K-Q4_0.gguf", nil, false},
		{"random draft", "tiny-llama/tiny-llama-Q4_0.gguf", nil, false},
		{"control: random drafts always kept", "tiny-llama/tiny-llama-Q4_0.gguf", []float64{1, 1}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			z, st := samplingFit(t, c.draft, c.synth, runs)
			t.Logf("%s", st)
			if c.wrong {
				if z < 4 {
					t.Errorf("the control passed the fit (z %.2f): the test cannot tell a wrong distribution", z)
				}
				return
			}
			if st.AcceptedTotal() == 0 || st.AcceptedTotal() == st.DraftedTotal() {
				t.Errorf("drafts all kept or all rejected (%s): the test must see both", st)
			}
			if z > 4 {
				t.Errorf("speculative sampling does not follow the target's distribution (z %.2f)", z)
			}
		})
	}
}

// samplingFit runs the generations and returns the fit's normal score.
func samplingFit(t *testing.T, draftPath string, synth []float64, runs int) (float64, *engine.SpecStats) {
	target := load(t, sharedModel(t, "stories260K/stories260K-F32.gguf"), model.Options{}, 64)
	draft := load(t, sharedModel(t, draftPath), model.Options{}, 64)
	b := engine.NewLocal(target.m, target.cache)
	V := b.Vocab()
	d, err := NewDraftModel(draft.m, draft.cache, V)
	if err != nil {
		t.Fatal(err)
	}
	st := &engine.SpecStats{}
	g, err := engine.NewSpecGenerator(b, engine.Spec{Drafter: d, NMin: 2, NMax: 2, Stats: st, SynthRates: synth})
	if err != nil {
		t.Fatal(err)
	}
	p := sample.DefaultParams()
	p.Temperature, p.TopK, p.TopP, p.MinP = 1.5, 0, 0.98, 0
	short := []int32{1}
	counts := map[string]map[int32]int{}
	for i := range runs {
		p.Seed = uint64(1000 + i)
		// Four tokens: the first verification has both drafts.
		out := sampled(t, g, p, V, short, 4)
		if len(out) != 4 {
			t.Fatalf("run %d: %d tokens", i, len(out))
		}
		for j := 1; j < 3; j++ {
			k := string(toksBytes(out[:j]))
			if counts[k] == nil {
				counts[k] = map[int32]int{}
			}
			counts[k][out[j]]++
		}
	}
	// The exact conditionals: the target over the prompt and the context.
	var x float64
	dof, groups := 0, 0
	probs := make([]float32, V)
	pe := p
	pe.Seed = 0
	ref := sampler(t, pe, V)
	logits := make([]float32, V)
	for k, c := range counts {
		n := 0
		for _, v := range c {
			n += v
		}
		if n < 40 {
			continue
		}
		toks := append(slices.Clone(short), bytesToks(k)...)
		b.Drop(99)
		var bt model.Batch
		for j, tok := range toks {
			bt.Add(tok, int32(j), 99, j == len(toks)-1)
		}
		if err := b.Forward(&bt, engine.FullLogits, logits); err != nil {
			t.Fatal(err)
		}
		b.Drop(99)
		ref.Probs(logits, probs)
		// Bins with at least 5 expected, the rest pooled.
		var restE, restO float64
		bins := 0
		for tok, pr := range probs {
			e := float64(n) * float64(pr)
			o := float64(c[int32(tok)])
			if pr == 0 && o > 0 && synth == nil {
				t.Errorf("context %v: token %d drawn %v times, probability 0", toks, tok, o)
			}
			if e >= 5 {
				x += (o - e) * (o - e) / e
				bins++
			} else {
				restE += e
				restO += o
			}
		}
		if restE >= 5 {
			x += (restO - restE) * (restO - restE) / restE
			bins++
		}
		if bins > 1 {
			dof += bins - 1
			groups++
		}
	}
	if dof == 0 {
		t.Fatal("no context was seen often enough")
	}
	z := (math.Cbrt(x/float64(dof)) - (1 - 2/(9*float64(dof)))) / math.Sqrt(2/(9*float64(dof)))
	t.Logf("chi2 %.1f on %d dof over %d contexts (z %.2f)", x, dof, groups, z)
	return z, st
}

func toksBytes(toks []int32) []byte {
	out := make([]byte, 0, 4*len(toks))
	for _, t := range toks {
		out = append(out, byte(t), byte(t>>8), byte(t>>16), byte(t>>24))
	}
	return out
}

func bytesToks(s string) []int32 {
	var out []int32
	for i := 0; i+4 <= len(s); i += 4 {
		out = append(out, int32(s[i])|int32(s[i+1])<<8|int32(s[i+2])<<16|int32(s[i+3])<<24)
	}
	return out
}

// TestSynthRates: with --spec-synth-rates the share of steps whose draft i
// is kept is rate i, whatever the model says (here a drafter whose drafts
// are all wrong), within sampling error.
func TestSynthRates(t *testing.T) {
	lm := load(t, sharedModel(t, "stories260K/stories260K-F32.gguf"), model.Options{}, 256)
	b := engine.NewLocal(lm.m, lm.cache)
	rates := []float64{0.87, 0.76, 0.68, 0.57}
	st := &engine.SpecStats{}
	wrong := &scripted{prompt: prompt, ref: make([]int32, 300), vocab: b.Vocab()} // every draft token 0 or 1
	g, err := engine.NewSpecGenerator(b, engine.Spec{Drafter: wrong, NMin: 4, NMax: 4, SynthRates: rates, SynthSeed: 3, Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		generate(t, g, b.Vocab(), prompt, 200)
	}
	got := st.Acceptance()
	t.Logf("%s", st)
	for i, r := range rates {
		n := float64(st.Drafted[i])
		if sd := math.Sqrt(r * (1 - r) / n); math.Abs(got[i]-r) > 4*sd+0.01 {
			t.Errorf("position %d: acceptance %.3f over %v drafts, want %.2f", i+1, got[i], n, r)
		}
	}
}
