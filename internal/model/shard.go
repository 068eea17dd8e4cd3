package model

import (
	"fmt"
	"math"
	"strings"

	"braid/internal/quant"
)

// Shard is the slice of the model one rank holds and runs.
//
// Layers split into pipeline stages: a rank runs layers [First, Last). The
// stage with First == 0 embeds the tokens; the stage with Last ==
// Config.Layers applies the final norm and the output head. The stages in
// between receive and send the hidden state over a StageLink.
//
// Inside a stage, a tensor-parallel group of TPSize ranks splits every layer:
// attention by heads (query heads [HeadLo, HeadHi), the KV heads they read
// [KVLo, KVHi)), the dense FFN by columns [FFLo, FFHi) of its inner
// dimension, every MoE expert by columns [ExpFFLo, ExpFFHi) of its inner
// dimension (the router replicated), and the output head by vocabulary rows
// [VocabLo, VocabHi). Q, K, V, gate and up are split by rows (zero-copy views
// of the mapped file), attn_output and ffn_down by columns (copied), followed
// by the group's all-reduce. The token embedding and every norm are
// replicated.
//
// A rank may hold no heads or no FFN columns (an empty range) when block
// boundaries force it; it then adds zeros to that all-reduce.
type Shard struct {
	First, Last      int
	TPRank, TPSize   int
	HeadLo, HeadHi   int
	KVLo, KVHi       int
	FFLo, FFHi       int
	ExpFFLo, ExpFFHi int
	// SharedLo, SharedHi are this rank's columns of the shared experts
	// (Config.SharedFF wide), cut at the routed experts' fractions.
	SharedLo, SharedHi int
	VocabLo, VocabHi   int
	// SSMLo, SSMHi are the recurrent (DeltaNet) layers' value heads this
	// rank runs; every rank computes all their key heads.
	SSMLo, SSMHi int
	// Notes say what the split had to decide that the user did not ask
	// for: rounding to block boundaries, replicated KV heads.
	Notes []string
}

// FullShard is the whole model on one rank.
func FullShard(c *Config) Shard {
	s := Shard{Last: c.Layers, TPSize: 1, HeadHi: c.Heads, KVHi: c.KVHeads, VocabHi: c.Vocab}
	if c.HasMoE() {
		s.ExpFFHi = c.ExpertFF
		s.SharedHi = c.SharedFF
	}
	if c.HasDense() {
		s.FFHi = c.FF
	}
	if c.SSM != nil {
		s.SSMHi = c.SSM.VHeads
	}
	return s
}

// SharedFF is this rank's columns of the shared experts (of
// Config.SharedFF).
func (s *Shard) SharedFF(c *Config) (lo, hi int) {
	return s.SharedLo, s.SharedHi
}

// maxFF is the widest FF slice this rank runs: dense, expert or shared.
func (s *Shard) maxFF(c *Config) int {
	lo, hi := s.SharedFF(c)
	return max(s.FFHi-s.FFLo, s.ExpFFHi-s.ExpFFLo, hi-lo)
}

// Heads is the number of query heads this rank runs, KVHeads the number of
// KV heads it computes and caches.
func (s *Shard) Heads() int   { return s.HeadHi - s.HeadLo }
func (s *Shard) KVHeads() int { return s.KVHi - s.KVLo }

// Vocab is the number of output-head rows (logits per token) this rank
// computes.
func (s *Shard) Vocab() int { return s.VocabHi - s.VocabLo }

// FirstStage and LastStage say whether this rank embeds tokens and whether
// it computes logits.
func (s *Shard) FirstStage() bool         { return s.First == 0 }
func (s *Shard) LastStage(c *Config) bool { return s.Last == c.Layers }

// String is a one-line summary for logs and plans.
func (s *Shard) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "layers [%d,%d) tp %d/%d heads [%d,%d) kv [%d,%d)", s.First, s.Last, s.TPRank, s.TPSize, s.HeadLo, s.HeadHi, s.KVLo, s.KVHi)
	if s.FFHi > 0 || s.ExpFFHi == 0 {
		fmt.Fprintf(&b, " ff [%d,%d)", s.FFLo, s.FFHi)
	}
	if s.ExpFFHi > 0 {
		fmt.Fprintf(&b, " expert-ff [%d,%d)", s.ExpFFLo, s.ExpFFHi)
	}
	if s.SSMHi > 0 {
		fmt.Fprintf(&b, " ssm-heads [%d,%d)", s.SSMLo, s.SSMHi)
	}
	fmt.Fprintf(&b, " vocab [%d,%d)", s.VocabLo, s.VocabHi)
	return b.String()
}

// Validate checks the shard against the model's shape: ranges inside their
// dimensions and the KV heads exactly those the query heads need. Block
// alignment of the column splits is checked when the weights are bound.
func (s *Shard) Validate(c *Config) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model: bad shard (%s): "+format, append([]any{s.String()}, a...)...)
	}
	rng := func(name string, lo, hi, n int) error {
		if lo < 0 || hi < lo || hi > n {
			return bad("%s range [%d,%d) is not inside [0,%d)", name, lo, hi, n)
		}
		return nil
	}
	if s.First < 0 || s.Last <= s.First || s.Last > c.Layers {
		return bad("layer range [%d,%d) is not a non-empty part of [0,%d)", s.First, s.Last, c.Layers)
	}
	if s.TPSize < 1 || s.TPRank < 0 || s.TPRank >= s.TPSize {
		return bad("tensor-parallel rank %d of %d", s.TPRank, s.TPSize)
	}
	ff, eff, sff := 0, 0, 0
	if c.HasDense() {
		ff = c.FF
	}
	if c.HasMoE() {
		eff, sff = c.ExpertFF, c.SharedFF
	}
	for _, r := range []struct {
		name      string
		lo, hi, n int
	}{{"head", s.HeadLo, s.HeadHi, c.Heads}, {"KV head", s.KVLo, s.KVHi, c.KVHeads}, {"FFN column", s.FFLo, s.FFHi, ff},
		{"expert FFN column", s.ExpFFLo, s.ExpFFHi, eff}, {"shared expert FFN column", s.SharedLo, s.SharedHi, sff},
		{"vocabulary", s.VocabLo, s.VocabHi, c.Vocab},
		{"recurrent value head", s.SSMLo, s.SSMHi, ssmHeads(c)}} {
		if err := rng(r.name, r.lo, r.hi, r.n); err != nil {
			return err
		}
	}
	group := c.Heads / c.KVHeads
	if s.Heads() == 0 {
		if s.KVHeads() != 0 {
			return bad("KV heads without query heads")
		}
	} else if s.KVLo != s.HeadLo/group || s.KVHi != (s.HeadHi+group-1)/group {
		return bad("query heads [%d,%d) read KV heads [%d,%d), not [%d,%d)", s.HeadLo, s.HeadHi, s.HeadLo/group, (s.HeadHi+group-1)/group, s.KVLo, s.KVHi)
	}
	if s.TPSize == 1 && (s.Heads() != c.Heads || s.FFHi-s.FFLo != ff || s.ExpFFHi-s.ExpFFLo != eff || s.SharedHi-s.SharedLo != sff || s.SSMHi-s.SSMLo != ssmHeads(c)) {
		return bad("a group of one must hold every head and FFN column")
	}
	if s.LastStage(c) && s.Vocab() == 0 && s.TPSize == 1 {
		return bad("the last stage of a group of one must compute every logit")
	}
	return nil
}

// Blocks are the column block sizes that a row-parallel split must respect:
// the coarsest type of attn_output, ffn_down and ffn_down_exps over all
// layers (a quantized row cannot be cut inside a block).
type Blocks struct {
	AttnOut, Down, DownExps quant.Type
	SSMOut                  quant.Type // the recurrent layers' output projection
}

// ssmHeads is the recurrent layers' value heads (0 without them).
func ssmHeads(c *Config) int {
	if c.SSM == nil {
		return 0
	}
	return c.SSM.VHeads
}

// TensorSplit splits every layer over a tensor-parallel group whose ranks
// have the given weights (in rank order, nothing reordered): each range is
// cut where the cumulative weight falls, rounded up to the next unit, so an
// even split gives the extra units to the first ranks (8 KV heads over 3
// ranks: 3+3+2).
//
// Attention splits by KV-head groups, each rank taking its KV heads' query
// heads; with fewer KV heads than ranks it splits by query heads and each
// rank holds (replicates) the KV heads its query heads read. The cuts of
// attn_output and ffn_down columns fall on block boundaries: when a head or
// column unit is smaller than a block, the unit grows to whole blocks and a
// note says so. A rank left with neither heads nor FFN columns is refused.
//
// The shards cover all layers; a pipeline sets First and Last.
func TensorSplit(c *Config, blk Blocks, weights []float64) ([]Shard, error) {
	T := len(weights)
	cum, err := cumulative(weights)
	if err != nil {
		return nil, err
	}
	sh := make([]Shard, T)
	for r := range sh {
		sh[r] = Shard{Last: c.Layers, TPRank: r, TPSize: T}
	}
	var notes []string
	if T > 1 {
		group := c.Heads / c.KVHeads
		step := group
		if c.KVHeads < T {
			step = 1
		}
		bs := blk.AttnOut.BlockSize()
		od := c.AttnOutDim()
		unit := lcm(step, bs/gcd(od, bs))
		if unit > step {
			notes = append(notes, fmt.Sprintf("attention split in steps of %d query heads, not %d: attn_output is %v, whose %d-column blocks cover %d heads of %d values", unit, step, blk.AttnOut, bs, bs/gcd(od, bs), od))
		}
		cut := cuts(c.Heads, unit, cum)
		for r := range sh {
			s := &sh[r]
			s.HeadLo, s.HeadHi = cut[r], cut[r+1]
			if s.Heads() > 0 {
				s.KVLo, s.KVHi = s.HeadLo/group, (s.HeadHi+group-1)/group
			}
		}
		for r := 1; r < T; r++ {
			if prev := sh[r-1]; prev.Heads() > 0 && sh[r].Heads() > 0 && prev.KVHi > sh[r].KVLo {
				notes = append(notes, fmt.Sprintf("KV heads replicated: %d KV heads of %d query heads each do not split at these cuts; each rank computes and caches the KV heads its query heads read", c.KVHeads, group))
				break
			}
		}
		ffCut := func(n int, t quant.Type, what, tensor string) []int {
			got, want := cuts(n, t.BlockSize(), cum), cuts(n, 1, cum)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				notes = append(notes, fmt.Sprintf("%s columns cut at %v, not %v: %s is %v, cut only at multiples of %d columns", what, got, want, tensor, t, t.BlockSize()))
			}
			return got
		}
		if c.HasMoE() {
			cut := ffCut(c.ExpertFF, blk.DownExps, "expert FFN", "ffn_down_exps")
			for r := range sh {
				sh[r].ExpFFLo, sh[r].ExpFFHi = cut[r], cut[r+1]
			}
			if c.SharedFF > 0 {
				cut := ffCut(c.SharedFF, blk.DownExps, "shared expert FFN", "ffn_down_shexp")
				for r := range sh {
					sh[r].SharedLo, sh[r].SharedHi = cut[r], cut[r+1]
				}
			}
		}
		if c.HasDense() {
			cut := ffCut(c.FF, blk.Down, "FFN", "ffn_down")
			for r := range sh {
				sh[r].FFLo, sh[r].FFHi = cut[r], cut[r+1]
			}
		}
		if a := c.SSM; a != nil {
			// Recurrent layers split by value heads; ssm_out's columns
			// (State values per head) are cut on its blocks.
			bs := blk.SSMOut.BlockSize()
			unit := bs / gcd(a.State, bs)
			if unit > 1 {
				notes = append(notes, fmt.Sprintf("recurrent layers split in steps of %d value heads: ssm_out is %v, whose %d-column blocks cover %d heads of %d values", unit, blk.SSMOut, bs, unit, a.State))
			}
			cut := cuts(a.VHeads, unit, cum)
			for r := range sh {
				sh[r].SSMLo, sh[r].SSMHi = cut[r], cut[r+1]
			}
		}
		cut = cuts(c.Vocab, 1, cum)
		for r := range sh {
			sh[r].VocabLo, sh[r].VocabHi = cut[r], cut[r+1]
		}
	} else {
		sh[0] = FullShard(c)
	}
	for r := range sh {
		s := &sh[r]
		if s.Heads() == 0 && s.FFHi == s.FFLo && s.ExpFFHi == s.ExpFFLo && s.SSMHi == s.SSMLo {
			return nil, fmt.Errorf("model: tensor split %v over %d ranks leaves rank %d with no attention heads and no FFN columns (%s): it would only relay all-reduces; use fewer ranks or other weights", weights, T, r, s)
		}
		s.Notes = notes
	}
	return sh, nil
}

// LayerSplit cuts layers into contiguous pipeline stages with the given
// weights (in stage order), each stage at least one layer.
func LayerSplit(layers int, weights []float64) ([][2]int, error) {
	S := len(weights)
	if S > layers {
		return nil, fmt.Errorf("model: %d pipeline stages for %d layers: a stage would have no layer", S, layers)
	}
	cum, err := cumulative(weights)
	if err != nil {
		return nil, err
	}
	cut := cuts(layers, 1, cum)
	// Every stage keeps at least one layer: clamp each cut between its
	// neighbours' minimums (monotone, so the order stays).
	for i := 1; i < S; i++ {
		cut[i] = min(max(cut[i], cut[i-1]+1), layers-(S-i))
	}
	out := make([][2]int, S)
	for i := range out {
		out[i] = [2]int{cut[i], cut[i+1]}
	}
	return out, nil
}

// cumulative normalises weights to cumulative fractions ending at 1.
func cumulative(weights []float64) ([]float64, error) {
	if len(weights) == 0 {
		return nil, fmt.Errorf("model: no ranks to split over")
	}
	total := 0.0
	for i, w := range weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("model: split weight %d is %v: weights must be positive numbers", i, w)
		}
		total += w
	}
	cum := make([]float64, len(weights))
	acc := 0.0
	for i, w := range weights {
		acc += w
		cum[i] = acc / total
	}
	cum[len(cum)-1] = 1
	return cum, nil
}

// cuts splits n items in units of unit (the last unit may be short) at the
// cumulative fractions cum, rounding each cut up to whole units.
func cuts(n, unit int, cum []float64) []int {
	units := (n + unit - 1) / unit
	out := make([]int, len(cum)+1)
	for i, f := range cum {
		u := int(math.Ceil(float64(units)*f - 1e-9))
		out[i+1] = min(max(u*unit, out[i]), n)
	}
	out[len(cum)] = n
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// Split shards the model over tp*pp ranks given in rank order, rank =
// stage*tp + t: pp pipeline stages of tp tensor-parallel ranks each. weights
// (one per rank; nil = all equal) size both splits: a stage's layers by the
// sum of its ranks' weights, each rank's slice of its stage by its own.
func Split(c *Config, blk Blocks, tp, pp int, weights []float64) ([]Shard, error) {
	if tp < 1 || pp < 1 {
		return nil, fmt.Errorf("model: split into %d tensor-parallel ranks x %d stages: both must be at least 1", tp, pp)
	}
	if weights == nil {
		weights = make([]float64, tp*pp)
		for i := range weights {
			weights[i] = 1
		}
	}
	if len(weights) != tp*pp {
		return nil, fmt.Errorf("model: %d split weights for %d ranks (%d tensor-parallel x %d stages)", len(weights), tp*pp, tp, pp)
	}
	if _, err := cumulative(weights); err != nil {
		return nil, err
	}
	stageW := make([]float64, pp)
	for i, w := range weights {
		stageW[i/tp] += w
	}
	layers, err := LayerSplit(c.Layers, stageW)
	if err != nil {
		return nil, err
	}
	out := make([]Shard, 0, tp*pp)
	for s, lr := range layers {
		group, err := TensorSplit(c, blk, weights[s*tp:(s+1)*tp])
		if err != nil {
			return nil, fmt.Errorf("stage %d: %w", s, err)
		}
		for _, sh := range group {
			sh.First, sh.Last = lr[0], lr[1]
			out = append(out, sh)
		}
	}
	return out, nil
}
