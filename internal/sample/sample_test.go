package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// logitsOf turns probabilities into logits (ln p), so filters can be checked
// against hand-computed probabilities.
func logitsOf(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, x := range p {
		l[i] = float32(math.Log(x))
	}
	return l
}

func params(mod func(*Params)) Params {
	p := Params{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, Seed: 1}
	if mod != nil {
		mod(&p)
	}
	return p
}

func mustNew(t testing.TB, p Params, vocab int) *Sampler {
	t.Helper()
	s, err := New(p, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dist returns the final distribution the sampler would draw from.
func (s *Sampler) dist(logits []float32) map[int32]float64 {
	pen := s.pen[:0]
	if s.prepPenalties() {
		pen = s.pen
		for i := range pen {
			pen[i].logit = s.penalize(logits[pen[i].id], pen[i].count)
		}
	}
	return softmaxMap(s.filter(s.prepare(logits, pen)))
}

func softmaxMap(c []cand) map[int32]float64 {
	mx := maxLogit(c)
	var sum float64
	for _, x := range c {
		sum += math.Exp(float64(x.logit - mx))
	}
	m := make(map[int32]float64, len(c))
	for _, x := range c {
		m[x.id] = math.Exp(float64(x.logit-mx)) / sum
	}
	return m
}

func checkDist(t *testing.T, got, want map[int32]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("kept %d tokens %v, want %d %v", len(got), got, len(want), want)
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok || math.Abs(g-w) > tol {
			t.Fatalf("p(%d) = %v (present %v), want %v; got %v", id, g, ok, w, got)
		}
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name  string
		mod   func(*Params)
		field string // "" means valid
	}{
		{"defaults", nil, ""},
		{"greedy", func(p *Params) { p.Temperature = 0 }, ""},
		{"negative temperature", func(p *Params) { p.Temperature = -0.5 }, "temperature -0.5"},
		{"nan temperature", func(p *Params) { p.Temperature = nan }, "temperature NaN"},
		{"negative top_k", func(p *Params) { p.TopK = -1 }, "top_k -1"},
		{"zero top_p", func(p *Params) { p.TopP = 0 }, "top_p 0"},
		{"top_p above 1", func(p *Params) { p.TopP = 1.5 }, "top_p 1.5"},
		{"nan top_p", func(p *Params) { p.TopP = nan }, "top_p NaN"},
		{"negative min_p", func(p *Params) { p.MinP = -0.1 }, "min_p -0.1"},
		{"min_p above 1", func(p *Params) { p.MinP = 2 }, "min_p 2"},
		{"zero repeat penalty", func(p *Params) { p.RepeatPenalty = 0 }, "repeat_penalty 0"},
		{"inf frequency", func(p *Params) { p.FrequencyPenalty = float32(math.Inf(1)) }, "frequency_penalty +Inf"},
		{"nan presence", func(p *Params) { p.PresencePenalty = nan }, "presence_penalty NaN"},
		{"negative presence ok", func(p *Params) { p.PresencePenalty = -2 }, ""},
		{"window -1 ok", func(p *Params) { p.RepeatLastN = -1 }, ""},
		{"window -2", func(p *Params) { p.RepeatLastN = -2 }, "repeat_last_n -2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			if c.mod != nil {
				c.mod(&p)
			}
			_, err := New(p, 10)
			if c.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("error %v, want one naming %q", err, c.field)
			}
		})
	}
	if _, err := New(DefaultParams(), 0); err == nil || !strings.Contains(err.Error(), "vocab size 0") {
		t.Fatalf("vocab 0: %v", err)
	}
}

func TestGreedy(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cases := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"single", []float32{3}, 0},
		{"max last", []float32{1, 2, 3}, 2},
		{"tie lowest id", []float32{1, 3, 0, 3, 3}, 1},
		{"all equal", []float32{5, 5, 5, 5}, 0},
		{"all -inf", []float32{-inf, -inf, -inf}, 0},
		{"nan ignored", []float32{nan, 1, nan, 2, nan}, 3},
		{"nan first then tie", []float32{nan, -1, -1}, 1},
		{"+inf wins", []float32{1, inf, 2}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, params(func(p *Params) { p.Temperature = 0 }), len(c.logits))
			if got := s.Sample(c.logits); got != c.want {
				t.Fatalf("Sample = %d, want %d", got, c.want)
			}
			ids := make([]int32, len(c.logits))
			for i := range ids {
				ids[i] = int32(len(ids) - 1 - i) // reversed: ties must still go to the lowest id
			}
			rl := slices.Clone(c.logits)
			slices.Reverse(rl)
			if got := s.SampleCandidates(ids, rl); got != c.want {
				t.Fatalf("SampleCandidates = %d, want %d", got, c.want)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	base := logitsOf(0.4, 0.3, 0.2, 0.1)
	cases := []struct {
		name string
		mod  func(*Params)
		want map[int32]float64
	}{
		{"none", nil, map[int32]float64{0: .4, 1: .3, 2: .2, 3: .1}},
		{"top_k 2", func(p *Params) { p.TopK = 2 }, map[int32]float64{0: 4. / 7, 1: 3. / 7}},
		{"top_k 1", func(p *Params) { p.TopK = 1 }, map[int32]float64{0: 1}},
		{"top_k above vocab", func(p *Params) { p.TopK = 10 }, map[int32]float64{0: .4, 1: .3, 2: .2, 3: .1}},
		{"top_p 0.3 keeps crossing token", func(p *Params) { p.TopP = 0.3 }, map[int32]float64{0: 1}},
		{"top_p 0.5", func(p *Params) { p.TopP = 0.5 }, map[int32]float64{0: 4. / 7, 1: 3. / 7}},
		{"top_p 0.75", func(p *Params) { p.TopP = 0.75 }, map[int32]float64{0: 4. / 9, 1: 3. / 9, 2: 2. / 9}},
		{"min_p 0.6", func(p *Params) { p.MinP = 0.6 }, map[int32]float64{0: 4. / 7, 1: 3. / 7}},
		{"min_p 0.45", func(p *Params) { p.MinP = 0.45 }, map[int32]float64{0: 4. / 9, 1: 3. / 9, 2: 2. / 9}},
		{"min_p 1", func(p *Params) { p.MinP = 1 }, map[int32]float64{0: 1}},
		{"temperature 0.5 squares", func(p *Params) { p.Temperature = 0.5 }, map[int32]float64{0: 16. / 30, 1: 9. / 30, 2: 4. / 30, 3: 1. / 30}},
		{"temperature 2 roots", func(p *Params) { p.Temperature = 2 }, func() map[int32]float64 {
			r := []float64{math.Sqrt(.4), math.Sqrt(.3), math.Sqrt(.2), math.Sqrt(.1)}
			s := r[0] + r[1] + r[2] + r[3]
			return map[int32]float64{0: r[0] / s, 1: r[1] / s, 2: r[2] / s, 3: r[3] / s}
		}()},
		// top_p sees the distribution renormalised over top_k's survivors:
		// .444 .333 .222, so 0.8 needs all three and 0.7 only two.
		{"top_k 3 then top_p 0.8", func(p *Params) { p.TopK = 3; p.TopP = 0.8 }, map[int32]float64{0: 4. / 9, 1: 3. / 9, 2: 2. / 9}},
		{"top_k 3 then top_p 0.7", func(p *Params) { p.TopK = 3; p.TopP = 0.7 }, map[int32]float64{0: 4. / 7, 1: 3. / 7}},
		// top_p and min_p act at temperature 1, before the temperature.
		{"top_p 0.75 then temperature 0.5", func(p *Params) { p.TopP = 0.75; p.Temperature = 0.5 }, map[int32]float64{0: 16. / 29, 1: 9. / 29, 2: 4. / 29}},
		{"min_p 0.6 then temperature 2", func(p *Params) { p.MinP = 0.6; p.Temperature = 2 }, func() map[int32]float64 {
			a, b := math.Sqrt(.4), math.Sqrt(.3)
			return map[int32]float64{0: a / (a + b), 1: b / (a + b)}
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Shuffle the ids so nothing depends on the best token being first.
			perm := []int{2, 0, 3, 1}
			logits := make([]float32, 4)
			for i, j := range perm {
				logits[j] = base[i]
			}
			want := make(map[int32]float64)
			for id, p := range c.want {
				want[int32(perm[id])] = p
			}
			s := mustNew(t, params(c.mod), 4)
			checkDist(t, s.dist(logits), want, 1e-6)
		})
	}
}

func TestPenalties(t *testing.T) {
	cases := []struct {
		name    string
		mod     func(*Params)
		history []int32
		logits  []float32
		want    []float32
	}{
		{
			name:    "repeat divides positive, multiplies negative",
			mod:     func(p *Params) { p.RepeatPenalty = 2 },
			history: []int32{1, 2, 2},
			logits:  []float32{1, 3, -1, 0.5},
			want:    []float32{1, 1.5, -2, 0.5},
		},
		{
			name:    "frequency and presence",
			mod:     func(p *Params) { p.FrequencyPenalty = 0.5; p.PresencePenalty = 0.25 },
			history: []int32{0, 0, 0, 3},
			logits:  []float32{2, 2, 2, 2},
			want:    []float32{2 - 1.5 - 0.25, 2, 2, 2 - 0.5 - 0.25},
		},
		{
			name:    "all three (llama.cpp order: repeat first)",
			mod:     func(p *Params) { p.RepeatPenalty = 2; p.FrequencyPenalty = 0.5; p.PresencePenalty = 0.25 },
			history: []int32{2, 2, 3},
			logits:  []float32{1, 1, 2, -1},
			want:    []float32{1, 1, 2.0/2 - 1 - 0.25, -2 - 0.5 - 0.25},
		},
		{
			name:    "window keeps only the last N",
			mod:     func(p *Params) { p.PresencePenalty = 1; p.RepeatLastN = 2 },
			history: []int32{0, 1, 2, 3},
			logits:  []float32{0, 0, 0, 0},
			want:    []float32{0, 0, -1, -1},
		},
		{
			name:    "whole history",
			mod:     func(p *Params) { p.FrequencyPenalty = 1; p.RepeatLastN = -1 },
			history: []int32{0, 1, 2, 3, 0, 0},
			logits:  []float32{0, 0, 0, 0},
			want:    []float32{-3, -1, -1, -1},
		},
		{
			name:    "window 0 disables",
			mod:     func(p *Params) { p.PresencePenalty = 1; p.RepeatLastN = 0 },
			history: []int32{0, 1},
			logits:  []float32{0, 0, 0, 0},
			want:    []float32{0, 0, 0, 0},
		},
		{
			name:    "negative presence boosts",
			mod:     func(p *Params) { p.PresencePenalty = -1 },
			history: []int32{3, 99, -1}, // out-of-vocabulary ids are ignored
			logits:  []float32{0, 0, 0, 0},
			want:    []float32{0, 0, 0, 1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, params(c.mod), len(c.logits))
			for _, id := range c.history {
				s.Accept(id)
			}
			pen := s.pen[:0]
			if s.prepPenalties() {
				pen = s.pen
				for i := range pen {
					pen[i].logit = s.penalize(c.logits[pen[i].id], pen[i].count)
				}
			}
			cs, _ := s.prepare(c.logits, pen)
			got := make([]float32, len(cs))
			for _, x := range cs {
				got[x.id] = x.logit
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("penalised logits %v, want %v", got, c.want)
			}
		})
	}

	// Greedy sees penalties: the repeated raw winner loses.
	s := mustNew(t, params(func(p *Params) { p.Temperature = 0; p.RepeatPenalty = 1.5 }), 3)
	logits := []float32{1, 1.4, 1.2}
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("before history: %d", got)
	}
	s.Accept(1)
	if got := s.Sample(logits); got != 2 {
		t.Fatalf("after history: %d, want 2", got)
	}
	if got := s.SampleCandidates([]int32{2, 1}, []float32{1.2, 1.4}); got != 2 {
		t.Fatalf("candidates after history: %d, want 2", got)
	}
	if !slices.Equal(logits, []float32{1, 1.4, 1.2}) {
		t.Fatalf("Sample modified its input: %v", logits)
	}
	s.Reset()
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("after Reset: %d, want 1", got)
	}
}

func TestEmpirical(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Params)
		want []float64 // by id, over logitsOf(.4,.3,.2,.1,...)
	}{
		{"plain", nil, []float64{.4, .3, .2, .1}},
		{"top_k 3", func(p *Params) { p.TopK = 3 }, []float64{4. / 9, 3. / 9, 2. / 9, 0}},
		{"top_p 0.5 temperature 0.5", func(p *Params) { p.TopP = 0.5; p.Temperature = 0.5 }, []float64{16. / 25, 9. / 25, 0, 0}},
		{"defaults", func(p *Params) { *p = DefaultParams(); p.Seed = 9 }, func() []float64 {
			// top_k 40 and top_p .95 keep all four, min_p .05 too; temperature .8.
			w := []float64{math.Pow(.4, 1.25), math.Pow(.3, 1.25), math.Pow(.2, 1.25), math.Pow(.1, 1.25)}
			s := w[0] + w[1] + w[2] + w[3]
			for i := range w {
				w[i] /= s
			}
			return w
		}()},
	}
	const n = 20000
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, params(c.mod), 4)
			logits := logitsOf(.4, .3, .2, .1)
			counts := make([]int, 4)
			for range n {
				counts[s.Sample(logits)]++
			}
			for id, p := range c.want {
				got := float64(counts[id]) / n
				sigma := math.Sqrt(p * (1 - p) / n)
				if math.Abs(got-p) > 5*sigma+1e-9 {
					t.Errorf("token %d: frequency %.4f, want %.4f (5 sigma = %.4f)", id, got, p, 5*sigma)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	logits := make([]float32, 5000)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	run := func(seed uint64) []int32 {
		p := DefaultParams()
		p.Seed = seed
		p.TopK = 0
		p.Temperature = 1.5
		p.MinP = 0
		p.RepeatPenalty = 1.1
		s := mustNew(t, p, len(logits))
		out := make([]int32, 200)
		for i := range out {
			out[i] = s.Sample(logits)
			s.Accept(out[i])
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different tokens")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave identical 200-token sequences")
	}
}

// refDist is the chain written as plainly as possible (full sort), the oracle
// for the optimised paths.
func refDist(p Params, logits []float32, hist []int32) map[int32]float64 {
	l := slices.Clone(logits)
	if p.penaltiesOn() {
		if p.RepeatLastN > 0 && len(hist) > p.RepeatLastN {
			hist = hist[len(hist)-p.RepeatLastN:]
		}
		count := map[int32]int32{}
		for _, id := range hist {
			count[id]++
		}
		for id, n := range count {
			x := l[id]
			if x <= 0 {
				x *= p.RepeatPenalty
			} else {
				x /= p.RepeatPenalty
			}
			l[id] = x - float32(n)*p.FrequencyPenalty - p.PresencePenalty
		}
	}
	c := make([]cand, len(l))
	for i, x := range l {
		c[i] = cand{int32(i), x}
	}
	slices.SortFunc(c, cmpCand)
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	if p.TopP < 1 {
		var sum, cum float64
		for _, x := range c {
			sum += math.Exp(float64(x.logit - c[0].logit))
		}
		for i, x := range c {
			cum += math.Exp(float64(x.logit-c[0].logit)) / sum
			if cum >= float64(p.TopP) {
				c = c[:i+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		thr := c[0].logit + float32(math.Log(float64(p.MinP)))
		i := 1
		for i < len(c) && c[i].logit >= thr {
			i++
		}
		c = c[:i]
	}
	for i := range c {
		c[i].logit /= p.Temperature
	}
	return softmaxMap(c)
}

func TestAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		vocab := 1 + r.IntN(3000)
		logits := make([]float32, vocab)
		scale := []float64{0.5, 2, 8}[r.IntN(3)]
		for i := range logits {
			// Coarse values make ties frequent.
			logits[i] = float32(math.Round(r.NormFloat64()*scale*4) / 4)
		}
		p := params(nil)
		p.Temperature = []float32{0.3, 1, 1.7}[r.IntN(3)]
		p.TopK = []int{0, 0, 1, 5, 40, 500}[r.IntN(6)]
		p.TopP = []float32{1, 1, 0.5, 0.9, 0.99}[r.IntN(5)]
		p.MinP = []float32{0, 0, 0.05, 0.3}[r.IntN(4)]
		if r.IntN(2) == 0 {
			p.RepeatPenalty = 1.3
			p.FrequencyPenalty = []float32{0, 0.2, -0.3}[r.IntN(3)]
			p.PresencePenalty = []float32{0, 0.5, -0.5}[r.IntN(3)]
			p.RepeatLastN = []int{-1, 8, 64}[r.IntN(3)]
		}
		s := mustNew(t, p, vocab)
		var hist []int32
		for range r.IntN(100) {
			id := int32(r.IntN(vocab))
			hist = append(hist, id)
			s.Accept(id)
		}
		checkDist(t, s.dist(logits), refDist(p, logits, hist), 1e-5)
		before := slices.Clone(logits)
		s.Sample(logits)
		if !slices.Equal(before, logits) {
			t.Fatalf("trial %d: Sample modified its input", trial)
		}
	}
}

// TestCandidatesExact checks the documented exactness: ranks sending their
// local top K+P raw logits give the same tokens as sampling the full row.
func TestCandidatesExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const vocab, ranks = 3001, 3
	for trial := range 40 {
		p := params(nil)
		p.Seed = uint64(trial)
		p.TopK = []int{1, 10, 40}[trial%3]
		p.TopP = []float32{1, 0.9}[trial%2]
		p.MinP = []float32{0, 0.05}[trial/2%2]
		p.Temperature = []float32{0, 0.7, 1.3}[trial/4%3]
		pen := trial%5 != 0
		if pen {
			p.RepeatPenalty = 1.5
			p.FrequencyPenalty = 0.3
			p.PresencePenalty = 0.2
		}
		full := mustNew(t, p, vocab)
		part := mustNew(t, p, vocab)
		logits := make([]float32, vocab)
		for step := range 30 {
			for i := range logits {
				logits[i] = float32(math.Round(r.NormFloat64() * 8))
			}
			var ids []int32
			var ls []float32
			for rk := range ranks {
				lo, hi := rk*vocab/ranks, (rk+1)*vocab/ranks
				// P: distinct penalised tokens in this slice.
				penal := 0
				if pen {
					seen := map[int32]bool{}
					for i := 0; i < full.histLen; i++ {
						id := full.hist[i]
						if int(id) >= lo && int(id) < hi && !seen[id] {
							seen[id] = true
							penal++
						}
					}
				}
				c := make([]cand, 0, hi-lo)
				for i := lo; i < hi; i++ {
					c = append(c, cand{int32(i), logits[i]})
				}
				slices.SortFunc(c, cmpCand)
				c = c[:min(len(c), p.TopK+penal)]
				for _, x := range c {
					ids = append(ids, x.id)
					ls = append(ls, x.logit)
				}
			}
			// Rank order must not matter.
			r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i]; ls[i], ls[j] = ls[j], ls[i] })
			a := full.Sample(logits)
			b := part.SampleCandidates(ids, ls)
			if a != b {
				t.Fatalf("trial %d step %d (%+v): Sample %d, SampleCandidates %d", trial, step, p, a, b)
			}
			full.Accept(a)
			part.Accept(b)
		}
	}
}

func TestTopLogprobs(t *testing.T) {
	logits := logitsOf(.1, .4, .2, .3)
	logits = append(logits, float32(math.NaN()), float32(math.Log(.2))) // NaN skipped; tie with id 2
	// Normaliser: .1+.4+.2+.3+.2 = 1.2
	top, logZ := TopLogprobs(logits, 3, nil)
	if math.Abs(float64(logZ)-math.Log(1.2)) > 1e-6 {
		t.Fatalf("logZ %v, want %v", logZ, math.Log(1.2))
	}
	want := []Logprob{{1, float32(math.Log(.4 / 1.2))}, {3, float32(math.Log(.3 / 1.2))}, {2, float32(math.Log(.2 / 1.2))}}
	if len(top) != len(want) {
		t.Fatalf("got %v", top)
	}
	for i := range want {
		if top[i].ID != want[i].ID || math.Abs(float64(top[i].Logprob-want[i].Logprob)) > 1e-6 {
			t.Fatalf("got %v, want %v", top, want)
		}
	}
	if top, _ := TopLogprobs(logits, 0, nil); len(top) != 0 {
		t.Fatalf("k=0 gave %v", top)
	}
	if top, _ := TopLogprobs(logits[:2], 5, nil); len(top) != 2 || top[0].ID != 1 {
		t.Fatalf("k>len gave %v", top)
	}
	// Merging per-slice normalisers gives the full one.
	m := MergeLogSumExp(LogSumExp(logits[:3]), LogSumExp(logits[3:]))
	if math.Abs(float64(m-logZ)) > 1e-6 {
		t.Fatalf("merged %v, full %v", m, logZ)
	}
	dst := make([]Logprob, 0, 8)
	if a := testing.AllocsPerRun(10, func() { TopLogprobs(logits, 3, dst) }); a != 0 {
		t.Fatalf("TopLogprobs allocates %v", a)
	}
}

func bigLogits(n int) []float32 {
	r := rand.New(rand.NewPCG(5, 6))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
	}
	return l
}

var chains = []struct {
	name string
	mod  func(*Params)
}{
	{"greedy", func(p *Params) { p.Temperature = 0 }},
	{"greedy_penalties", func(p *Params) { p.Temperature = 0; p.RepeatPenalty = 1.1; p.PresencePenalty = 0.5 }},
	{"default", func(p *Params) { *p = DefaultParams() }},
	{"default_penalties", func(p *Params) { *p = DefaultParams(); p.RepeatPenalty = 1.1; p.FrequencyPenalty = 0.2 }},
	{"top_p_only", func(p *Params) { p.TopP = 0.9; p.Temperature = 0.7 }},
	{"min_p_only", func(p *Params) { p.MinP = 0.05 }},
	{"unfiltered", nil},
	{"top_k_1000", func(p *Params) { p.TopK = 1000; p.TopP = 0.95 }},
}

func TestNoAllocs(t *testing.T) {
	const vocab = 152064
	logits := bigLogits(vocab)
	ids := make([]int32, 120)
	ls := make([]float32, 120)
	for i := range ids {
		ids[i] = int32(i * 1000)
		ls[i] = logits[i*1000]
	}
	for _, c := range chains {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, params(c.mod), vocab)
			for i := range 100 {
				s.Accept(int32(i * 7))
			}
			s.Sample(logits) // first call may size buffers
			s.SampleCandidates(ids, ls)
			if a := testing.AllocsPerRun(5, func() { s.Sample(logits) }); a != 0 {
				t.Errorf("Sample allocates %v per call", a)
			}
			if a := testing.AllocsPerRun(5, func() { s.SampleCandidates(ids, ls) }); a != 0 {
				t.Errorf("SampleCandidates allocates %v per call", a)
			}
		})
	}
}

func BenchmarkSample(b *testing.B) {
	const vocab = 152064
	logits := bigLogits(vocab)
	for _, c := range chains {
		b.Run(c.name, func(b *testing.B) {
			s := mustNew(b, params(c.mod), vocab)
			for i := range 64 {
				s.Accept(int32(i * 13))
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(logits)
			}
		})
	}
}

func BenchmarkTopLogprobs(b *testing.B) {
	logits := bigLogits(152064)
	dst := make([]Logprob, 0, 20)
	for b.Loop() {
		TopLogprobs(logits, 20, dst)
	}
}
