// Package plan decides which rank of a cluster holds which slice of a model
// and whether each rank can hold it, before anything is loaded.
//
// A plan is a pure function of the model (its hyper-parameters and tensor
// types and sizes) and of facts about the ranks (memory available, in rank
// order, the order the user wrote): the same inputs give the same plan on
// every node. The slicing itself is model.Split; this package adds the
// sizes (weights, KV cache, scratch) and the checks.
package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"braid/internal/gguf"
	"braid/internal/model"
)

// Rank is what the planner knows about one rank.
type Rank struct {
	// Name says which rank this is to a person: an address or "local".
	Name string
	// Mem is the memory available to the rank in bytes; 0 means unknown,
	// and then the fit is not checked.
	Mem int64
}

// Mode is how the ranks split the model: PP pipeline stages of TP
// tensor-parallel ranks each (rank = stage*TP + t).
type Mode struct{ TP, PP int }

// ParseMode reads --split for n ranks: "tensor" (all ranks in one
// tensor-parallel group), "layer" (one stage per rank), or
// "tensor=T,layer=L" (T*L must be n; either part may be left out and is
// then inferred).
func ParseMode(s string, n int) (Mode, error) {
	if n < 1 {
		return Mode{}, fmt.Errorf("plan: %d ranks", n)
	}
	switch s {
	case "tensor":
		return Mode{TP: n, PP: 1}, nil
	case "layer", "":
		return Mode{TP: 1, PP: n}, nil
	}
	m := Mode{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		x, err := strconv.Atoi(v)
		if !ok || err != nil || x < 1 {
			return Mode{}, fmt.Errorf("plan: --split %q: %q is not tensor=N or layer=N with N >= 1 (or give tensor, layer)", s, part)
		}
		switch k {
		case "tensor":
			m.TP = x
		case "layer":
			m.PP = x
		default:
			return Mode{}, fmt.Errorf("plan: --split %q: unknown part %q (tensor=N, layer=N)", s, k)
		}
	}
	switch {
	case m.TP == 0:
		m.TP = n / m.PP
	case m.PP == 0:
		m.PP = n / m.TP
	}
	if m.TP*m.PP != n {
		return Mode{}, fmt.Errorf("plan: --split %q needs %d ranks (tensor %d x layer %d), but there are %d", s, m.TP*m.PP, m.TP, m.PP, n)
	}
	return m, nil
}

func (m Mode) String() string {
	switch {
	case m.TP == 1 && m.PP == 1:
		return "none (one rank)"
	case m.PP == 1:
		return fmt.Sprintf("tensor (%d ranks)", m.TP)
	case m.TP == 1:
		return fmt.Sprintf("layer (%d stages)", m.PP)
	}
	return fmt.Sprintf("tensor=%d,layer=%d", m.TP, m.PP)
}

// Request is everything a plan depends on besides the model.
type Request struct {
	Ranks []Rank
	Mode  Mode
	// Weights are --tensor-split, one per rank in rank order. Nil sizes
	// the split by memory available (in whole GiB) when every rank's is
	// known and the most is over 1.25 times the least, else evenly: like
	// nodes get like shards, and a plan does not change because free
	// memory moved a little between two loads.
	Weights []float64
	// Ctx is the context of one sequence in tokens, Parallel the number of
	// sequences the KV cache holds at once (0 = 1).
	Ctx, Parallel int
	// MaxBatch is the most tokens one step evaluates (0 = 512); Threads
	// each rank's threads (0 = 1). Both size the scratch.
	MaxBatch, Threads int
	// KVF32 keeps the KV cache in float32 instead of float16.
	KVF32 bool
	// MTP has rank 0 also hold the model's MTP head whole (--spec mtp
	// over a split): the NextN block, the output head over every logit,
	// the head's KV cache and scratch (model.MTPHeadBytes).
	MTP bool
}

// RankPlan is one rank's part.
type RankPlan struct {
	Rank  int
	Name  string
	Stage int
	Shard model.Shard
	// Weights, KV and Scratch are bytes: the weight slices the rank keeps
	// resident (mapped or copied), its KV cache for Ctx x Parallel
	// positions, and its step buffers plus one row of logits per sequence.
	Weights, KV, Scratch int64
	Mem                  int64 // available, 0 = unknown
	// State is the part of KV that the recurrent layers' state slots
	// take (live states and their snapshots, model.StateSlotsPerSeq per
	// sequence), Slots their count and SlotBytes one slot on this rank.
	State, SlotBytes int64
	Slots            int
	// MTP is the part of Weights, KV and Scratch that the MTP head takes
	// (rank 0 with Request.MTP; zero elsewhere).
	MTP model.MTPHeadSize
}

// Total is the rank's memory need.
func (r *RankPlan) Total() int64 { return r.Weights + r.KV + r.Scratch }

// Fits says whether the rank's need fits its memory (true when unknown).
func (r *RankPlan) Fits() bool { return r.Mem <= 0 || r.Total() <= r.Mem }

// Plan is the whole cluster's plan.
type Plan struct {
	Config        model.Config
	Mode          Mode
	Ctx, Parallel int
	KVF32         bool
	// SplitBy says what sized the split: "--tensor-split W,...",
	// "memory available" or "even".
	SplitBy string
	Ranks   []RankPlan
	// Notes say what the split decided that the request did not: block
	// rounding, replicated KV heads.
	Notes []string
}

// FitError is a plan that some rank cannot hold; it names every rank with
// its numbers.
type FitError struct{ Plan *Plan }

func (e *FitError) Error() string {
	var b strings.Builder
	b.WriteString("plan: the model does not fit:")
	for i := range e.Plan.Ranks {
		r := &e.Plan.Ranks[i]
		verdict := "fits"
		if !r.Fits() {
			verdict = "DOES NOT FIT"
		}
		fmt.Fprintf(&b, "\n  rank %d (%s): needs %s (weights %s, KV cache %s, scratch %s), has %s: %s", r.Rank, r.Name,
			Bytes(r.Total()), Bytes(r.Weights), Bytes(r.KV), Bytes(r.Scratch), memString(r.Mem), verdict)
	}
	return b.String()
}

// ErrDoesNotFit is wrapped by every FitError.
var ErrDoesNotFit = errors.New("plan: the model does not fit")

func (e *FitError) Unwrap() error { return ErrDoesNotFit }

// Make plans model f for the request. A plan that cannot be honoured (bad
// weights, more stages than layers, a rank with nothing to do) is refused
// with the reason; a plan that some rank cannot hold is returned together
// with a *FitError naming every rank's numbers.
func Make(f *gguf.Model, req Request) (*Plan, error) {
	c, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	head := func(sh *model.Shard, sz model.CacheSize, maxBatch, threads int) (model.MTPHeadSize, error) {
		return model.MTPHeadBytes(f, c, sh, sz, maxBatch, threads)
	}
	return Compute(c, model.ColumnBlocks(f, c), func(sh *model.Shard) (int64, error) {
		return model.WeightBytes(f, c, sh)
	}, head, req)
}

// HeadBytes sizes the MTP head on a rank holding a shard (model.MTPHeadBytes).
type HeadBytes func(sh *model.Shard, sz model.CacheSize, maxBatch, threads int) (model.MTPHeadSize, error)

// Compute is Make over the model's configuration, the block types of its
// row-parallel weights and functions that size a shard's weights and, for
// Request.MTP, the MTP head.
func Compute(c *model.Config, blk model.Blocks, weightBytes func(*model.Shard) (int64, error), headBytes HeadBytes, req Request) (*Plan, error) {
	n := len(req.Ranks)
	if n == 0 {
		return nil, errors.New("plan: no ranks")
	}
	if req.Mode.TP < 1 || req.Mode.PP < 1 || req.Mode.TP*req.Mode.PP != n {
		return nil, fmt.Errorf("plan: split %s does not cover %d ranks", req.Mode, n)
	}
	if req.Ctx < 1 {
		return nil, fmt.Errorf("plan: context %d: need at least one token", req.Ctx)
	}
	par := max(req.Parallel, 1)
	batch := req.MaxBatch
	if batch <= 0 {
		batch = 512
	}
	threads := max(req.Threads, 1)
	p := &Plan{Config: *c, Mode: req.Mode, Ctx: req.Ctx, Parallel: par, KVF32: req.KVF32}
	weights := req.Weights
	switch {
	case weights != nil:
		if len(weights) != n {
			return nil, fmt.Errorf("plan: --tensor-split has %d weights for %d ranks", len(weights), n)
		}
		p.SplitBy = "--tensor-split " + joinFloats(weights)
	case knownMem(req.Ranks) && memUneven(req.Ranks):
		weights = make([]float64, n)
		for i, r := range req.Ranks {
			// Whole GiB: what is free moves a little from one load to
			// the next, and the plan (which keys the workers' shard
			// caches) should not move with it.
			weights[i] = float64(max(r.Mem>>30, 1))
		}
		p.SplitBy = "memory available"
	case knownMem(req.Ranks):
		p.SplitBy = "even weights (memory available within 25 %)"
	default:
		p.SplitBy = "even weights"
	}
	shards, err := model.Split(c, blk, req.Mode.TP, req.Mode.PP, weights)
	if err != nil {
		return nil, fmt.Errorf("plan: cannot split %s over %s: %w", c.Arch, req.Mode, err)
	}
	seen := map[string]bool{}
	for i := range shards {
		sh := &shards[i]
		for _, note := range sh.Notes {
			if req.Mode.PP > 1 {
				note = fmt.Sprintf("stage %d: %s", i/req.Mode.TP, note)
			}
			if !seen[note] {
				seen[note] = true
				p.Notes = append(p.Notes, note)
			}
		}
		wb, err := weightBytes(sh)
		if err != nil {
			return nil, fmt.Errorf("plan: rank %d (%s): %w", i, req.Ranks[i].Name, err)
		}
		cc := model.CacheConfig(c, sh, model.CacheSize{Positions: req.Ctx * par, Ctx: req.Ctx, MaxStep: batch, F32: req.KVF32})
		kv := model.KVBytes(cc)
		scratch := model.ScratchBytes(c, sh, batch, threads, req.Ctx)
		if sh.LastStage(c) {
			scratch += 4 * int64(sh.Vocab()) * int64(max(par, 1))
		}
		rp := RankPlan{Rank: i, Name: req.Ranks[i].Name, Stage: i / req.Mode.TP, Shard: *sh,
			Weights: wb, KV: kv, Scratch: scratch, Mem: req.Ranks[i].Mem, State: cc.StateBytes(), Slots: cc.Slots}
		if cc.Slots > 0 {
			rp.SlotBytes = rp.State / int64(cc.Slots)
		}
		if req.MTP && i == 0 {
			if headBytes == nil {
				return nil, errors.New("plan: the MTP head cannot be sized")
			}
			hs, err := headBytes(sh, model.CacheSize{Positions: req.Ctx * par, Ctx: req.Ctx, F32: req.KVF32}, batch, threads)
			if err != nil {
				return nil, fmt.Errorf("plan: rank 0 (%s) with the MTP head: %w", req.Ranks[0].Name, err)
			}
			rp.MTP = hs
			rp.Weights += hs.Weights
			rp.KV += hs.KV
			rp.Scratch += hs.Scratch
			p.Notes = append(p.Notes, fmt.Sprintf("rank 0 also holds the MTP head whole (--spec mtp): weights %s, KV cache %s, scratch %s, counted in its row",
				Bytes(hs.Weights), Bytes(hs.KV), Bytes(hs.Scratch)))
		}
		p.Ranks = append(p.Ranks, rp)
	}
	for i := range p.Ranks {
		if !p.Ranks[i].Fits() {
			return p, &FitError{p}
		}
	}
	return p, nil
}

func knownMem(ranks []Rank) bool {
	for _, r := range ranks {
		if r.Mem <= 0 {
			return false
		}
	}
	return true
}

func joinFloats(w []float64) string {
	s := make([]string, len(w))
	for i, x := range w {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// Bytes formats a byte count in binary units (KiB, MiB, GiB).
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

func memString(m int64) string {
	if m <= 0 {
		return "unknown"
	}
	return Bytes(m)
}

// Table writes the plan as one row per rank, then its notes.
func (p *Plan) Table() string {
	var b strings.Builder
	c := &p.Config
	kv := "f16"
	if p.KVF32 {
		kv = "f32"
	}
	fmt.Fprintf(&b, "model: %s, %d layers, %d heads / %d KV heads of %d, ", c.Arch, c.Layers, c.Heads, c.KVHeads, c.HeadDim)
	if c.Experts > 0 {
		fmt.Fprintf(&b, "%d experts (%d used) of FFN %d, ", c.Experts, c.ExpertsUsed, c.ExpertFF)
	} else {
		fmt.Fprintf(&b, "FFN %d, ", c.FF)
	}
	fmt.Fprintf(&b, "vocabulary %d\n", c.Vocab)
	fmt.Fprintf(&b, "split: %s, sized by %s; context %d x %d sequence(s), KV cache %s\n\n", p.Mode, p.SplitBy, p.Ctx, p.Parallel, kv)
	rows := [][]string{{"rank", "name", "stage", "layers", "heads", "kv heads", "ffn cols", "vocab", "weights", "kv cache", "scratch", "total", "memory", "fits"}}
	for i := range p.Ranks {
		r := &p.Ranks[i]
		s := &r.Shard
		ff := rng(s.FFLo, s.FFHi)
		if c.Experts > 0 {
			ff = rng(s.ExpFFLo, s.ExpFFHi) + "/expert"
		}
		vocab := "-"
		if s.LastStage(c) {
			vocab = rng(s.VocabLo, s.VocabHi)
		}
		fits := "yes"
		switch {
		case r.Mem <= 0:
			fits = "?"
		case !r.Fits():
			fits = "NO"
		}
		rows = append(rows, []string{strconv.Itoa(r.Rank), r.Name, strconv.Itoa(r.Stage), rng(s.First, s.Last), rng(s.HeadLo, s.HeadHi),
			rng(s.KVLo, s.KVHi), ff, vocab, Bytes(r.Weights), Bytes(r.KV), Bytes(r.Scratch), Bytes(r.Total()), memString(r.Mem), fits})
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for j, cell := range row {
			width[j] = max(width[j], len(cell))
		}
	}
	for _, row := range rows {
		for j, cell := range row {
			if j > 0 {
				b.WriteString("  ")
			}
			if j == len(row)-1 {
				b.WriteString(cell)
			} else {
				fmt.Fprintf(&b, "%-*s", width[j], cell)
			}
		}
		b.WriteByte('\n')
	}
	for i := range p.Ranks {
		if r := &p.Ranks[i]; r.Slots > 0 {
			if i == 0 {
				fmt.Fprintf(&b, "\nrecurrent state (in the kv cache): %d slots, %d per sequence (the live state and the snapshot before the prompt's last token, for the running sequence and 4 cached prefixes; a speculative step borrows one per draft)\n",
					r.Slots, model.StateSlotsPerSeq)
			}
			fmt.Fprintf(&b, "  rank %d: %s per slot, %s per sequence, %s in all\n", r.Rank, Bytes(r.SlotBytes),
				Bytes(r.SlotBytes*model.StateSlotsPerSeq), Bytes(r.State))
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	return b.String()
}

func rng(lo, hi int) string {
	if hi <= lo {
		return "none"
	}
	return fmt.Sprintf("[%d,%d)", lo, hi)
}

// memUneven reports whether the ranks' memory differs enough (the most over
// 1.25 times the least) to size the split by it.
func memUneven(ranks []Rank) bool {
	lo, hi := ranks[0].Mem, ranks[0].Mem
	for _, r := range ranks {
		lo, hi = min(lo, r.Mem), max(hi, r.Mem)
	}
	return float64(hi) > 1.25*float64(lo)
}
