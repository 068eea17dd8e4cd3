package perfmodel

import (
	"fmt"
	"math"
	"strings"
)

// RankShare is one rank's part of the model: its stage's layers and its
// fractions of each cut dimension (1 on a rank of no tensor split).
type RankShare struct {
	Node        *Node
	First, Last int     // layers [First, Last)
	Heads       float64 // attention heads (and their weights)
	KV          float64 // KV heads: the cache it reads (1 for MLA's latent)
	FF, ExpFF   float64 // dense FFN and expert columns
	Vocab       float64 // output head rows (last stage)
	// Experts, for expert parallelism, is the fraction of whole experts
	// it holds (ExpFF is then 1).
	Experts float64
	Last0   bool // last stage: runs the head
	MTP     bool // holds the MTP head (rank 0)
}

// Layout is a split: PP stages of TP ranks, Ranks[stage*TP+t].
type Layout struct {
	TP, PP int
	// EP places whole experts per rank within a stage (all-to-all) instead
	// of cutting every expert's FF columns.
	EP    bool
	Ranks []RankShare
}

// Name is the split in --split's words.
func (l *Layout) Name() string {
	s := ""
	switch {
	case l.TP == 1 && l.PP == 1:
		s = "single"
	case l.PP == 1:
		s = fmt.Sprintf("tp %d", l.TP)
	case l.TP == 1:
		s = fmt.Sprintf("pp %d", l.PP)
	default:
		s = fmt.Sprintf("tp %d x pp %d", l.TP, l.PP)
	}
	if l.EP {
		s += " (experts whole per rank)"
	}
	return s
}

// EvenLayout cuts m evenly: layers in PP near-equal stages, every
// dimension in TP equal parts. Plans from a GGUF use the planner's real
// shards instead (cmd/braid); this is for models and tests without one.
func EvenLayout(m *Model, nodes []Node, tp, pp int, ep bool) (*Layout, error) {
	if tp < 1 || pp < 1 || tp*pp != len(nodes) {
		return nil, fmt.Errorf("perfmodel: tp %d x pp %d over %d nodes", tp, pp, len(nodes))
	}
	if pp > len(m.Layers) {
		return nil, fmt.Errorf("perfmodel: %d stages for %d layers", pp, len(m.Layers))
	}
	l := &Layout{TP: tp, PP: pp, EP: ep && tp > 1}
	f := 1 / float64(tp)
	for s := 0; s < pp; s++ {
		first, last := s*len(m.Layers)/pp, (s+1)*len(m.Layers)/pp
		for t := 0; t < tp; t++ {
			r := RankShare{Node: &nodes[s*tp+t], First: first, Last: last, Heads: f, KV: f, FF: f, ExpFF: f, Vocab: f,
				Last0: s == pp-1, MTP: s == 0 && t == 0}
			if l.EP {
				r.ExpFF, r.Experts = 1, f
			}
			l.Ranks = append(l.Ranks, r)
		}
	}
	return l, nil
}

// Work is a step's tokens: Seqs sequences, each Tokens new tokens
// (decode 1, a verify step k+1, a prefill chunk its length), at Ctx
// positions of context each.
type Work struct {
	Seqs, Tokens, Ctx int
}

// touched is the expected number of distinct experts of n, used k a
// token, that tokens tokens route to (independent, uniform routing).
func touched(n, k, tokens int) float64 {
	if n == 0 {
		return 0
	}
	return float64(n) * (1 - math.Pow(1-float64(k)/float64(n), float64(tokens)))
}

// partsTime is the roofline time of weights ps at fraction f of their
// bytes, multiplied by tokens tokens: the longer of streaming and
// arithmetic.
func partsTime(n *Node, share int, ps Parts, f, tokens float64) (mem, comp float64) {
	for _, p := range ps {
		mem += float64(p.Bytes) * f / n.StreamRate(p.Type.String(), share)
		comp += 2 * float64(p.Params) * f * tokens / n.FlopRate(p.Type.String(), share)
	}
	return mem, comp
}

// StageTime is one rank's compute time for work w over its layers: per
// layer the longer of its bytes (weights, cache) over the streaming rate
// and its arithmetic over the flops rate.
//
// share is how many ranks run at once on the rank's host (StreamRate).
func StageTime(m *Model, r *RankShare, w Work, ep bool, share int) float64 {
	n := r.Node
	tok := float64(w.Seqs * w.Tokens)
	var total float64
	for li := r.First; li < r.Last; li++ {
		ly := &m.Layers[li]
		var mem, comp float64
		add := func(a, b float64) { mem += a; comp += b }
		add(partsTime(n, share, ly.Mix, r.Heads, tok))
		add(partsTime(n, share, ly.Dense, r.FF, tok))
		add(partsTime(n, share, ly.Shared, r.ExpFF, tok))
		if ly.Experts > 0 {
			if ep {
				// Whole experts: the rank runs those of its own that the
				// step's tokens chose; the busiest rank sets the pace,
				// taken as its mean share plus one standard deviation
				// (about the square root of a Poisson count: the
				// imbalance of a few tokens' picks), as many products.
				own := int(math.Round(float64(ly.Experts) * r.Experts))
				used := touched(ly.Experts, ly.Used, int(tok)) * r.Experts
				busiest := math.Min(float64(own), used+math.Sqrt(used))
				a, _ := partsTime(n, share, ly.Expert, busiest, 0)
				_, b := partsTime(n, share, ly.Expert, 1, math.Min(tok*float64(ly.Used)*r.Experts+math.Sqrt(tok*float64(ly.Used)*r.Experts), tok*float64(ly.Used)))
				add(a, b)
			} else {
				a, _ := partsTime(n, share, ly.Expert, r.ExpFF*touched(ly.Experts, ly.Used, int(tok)), 0)
				_, b := partsTime(n, share, ly.Expert, r.ExpFF, tok*float64(ly.Used))
				add(a, b)
			}
		}
		// The cache: each sequence reads its own, once for all its new
		// tokens; attention's arithmetic grows with every token.
		pos := float64(w.Ctx) + float64(w.Tokens-1)/2
		if ly.Window > 0 {
			pos = math.Min(pos, float64(ly.Window))
		}
		attnPos := pos
		if ly.TopK > 0 {
			attnPos = math.Min(pos, float64(ly.TopK))
		}
		seqs := float64(w.Seqs)
		kvShare := r.KV
		if ly.Latent {
			kvShare = 1
		}
		kvBytes := seqs * (float64(ly.KVPerPos)*attnPos*kvShare + float64(ly.IndexPerPos)*pos)
		kvBytes += seqs * 2 * float64(ly.State) * r.Heads
		mem += kvBytes / n.StreamRate("F16", share)
		comp += tok * float64(ly.AttnFlopsPerPos) * attnPos * r.Heads / n.FlopRate("F16", share)
		ops := float64(ly.Ops)
		if ly.Experts > 0 {
			ops += 3 * touched(ly.Experts, ly.Used, int(tok))
		}
		total += math.Max(mem, comp) + ops*n.OpCost(share)
	}
	if r.Last0 {
		mem, comp := partsTime(n, share, m.Head, r.Vocab, float64(w.Seqs))
		total += math.Max(mem, comp) + n.OpCost(share)
	}
	return total
}

// AllReduce is the time of one all-reduce of bytes over tp ranks on link
// k: one-shot (every rank sends its partial to every peer: a latency and
// tp-1 messages through its link) or, when faster, a ring (2(tp-1) steps
// of a latency and bytes/tp), as braid picks by size.
func AllReduce(k Link, tp int, bytes float64) float64 {
	if tp <= 1 {
		return 0
	}
	lat := k.Lat.Seconds()
	first := lat
	if k.AR > 0 {
		first = k.AR.Seconds()
	}
	one := first + float64(tp-1)*bytes/k.BW
	ring := 2 * float64(tp-1) * (lat + bytes/float64(tp)/k.BW)
	return math.Min(one, ring)
}

// Send is one message of bytes on link k.
func Send(k Link, bytes float64) float64 { return k.Lat.Seconds() + bytes/k.BW }

// slowestLink is the link of the ranks of stage s with the most latency.
func (l *Layout) stageLink(s int) Link {
	k := l.Ranks[s*l.TP].Node.Link
	for t := 1; t < l.TP; t++ {
		o := l.Ranks[s*l.TP+t].Node.Link
		k.Lat, k.AR = max(k.Lat, o.Lat), max(k.AR, o.AR)
		k.BW = math.Min(k.BW, o.BW)
	}
	return k
}

// Breakdown is one step's time by cause, seconds.
type Breakdown struct {
	Compute, Exchange float64
}

// StepParts is a stage's time for work w: the slowest of its tensor
// ranks' compute, plus its layers' exchanges: tensor split, two
// all-reduces of the hidden state a layer (attention and FFN outputs);
// with whole experts, the FFN's becomes a dispatch and a combine
// (all-to-all, each a latency and the tokens' hidden states to the
// ranks holding their experts).
//
// all says every stage runs at once (a pipeline over several groups), so
// that ranks of other stages on the same host share it too.
func (l *Layout) StageParts(m *Model, s int, w Work, all bool) Breakdown {
	var b Breakdown
	for t := 0; t < l.TP; t++ {
		r := &l.Ranks[s*l.TP+t]
		b.Compute = math.Max(b.Compute, StageTime(m, r, w, l.EP, l.share(s, r.Node.Host, all)))
	}
	if l.TP > 1 {
		k := l.stageLink(s)
		hidden := float64(m.Embd*4) * float64(w.Seqs*w.Tokens)
		r := &l.Ranks[s*l.TP]
		for li := r.First; li < r.Last; li++ {
			b.Exchange += AllReduce(k, l.TP, hidden)
			if l.EP && m.Layers[li].Experts > 0 {
				// Dispatch and combine: each token goes to the ranks of
				// its experts (at most tp-1 others).
				per := hidden * math.Min(float64(m.Layers[li].Used), float64(l.TP-1)) / float64(l.TP)
				b.Exchange += 2 * (k.Lat.Seconds() + per/k.BW)
			} else {
				b.Exchange += AllReduce(k, l.TP, hidden)
			}
		}
		if r.Last0 {
			// The vocabulary shards' best candidates to rank 0.
			b.Exchange += Send(k, 8*float64(w.Seqs)*float64(l.TP))
		}
		// The step's message from the coordinator to its peers.
		b.Exchange += k.Lat.Seconds()
	}
	return b
}

// share counts the ranks on host that run at once with stage s's: its
// own tensor group's, or with all, every rank's.
func (l *Layout) share(s int, host string, all bool) int {
	if host == "" {
		return 1
	}
	n := 0
	for i := range l.Ranks {
		if (all || i/l.TP == s) && l.Ranks[i].Node.Host == host {
			n++
		}
	}
	return max(n, 1)
}

// Step is the time of one step of work w through every stage, one after
// the other, with the hidden state sent across each stage boundary and
// the sampled tokens back to rank 0.
func (l *Layout) Step(m *Model, w Work) Breakdown {
	var b Breakdown
	for s := 0; s < l.PP; s++ {
		p := l.StageParts(m, s, w, false)
		b.Compute += p.Compute
		b.Exchange += p.Exchange
		if s > 0 {
			b.Exchange += Send(l.stageLink(s), float64(m.Embd*4)*float64(w.Seqs*w.Tokens))
		}
	}
	if l.PP > 1 {
		b.Exchange += Send(l.stageLink(l.PP-1), 8*float64(w.Seqs))
	}
	return b
}

// Decode is streams sequences decoding together at ctx: the aggregate
// and per-stream tok/s. One stage (tensor split or none) steps them all
// at once; a layer split overlaps min(streams, PP) groups, one per
// stage, so that a cycle takes the longer of the stages' work on every
// group and one group's path through all of them.
func (l *Layout) Decode(m *Model, streams, ctx int) (agg, per float64) {
	return l.decodeTokens(m, streams, ctx, 1, 1)
}

// decodeTokens is Decode with each step carrying tokens per sequence
// and yielding gain accepted tokens per sequence (speculation).
func (l *Layout) decodeTokens(m *Model, streams, ctx, tokens int, gain float64) (agg, per float64) {
	groups := 1
	if l.PP > 1 {
		groups = min(streams, l.PP)
	}
	g := (streams + groups - 1) / groups
	w := Work{Seqs: g, Tokens: tokens, Ctx: ctx}
	path := l.Step(m, w)
	cycle := path.Compute + path.Exchange
	if groups > 1 {
		// Every stage busy at once: a cycle is each stage's work on every
		// group, the busiest stage setting the pace, or one group's path
		// through all of them, at the rates of ranks sharing their hosts.
		var busiest, slow float64
		for s := 0; s < l.PP; s++ {
			p := l.StageParts(m, s, w, true)
			busiest = math.Max(busiest, p.Compute+p.Exchange)
			slow += p.Compute + p.Exchange
		}
		cycle = math.Max(float64(groups)*busiest, slow+path.Exchange-sumExchange(l, m, w))
	}
	per = gain / cycle
	return per * float64(streams), per
}

// sumExchange is the stages' own exchanges in a step (Step's less its
// boundary sends).
func sumExchange(l *Layout, m *Model, w Work) float64 {
	var x float64
	for s := 0; s < l.PP; s++ {
		x += l.StageParts(m, s, w, false).Exchange
	}
	return x
}

// Prefill is one sequence's prompt of prompt tokens, in chunks of at most
// batch: tok/s. Over a layer split each chunk runs as PP micro-batches
// (as braid's ranks cut it: cluster/rank.go), so a stage works on the
// next one while the later stages work on the one before; the stages then
// run at once, sharing their hosts.
func (l *Layout) Prefill(m *Model, prompt, batch int) float64 {
	var t float64
	for done := 0; done < prompt; done += batch {
		n := min(batch, prompt-done)
		if l.PP == 1 {
			s := l.Step(m, Work{Seqs: 1, Tokens: n, Ctx: done})
			t += s.Compute + s.Exchange
			continue
		}
		parts := min(l.PP, n)
		fin := make([]float64, l.PP) // when each stage finished its last micro-batch
		var ready float64
		at := done
		for j := 0; j < parts; j++ {
			tok := n / parts
			if j < n%parts {
				tok++
			}
			ready = 0
			for s := 0; s < l.PP; s++ {
				p := l.StageParts(m, s, Work{Seqs: 1, Tokens: tok, Ctx: at}, true)
				arrive := ready
				if s > 0 {
					arrive += Send(l.stageLink(s), float64(m.Embd*4*tok))
				}
				fin[s] = math.Max(fin[s], arrive) + p.Compute + p.Exchange
				ready = fin[s]
			}
			at += tok
		}
		t += ready + Send(l.stageLink(l.PP-1), 8)
	}
	return float64(prompt) / t
}

// Accepted is the expected tokens a verify step yields with draft
// acceptance rates a (a[i]: the chance that draft i+1 is accepted when
// the ones before it were): 1 + a1 + a1a2 + ...
func Accepted(a []float64) float64 {
	e, p := 1.0, 1.0
	for _, x := range a {
		p *= x
		e += p
	}
	return e
}

// Speculate is Decode with len(rates) drafts a step: each verify step
// carries k+1 tokens a sequence (weights read once for them) and yields
// Accepted(rates); drafting costs k passes of the MTP head on rank 0
// when the model has one (else the drafts are taken as free, as n-gram
// lookups are).
func (l *Layout) Speculate(m *Model, streams, ctx int, rates []float64) (agg, per float64) {
	k := len(rates)
	agg, per = l.decodeTokens(m, streams, ctx, k+1, Accepted(rates))
	if m.MTP != nil && k > 0 {
		n := l.Ranks[0].Node
		mem, comp := partsTime(n, 1, m.MTP, 1, float64(streams))
		draft := float64(k) * math.Max(mem, comp)
		step := Accepted(rates) / per
		per = Accepted(rates) / (step + draft)
		agg = per * float64(streams)
	}
	return agg, per
}

// DecodeBytes is the weight bytes one decode step of seqs sequences reads
// at world 1 (experts: those the tokens touch).
func (m *Model) DecodeBytes(seqs int) int64 {
	n := m.Head.Bytes()
	for _, l := range m.Layers {
		n += l.Mix.Bytes() + l.Dense.Bytes() + l.Shared.Bytes() + int64(touched(l.Experts, l.Used, seqs)*float64(l.Expert.Bytes()))
	}
	return n
}

// ParseSplit reads "single", "tp N", "pp N", "tp T x pp P" for n nodes.
func ParseSplit(s string, n int) (tp, pp int, err error) {
	switch {
	case s == "single":
		tp, pp = 1, 1
	case strings.HasPrefix(s, "tp ") && strings.Contains(s, " x pp "):
		_, err = fmt.Sscanf(s, "tp %d x pp %d", &tp, &pp)
	case strings.HasPrefix(s, "tp "):
		pp = 1
		_, err = fmt.Sscanf(s, "tp %d", &tp)
	case strings.HasPrefix(s, "pp "):
		tp = 1
		_, err = fmt.Sscanf(s, "pp %d", &pp)
	default:
		err = fmt.Errorf("not single, tp N, pp N or tp T x pp P")
	}
	if err == nil && (tp < 1 || pp < 1 || tp*pp != n) {
		err = fmt.Errorf("tp %d x pp %d is not %d nodes", tp, pp, n)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("perfmodel: split %q: %w", s, err)
	}
	return tp, pp, nil
}
