package perfmodel

import (
	"math"
	"testing"
	"time"

	"braid/internal/quant"
)

// toy is a model of known bytes: layers of 1 MB attention and either a
// 2 MB dense FFN or 8 experts of 1 MB (2 used), a 4 MB head, all Q4_K.
func toy(layers int, moe bool) *Model {
	m := &Model{Name: "toy", Embd: 1024, Vocab: 1000}
	m.Head.Add(quant.Q4_K, 4e6, 8e6)
	for range layers {
		l := Layer{KVPerPos: 1024, AttnFlopsPerPos: 1000}
		l.Mix.Add(quant.Q4_K, 1e6, 2e6)
		if moe {
			l.Expert.Add(quant.Q4_K, 1e6, 2e6)
			l.Experts, l.Used = 8, 2
		} else {
			l.Dense.Add(quant.Q4_K, 2e6, 4e6)
		}
		m.Layers = append(m.Layers, l)
	}
	return m
}

func nodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: "t", Mem: 1 << 30, BW: 10e9, DecodeEff: 0.5, FLOPS: 1e12, Link: Link{BW: 1e9, Lat: 50 * time.Microsecond}}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// TestDecodeArithmetic: a single-stream decode step is the bytes over the
// streaming rate; a tensor split divides them and adds two all-reduces a
// layer, the step message and the head's candidates; a layer split adds
// one send a boundary and the tokens back.
func TestDecodeArithmetic(t *testing.T) {
	m := toy(4, false)
	const ctx = 100
	rate := 10e9 * 0.5
	kv := 4 * 1024.0 * ctx
	one, _ := EvenLayout(m, nodes(1), 1, 1, false)
	b := one.Step(m, Work{Seqs: 1, Tokens: 1, Ctx: ctx})
	want := (4*3e6+4e6)/rate + kv/rate
	if !near(b.Compute, want) || b.Exchange != 0 {
		t.Errorf("world 1: %+v, want compute %g", b, want)
	}
	tp, _ := EvenLayout(m, nodes(2), 2, 1, false)
	b = tp.Step(m, Work{Seqs: 1, Tokens: 1, Ctx: ctx})
	ar := 50e-6 + 4096/1e9
	wantEx := 8*ar + (50e-6 + 16/1e9) + 50e-6
	if !near(b.Compute, want/2) || !near(b.Exchange, wantEx) {
		t.Errorf("tp 2: %+v, want compute %g, exchanges %g", b, want/2, wantEx)
	}
	pp, _ := EvenLayout(m, nodes(2), 1, 2, false)
	b = pp.Step(m, Work{Seqs: 1, Tokens: 1, Ctx: ctx})
	if !near(b.Compute, want) || !near(b.Exchange, (50e-6+4096/1e9)+(50e-6+8/1e9)) {
		t.Errorf("pp 2: %+v", b)
	}
	// Two streams over two stages overlap: a cycle is the busier stage
	// (the last, with the head: 2 layers and 4 MB) twice.
	a1, _ := pp.Decode(m, 1, ctx)
	a2, p2 := pp.Decode(m, 2, ctx)
	busier := (2*3e6+4e6)/rate + 2*1024.0*ctx/rate
	if !near(a2, 2/(2*busier)) || a2 < 1.5*a1 || !near(a2, 2*p2) {
		t.Errorf("pp 2: 1 stream %g tok/s, 2 streams %g in all", a1, a2)
	}
}

func TestTouchedAccepted(t *testing.T) {
	if got := touched(128, 8, 1); !near(got, 8) {
		t.Errorf("one token touches %g experts, want 8", got)
	}
	if got := touched(128, 8, 4096); got < 127.9 || got > 128 {
		t.Errorf("a prefill chunk touches %g of 128", got)
	}
	if got, want := Accepted([]float64{0.87, 0.76}), 1+0.87+0.87*0.76; !near(got, want) {
		t.Errorf("Accepted %g, want %g", got, want)
	}
	// Speculation: a memory-bound verify of 3 tokens costs about one
	// step and yields Accepted tokens.
	m := toy(4, false)
	l, _ := EvenLayout(m, nodes(1), 1, 1, false)
	_, base := l.Decode(m, 1, 10)
	_, sp := l.Speculate(m, 1, 10, []float64{0.87, 0.76})
	if r := sp / base; r < 2.0 || r > Accepted([]float64{0.87, 0.76})+1e-9 {
		t.Errorf("speculation gains %.2fx, want about %.2fx", r, Accepted([]float64{0.87, 0.76}))
	}
}

// TestExpertPlacement: for one stream, whole experts per rank lose to
// experts cut along FF (the busiest rank runs more than its share, and a
// layer needs three exchanges instead of two); for a prefill chunk every
// expert is touched and the two read the same bytes.
func TestExpertPlacement(t *testing.T) {
	m := toy(4, true)
	ff, _ := EvenLayout(m, nodes(4), 4, 1, false)
	ep, _ := EvenLayout(m, nodes(4), 4, 1, true)
	_, a := ff.Decode(m, 1, 10)
	_, b := ep.Decode(m, 1, 10)
	if b >= a {
		t.Errorf("decode: whole experts %g tok/s, cut along FF %g", b, a)
	}
	w := Work{Seqs: 1, Tokens: 512}
	if fc, ec := StageTime(m, &ff.Ranks[0], w, false, 1), StageTime(m, &ep.Ranks[0], w, true, 1); math.Abs(fc/ec-1) > 0.05 {
		t.Errorf("prefill compute: FF %g s, whole %g s", fc, ec)
	}
}

// TestPrefillPipelined: over a layer split of balanced stages a prompt
// runs as PP micro-batches, so with compute-bound stages it takes about
// (2PP-1)/PP^2 of the stages one after the other (3/4 for two stages).
func TestPrefillPipelined(t *testing.T) {
	m := toy(4, false)
	m.Head = nil
	ns := nodes(2)
	for i := range ns {
		ns[i].Link = Link{BW: 1e15, Lat: time.Nanosecond}
		ns[i].FLOPS = 1e9 // compute-bound: 512 tokens x 16e6 flops a token is 8 s
	}
	one, _ := EvenLayout(m, ns[:1], 1, 1, false)
	pp, _ := EvenLayout(m, ns, 1, 2, false)
	a, b := one.Prefill(m, 512, 512), pp.Prefill(m, 512, 512)
	if r := a / b; math.Abs(r-0.75) > 0.01 {
		t.Errorf("one node %.2f tok/s, two stages %.2f: ratio %.3f, want 0.75", a, b, r)
	}
}
