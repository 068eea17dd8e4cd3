package plan

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/modelgen"
	"braid/internal/quant"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want Mode
	}{
		{"tensor", 3, Mode{3, 1}},
		{"layer", 3, Mode{1, 3}},
		{"", 2, Mode{1, 2}},
		{"tensor=2,layer=2", 4, Mode{2, 2}},
		{"tensor=2", 6, Mode{2, 3}},
		{"layer=3", 6, Mode{2, 3}},
	} {
		got, err := ParseMode(tc.s, tc.n)
		if err != nil || got != tc.want {
			t.Errorf("ParseMode(%q, %d) = %v, %v; want %v", tc.s, tc.n, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"tensor=2,layer=2", 3, "needs 4 ranks"},
		{"tensor=4", 6, "needs 4 ranks"},
		{"pipeline=2", 2, "unknown part"},
		{"tensor=x", 2, "is not tensor=N"},
		{"tensor=0", 2, "is not tensor=N"},
	} {
		if _, err := ParseMode(tc.s, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMode(%q, %d): got %v, want an error containing %q", tc.s, tc.n, err, tc.want)
		}
	}
}

// gen writes and opens a random model: 8 KV heads (32 query heads of 8
// values), 6 layers, Q8_0.
func gen(t *testing.T) *gguf.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	cfg := modelgen.Config{Arch: "llama", Layers: 6, Embd: 256, FF: 320, Heads: 32, KVHeads: 8, HeadDim: 8, Vocab: 400, Type: quant.Q8_0}
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

func ranks(mem ...int64) []Rank {
	out := make([]Rank, len(mem))
	for i, m := range mem {
		out[i] = Rank{Name: "r" + string(rune('a'+i)), Mem: m}
	}
	return out
}

func TestTensorPlan(t *testing.T) {
	f := gen(t)
	const GiB = 1 << 30
	p, err := Make(f, Request{Ranks: ranks(GiB, GiB, GiB), Mode: Mode{3, 1}, Ctx: 1024, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.SplitBy != "even weights (memory available within 25 %)" {
		t.Errorf("split by %q", p.SplitBy)
	}
	// Free memory that moves a little between loads does not move the
	// plan (the workers' shard caches are keyed by it).
	q, err := Make(f, Request{Ranks: ranks(GiB+12345678, GiB-7654321, GiB+1), Mode: Mode{3, 1}, Ctx: 1024, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Ranks {
		if a, b := p.Ranks[i].Shard.String(), q.Ranks[i].Shard.String(); a != b {
			t.Errorf("rank %d: %s with equal memory, %s with a few MB more or less", i, a, b)
		}
	}
	// attn_output is Q8_0 with 32-column blocks = 4 heads of 8; the KV
	// groups are 4 heads too, so 8 KV heads split 3+3+2 untouched.
	var kv []int
	for _, r := range p.Ranks {
		kv = append(kv, r.Shard.KVHeads())
		if !r.Fits() {
			t.Errorf("rank %d does not fit 1 GiB", r.Rank)
		}
		// The KV cache holds the rank's KV heads for 2 x 1024 positions.
		want := int64(2 * 2 * 6 * 2048 * r.Shard.KVHeads() * 8)
		if r.KV != want {
			t.Errorf("rank %d: KV cache %d bytes, want %d", r.Rank, r.KV, want)
		}
	}
	if kv[0] != 3 || kv[1] != 3 || kv[2] != 2 {
		t.Errorf("KV heads per rank %v, want 3+3+2", kv)
	}
	table := p.Table()
	for _, want := range []string{"rank", "kv heads", "[0,3)", "[3,6)", "[6,8)", "tensor (3 ranks)", "context 1024 x 2"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// 320 FFN columns = 10 blocks of 32: 4+3+3, not the even 107 columns:
	// the rounding is noted.
	if !strings.Contains(table, "FFN columns cut at [0 128 224 320], not [0 107 214 320]") {
		t.Errorf("table lacks the FFN rounding note:\n%s", table)
	}

	// Uneven weights, in the order written.
	p, err = Make(f, Request{Ranks: ranks(0, 0), Mode: Mode{2, 1}, Weights: []float64{1, 3}, Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	if p.Ranks[0].Shard.KVHeads() != 2 || p.Ranks[1].Shard.KVHeads() != 6 {
		t.Errorf("1:3 split gives KV heads %d and %d", p.Ranks[0].Shard.KVHeads(), p.Ranks[1].Shard.KVHeads())
	}
	if p.Ranks[0].Weights >= p.Ranks[1].Weights {
		t.Errorf("the lighter rank holds %d bytes, the heavier %d", p.Ranks[0].Weights, p.Ranks[1].Weights)
	}
	if !strings.Contains(p.Table(), "?") {
		t.Error("unknown memory is not shown as unknown")
	}
}

func TestLayerPlanByMemory(t *testing.T) {
	f := gen(t)
	const GiB = 1 << 30
	p, err := Make(f, Request{Ranks: ranks(GiB, 2*GiB), Mode: Mode{1, 2}, Ctx: 128})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p.Ranks[0].Shard, p.Ranks[1].Shard; a.First != 0 || a.Last != 2 || b.First != 2 || b.Last != 6 {
		t.Errorf("layers by memory 1:2: [%d,%d) and [%d,%d), want [0,2) and [2,6)", a.First, a.Last, b.First, b.Last)
	}
	// Combined: stages of two tensor-parallel ranks.
	p, err = Make(f, Request{Ranks: ranks(0, 0, 0, 0), Mode: Mode{2, 2}, Ctx: 128})
	if err != nil {
		t.Fatal(err)
	}
	if p.SplitBy != "even weights" {
		t.Errorf("split by %q, want even", p.SplitBy)
	}
	for i, r := range p.Ranks {
		if r.Stage != i/2 || r.Shard.TPRank != i%2 || r.Shard.Last-r.Shard.First != 3 {
			t.Errorf("rank %d: stage %d, %s", i, r.Stage, r.Shard.String())
		}
	}
}

func TestPlanRefusals(t *testing.T) {
	f := gen(t)
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"more stages than layers", Request{Ranks: ranks(0, 0, 0, 0, 0, 0, 0), Mode: Mode{1, 7}, Ctx: 64}, "7 pipeline stages for 6 layers"},
		{"weights for other ranks", Request{Ranks: ranks(0, 0), Mode: Mode{2, 1}, Weights: []float64{1}, Ctx: 64}, "1 weights for 2 ranks"},
		{"zero weight", Request{Ranks: ranks(0, 0), Mode: Mode{2, 1}, Weights: []float64{1, 0}, Ctx: 64}, "weight 1 is 0"},
		// 32 heads in 4-head steps and 10 FFN blocks over 11 ranks: the
		// last rank gets nothing.
		{"rank with nothing to do", Request{Ranks: ranks(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), Mode: Mode{11, 1}, Ctx: 64}, "rank 10 with no attention heads and no FFN columns"},
		{"mode for other ranks", Request{Ranks: ranks(0, 0), Mode: Mode{3, 1}, Ctx: 64}, "does not cover 2 ranks"},
		{"no context", Request{Ranks: ranks(0), Mode: Mode{1, 1}}, "context 0"},
	} {
		p, err := Make(f, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) || p != nil {
			t.Errorf("%s: got %v, want an error containing %q and no plan", tc.name, err, tc.want)
		}
	}
}

func TestPlanDoesNotFit(t *testing.T) {
	f := gen(t)
	// Measure the need, then give rank 1 a byte less than it needs.
	p, err := Make(f, Request{Ranks: ranks(0, 0), Mode: Mode{1, 2}, Ctx: 4096, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	need0, need1 := p.Ranks[0].Total(), p.Ranks[1].Total()
	p, err = Make(f, Request{Ranks: ranks(need0, need1-1), Mode: Mode{1, 2}, Weights: []float64{1, 1}, Ctx: 4096, Parallel: 4})
	var fe *FitError
	if !errors.As(err, &fe) || !errors.Is(err, ErrDoesNotFit) || p == nil {
		t.Fatalf("got %v, want a FitError with the plan", err)
	}
	msg := err.Error()
	for _, want := range []string{"rank 0 (ra): needs " + Bytes(need0), ": fits", "rank 1 (rb): needs " + Bytes(need1), "DOES NOT FIT", "KV cache"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if p.Ranks[0].Fits() != true || p.Ranks[1].Fits() != false || !strings.Contains(p.Table(), "NO") {
		t.Errorf("fits: %v %v\n%s", p.Ranks[0].Fits(), p.Ranks[1].Fits(), p.Table())
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 29: "1.5 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
