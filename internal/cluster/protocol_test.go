package cluster

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/model"
	"braid/internal/sample"
)

func TestStepRoundTrip(t *testing.T) {
	m := stepMsg{Step: 42, Full: true, TopK: 7, Parts: 3, Ops: []kvOp{{opDrop, 3, 0, 0}, {opCopyPrefix, 5, 4, 17}, {opTruncate, 5, 0, 9}, {opReserve, 6, 0, 100}}}
	m.Batch.Add(10, 0, 1, false)
	m.Batch.Add(11, 1, 1, true)
	m.Batch.Add(-5, 7, -1, true)
	p := appendStep(nil, &m)
	var got stepMsg
	if p[0] != kindStep {
		t.Fatalf("kind %d", p[0])
	}
	if err := parseStep(p[1:], &got); err != nil {
		t.Fatal(err)
	}
	if got.Step != 42 || !got.Full || got.TopK != 7 || got.Parts != 3 || len(got.Ops) != 4 || got.Ops[1] != m.Ops[1] {
		t.Errorf("header %+v", got)
	}
	for i := range m.Batch.Tokens {
		if got.Batch.Tokens[i] != m.Batch.Tokens[i] || got.Batch.Pos[i] != m.Batch.Pos[i] || got.Batch.Seq[i] != m.Batch.Seq[i] || got.Batch.Output[i] != m.Batch.Output[i] {
			t.Errorf("token %d differs", i)
		}
	}
	for cut := 0; cut < len(p)-1; cut++ {
		if err := parseStep(p[1:1+cut], &got); err == nil {
			t.Errorf("a step cut to %d bytes parsed", cut)
		}
	}
	m.Parts = 0
	if err := parseStep(appendStep(nil, &m)[1:], &got); err == nil || !strings.Contains(err.Error(), "0 micro-batches") {
		t.Errorf("a step in 0 micro-batches: %v", err)
	}
}

// TestStepSpecFlags: a verification step's flags (exact columns, hidden
// states) round-trip; a step without them is byte for byte the frame of
// before they existed (flags 0 or 1, nothing after parts), and a flag bit
// no peer knows, or an exact bound of 0, is refused as malformed.
func TestStepSpecFlags(t *testing.T) {
	m := stepMsg{Step: 9, TopK: 2, Parts: 1, Hidden: true, Exact: 5}
	m.Batch.Add(3, 0, 0, true)
	var got stepMsg
	if err := parseStep(appendStep(nil, &m)[1:], &got); err != nil {
		t.Fatal(err)
	}
	if !got.Hidden || got.Exact != 5 || got.Full || got.TopK != 2 || len(got.Batch.Tokens) != 1 {
		t.Errorf("got %+v", got)
	}
	plain := stepMsg{Step: 9, Full: true, TopK: 2, Parts: 1}
	plain.Batch.Add(3, 0, 0, true)
	p := appendStep(nil, &plain)
	// u8 kind | u64 step | u8 flags | u32 topk | u32 parts | u32 ops | u32 tokens | 13 bytes per token
	if p[9] != 1 || len(p) != 1+8+1+4+4+4+4+13 {
		t.Errorf("a plain step is %d bytes with flags %#x; want the frame without the speculative fields", len(p), p[9])
	}
	if err := parseStep(p[1:], &got); err != nil || got.Hidden || got.Exact != 0 || !got.Full {
		t.Errorf("plain step: %+v, %v", got, err)
	}
	bad := append([]byte(nil), p...)
	bad[9] = 1 << 5
	if err := parseStep(bad[1:], &got); err == nil || !strings.Contains(err.Error(), "step flags 0x20") {
		t.Errorf("an unknown flag bit: %v", err)
	}
	zero := appendStep(nil, &m)
	zero[1+8+1+4+4] = 0 // the exact bound
	if err := parseStep(zero[1:], &got); err == nil || !strings.Contains(err.Error(), "exact columns 0") {
		t.Errorf("exact columns 0: %v", err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	for _, r := range []result{
		{Mode: resNone, Rows: 3, Compute: 5},
		{Mode: resCands, Rows: 2, Width: 2, Cands: []model.Candidate{{ID: 1, Logit: 2}, {ID: 3, Logit: 4}, {ID: 5, Logit: 6}, {ID: 7, Logit: -8}}},
		{Mode: resFull, Rows: 1, Width: 3, Logits: []float32{1, 2, 3}},
		{Mode: resCands, Rows: 2, Width: 1, Cands: []model.Candidate{{ID: 1, Logit: 2}, {ID: 3, Logit: 4}}, HiddenWidth: 3, Hidden: []float32{1, 2, 3, 4, 5, -6}},
		{Mode: resNone, Rows: 1, HiddenWidth: 2, Hidden: []float32{7, 8}},
	} {
		p := appendResult(nil, &r)
		var got result
		if err := parseResult(p[1:], &got); err != nil {
			t.Fatal(err)
		}
		if got.Mode != r.Mode || got.Rows != r.Rows || got.Width != r.Width || len(got.Cands) != len(r.Cands) || len(got.Logits) != len(r.Logits) ||
			got.HiddenWidth != r.HiddenWidth || !slices.Equal(got.Hidden, r.Hidden) {
			t.Errorf("got %+v, want %+v", got, r)
		}
		if err := parseResult(p[1:len(p)-1], &got); err == nil && len(p) > 22 {
			t.Errorf("a result one byte short parsed (mode %d)", r.Mode)
		}
	}
}

func FuzzParseStep(f *testing.F) {
	m := stepMsg{Step: 1, TopK: 1, Parts: 1, Ops: []kvOp{{opDrop, 1, 0, 0}}}
	m.Batch.Add(1, 0, 0, true)
	f.Add(appendStep(nil, &m)[1:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		var s stepMsg
		if err := parseStep(p, &s); err != nil {
			return
		}
		if n := len(s.Batch.Tokens); len(s.Batch.Pos) != n || len(s.Batch.Seq) != n || len(s.Batch.Output) != n {
			t.Fatal("inconsistent batch accepted")
		}
		if q := appendStep(nil, &s); string(q[1:]) != string(p) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzParseResult(f *testing.F) {
	f.Add(appendResult(nil, &result{Mode: resCands, Rows: 1, Width: 1, Cands: []model.Candidate{{ID: 1, Logit: 1}}})[1:])
	f.Add(appendResult(nil, &result{Mode: resFull, Rows: 1, Width: 2, Logits: []float32{1, 2}})[1:])
	f.Add(appendResult(nil, &result{Mode: resCands, Rows: 1, Width: 1, Cands: []model.Candidate{{ID: 1, Logit: 1}}, HiddenWidth: 2, Hidden: []float32{1, 2}})[1:])
	f.Fuzz(func(t *testing.T, p []byte) {
		var r result
		if err := parseResult(p, &r); err != nil {
			return
		}
		if r.Mode == resCands && len(r.Cands) != r.Rows*r.Width || r.Mode == resFull && len(r.Logits) != r.Rows*r.Width ||
			len(r.Hidden) != r.Rows*r.HiddenWidth {
			t.Fatal("inconsistent result accepted")
		}
	})
}

// TestCandidatesSampleExactly checks engine.NeedFor against the sampler:
// rows holding only the merged per-rank candidates (-Inf elsewhere) give
// the same token as the full row, for the same seed, whenever NeedFor asks
// for candidates.
func TestCandidatesSampleExactly(t *testing.T) {
	const vocab, ranks = 300, 3
	rng := rand.New(rand.NewPCG(1, 2))
	params := []sample.Params{}
	greedy := sample.DefaultParams()
	greedy.Temperature = 0
	params = append(params, greedy)
	topk := sample.DefaultParams()
	topk.TopK, topk.Seed = 20, 7
	params = append(params, topk)
	pen := sample.DefaultParams()
	pen.TopK, pen.RepeatPenalty, pen.PresencePenalty, pen.RepeatLastN, pen.Seed = 5, 1.3, 0.5, 8, 11
	params = append(params, pen)
	greedyPen := pen
	greedyPen.Temperature = 0
	params = append(params, greedyPen)
	history := []int32{}
	for i := 0; i < 12; i++ {
		history = append(history, int32(rng.IntN(vocab)))
	}
	for pi, p := range params {
		out := engine.NeedFor(p, len(history), false)
		if out.Full {
			t.Fatalf("params %d: NeedFor asks for full rows", pi)
		}
		for trial := 0; trial < 50; trial++ {
			row := make([]float32, vocab)
			for i := range row {
				row[i] = float32(rng.NormFloat64() * 3)
			}
			// The penalised tokens are among the best, the hard case.
			for _, h := range history {
				row[h] = 8 + float32(rng.Float64())
			}
			var lists [][]model.Candidate
			for r := 0; r < ranks; r++ {
				lo, hi := r*vocab/ranks, (r+1)*vocab/ranks
				lists = append(lists, model.TopK(nil, row[lo:hi], int32(lo), out.TopK))
			}
			merged := model.MergeTopK(nil, out.TopK, lists...)
			cand := make([]float32, vocab)
			engine.FillCandidates(cand, merged)
			a, _ := sample.New(p, vocab)
			b, _ := sample.New(p, vocab)
			for _, h := range history {
				a.Accept(h)
				b.Accept(h)
			}
			if x, y := a.Sample(row), b.Sample(cand); x != y {
				t.Fatalf("params %d trial %d: full row samples %d, candidates (k=%d) %d", pi, trial, x, out.TopK, y)
			}
		}
	}
	// What candidates cannot serve asks for full rows.
	hot := sample.DefaultParams()
	hot.TopK = 0
	boost := sample.DefaultParams()
	boost.RepeatPenalty, boost.RepeatLastN = 0.8, 64
	for _, p := range []sample.Params{hot, boost} {
		if !engine.NeedFor(p, 10, false).Full {
			t.Errorf("NeedFor(%+v) does not ask for full rows", p)
		}
	}
	if !engine.NeedFor(greedy, 0, true).Full {
		t.Error("logprobs do not ask for full rows")
	}
}

// TestSpinUS checks how a coordinator's Spin travels to its workers: the
// default as 0 (the worker keeps its own), never as negative, and no
// positive spin rounding down to "default".
func TestSpinUS(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{-1, -1},
		{-time.Second, -1},
		{time.Nanosecond, 1},
		{500 * time.Microsecond, 500},
		{2 * time.Millisecond, 2000},
	} {
		if got := spinUS(c.d); got != c.want {
			t.Errorf("spinUS(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}
