package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"braid/internal/sample"
)

// chiSquareZ is the Wilson-Hilferty normal score of a chi-square statistic
// x with k degrees of freedom: above 4 the fit is rejected at p < 4e-5.
func chiSquareZ(x float64, k int) float64 {
	f := float64(k)
	return (math.Cbrt(x/f) - (1 - 2/(9*f))) / math.Sqrt(2/(9*f))
}

func softmax(logits []float32) []float32 {
	mx := logits[0]
	for _, l := range logits {
		mx = max(mx, l)
	}
	out := make([]float32, len(logits))
	var sum float64
	for i, l := range logits {
		e := math.Exp(float64(l - mx))
		out[i] = float32(e)
		sum += e
	}
	for i := range out {
		out[i] = float32(float64(out[i]) / sum)
	}
	return out
}

// TestRejectionSampling: drafts drawn from q and put through one position
// of speculative sampling come out distributed as the target's p, whatever
// q is, and are kept with probability sum(min(p, q)).
func TestRejectionSampling(t *testing.T) {
	const V, trials = 12, 200000
	rng := rand.New(rand.NewPCG(7, 8))
	params := sample.DefaultParams()
	params.Temperature, params.TopK, params.TopP, params.MinP = 1, 0, 1, 0
	for c, shape := range []string{"close", "far", "disjoint-support", "identical"} {
		logits := make([]float32, V)
		qlog := make([]float32, V)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
			switch shape {
			case "close":
				qlog[i] = logits[i] + float32(0.3*rng.NormFloat64())
			case "far":
				qlog[i] = float32(2 * rng.NormFloat64())
			case "disjoint-support":
				qlog[i] = logits[i]
				if i < V/2 {
					qlog[i] = -100 // q misses half of p's tokens
				}
			case "identical":
				qlog[i] = logits[i]
			}
		}
		p, q := softmax(logits), softmax(qlog)
		params.Seed = uint64(c)
		smp, err := sample.New(params, V)
		if err != nil {
			t.Fatal(err)
		}
		dparams := params
		dparams.Seed += 100
		draw, _ := sample.New(dparams, V)
		s := &specState{pprobs: make([]float32, V), resid: make([]float32, V)}
		counts := make([]float64, V)
		kept := 0
		for range trials {
			d := draw.DrawWeights(q)
			tok, ok := s.rejectionSample(smp, logits, q, d)
			counts[tok]++
			if ok {
				kept++
				if tok != d {
					t.Fatalf("kept draft %d but returned %d", d, tok)
				}
			}
		}
		var x float64
		k := 0
		for i := range counts {
			e := trials * float64(p[i])
			if e < 5 {
				continue
			}
			x += (counts[i] - e) * (counts[i] - e) / e
			k++
		}
		var overlap float64
		for i := range p {
			overlap += math.Min(float64(p[i]), float64(q[i]))
		}
		rate := float64(kept) / trials
		z := chiSquareZ(x, k-1)
		t.Logf("%s: chi2 %.1f on %d dof (z %.2f), kept %.4f, sum min(p,q) %.4f", shape, x, k-1, z, rate, overlap)
		if z > 4 {
			t.Errorf("%s: output not distributed as p: chi2 %.1f on %d dof", shape, x, k-1)
		}
		if math.Abs(rate-overlap) > 5*math.Sqrt(overlap*(1-overlap)/trials)+1e-3 {
			t.Errorf("%s: kept %.4f of the drafts, want sum min(p,q) = %.4f", shape, rate, overlap)
		}
	}
}

// TestProbsMatchesSample: Sampler.Probs is the distribution Sample draws
// from, for the whole chain (penalties, top-k, top-p, min-p, temperature).
func TestProbsMatchesSample(t *testing.T) {
	const V, trials = 10, 100000
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, V)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	p := sample.DefaultParams()
	p.Temperature, p.TopK, p.TopP, p.MinP = 0.7, 6, 0.9, 0.05
	p.RepeatPenalty, p.RepeatLastN = 1.3, 8
	smp, err := sample.New(p, V)
	if err != nil {
		t.Fatal(err)
	}
	smp.Accept(3)
	smp.Accept(5)
	probs := make([]float32, V)
	smp.Probs(logits, probs)
	counts := make([]float64, V)
	for range trials {
		counts[smp.Sample(logits)]++
	}
	var x float64
	k := 0
	for i := range counts {
		e := trials * float64(probs[i])
		if e == 0 {
			if counts[i] > 0 {
				t.Errorf("token %d sampled %v times but has probability 0", i, counts[i])
			}
			continue
		}
		x += (counts[i] - e) * (counts[i] - e) / e
		k++
	}
	if z := chiSquareZ(x, k-1); z > 4 {
		t.Errorf("Sample does not draw from Probs: chi2 %.1f on %d dof", x, k-1)
	}
	p.Temperature = 0
	g, _ := sample.New(p, V)
	g.Probs(logits, probs)
	if probs[g.Sample(logits)] != 1 {
		t.Errorf("greedy Probs is not one-hot at the greedy token: %v", probs)
	}
}

// TestLengthControl: the controller settles where expected tokens per
// second is best for a drafter with a given acceptance and cost.
func TestLengthControl(t *testing.T) {
	for _, c := range []struct {
		name   string
		accept float64 // conditional acceptance of every position
		cost   float64 // a draft's share of a plain step
		fixed  float64 // what any drafts cost (the drafter's call, exact verification), same unit
		lo, hi int     // where it must settle
	}{
		{"good cheap drafter", 0.9, 0.05, 0, 6, 8},
		{"useless drafter", 0.02, 0.2, 0, 0, 1},
		{"middling", 0.6, 0.15, 0, 1, 3},
		{"expensive", 0.8, 0.8, 0, 0, 1},
		// E(k) <= 1.67 for a step of at least 1.65: none pays, though
		// a line through k = 0 and the drafted steps says they are cheap.
		{"dear to start", 0.4, 0.05, 0.6, 0, 0},
		{"dear to start, good", 0.9, 0.05, 0.6, 6, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			lc := NewLengthControl(0, 8)
			hist := make([]int, 9)
			for step := 0; step < 2000; step++ {
				k := lc.Next()
				a := 0
				for a < k && rng.Float64() < c.accept {
					a++
				}
				ms := 1 + c.cost*float64(k)
				if k > 0 {
					ms += c.fixed
				}
				d := time.Duration(float64(time.Millisecond) * ms * (1 + 0.05*rng.NormFloat64()))
				lc.Update(k, a, d)
				if step >= 1000 {
					hist[k]++
				}
			}
			best, bestN := 0, 0
			for k, n := range hist {
				if n > bestN {
					best, bestN = k, n
				}
			}
			t.Logf("lengths chosen in the last 1000 steps: %v (mode %d)", hist, best)
			if best < c.lo || best > c.hi {
				t.Errorf("settled on %d drafts, want %d..%d", best, c.lo, c.hi)
			}
		})
	}
	if got := NewLengthControl(3, 3).Next(); got != 3 {
		t.Errorf("fixed length 3: Next() = %d", got)
	}
}

func TestSynthCond(t *testing.T) {
	got := synthCond([]float64{0.87, 0.76, 0.68, 0.57}, nil)
	want := []float64{0.87, 0.76 / 0.87, 0.68 / 0.76, 0.57 / 0.68}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("synthCond = %v, want %v", got, want)
		}
	}
	if got := synthCond([]float64{0.5, 0.9, 0}, nil); got[1] != 1 || got[2] != 0 {
		t.Errorf("rates that rise are capped at 1: %v", got)
	}
}
