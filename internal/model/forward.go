package model

import (
	"errors"
	"fmt"
	"math"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/quant"
)

// Batch is one forward step: tokens of one or more sequences, each at its
// position, prefill chunks and decode tokens mixed. A sequence's tokens must
// be in order and continue where its cache ends.
type Batch struct {
	Tokens []int32
	Pos    []int32
	Seq    []kvcache.SeqID
	Output []bool // logits wanted for this token
}

// Add appends one token.
func (b *Batch) Add(tok, pos int32, seq kvcache.SeqID, output bool) {
	b.Tokens = append(b.Tokens, tok)
	b.Pos = append(b.Pos, pos)
	b.Seq = append(b.Seq, seq)
	b.Output = append(b.Output, output)
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.Tokens, b.Pos, b.Seq, b.Output = b.Tokens[:0], b.Pos[:0], b.Seq[:0], b.Output[:0]
}

// Outputs counts the tokens whose logits are wanted.
func (b *Batch) Outputs() int {
	n := 0
	for _, o := range b.Output {
		if o {
			n++
		}
	}
	return n
}

// Options tune a loaded model.
type Options struct {
	// MaxBatch is the most tokens one internal step evaluates; longer batches
	// run in chunks. 0 means 512.
	MaxBatch int
	// Comm is the tensor-parallel group; nil means a single node.
	Comm Comm
	// Shard is this rank's slice of the model; nil means all of it. Its
	// TPSize must be Comm's Size and TPRank Comm's Rank.
	Shard *Shard
	// MTP loads the model's MTP (NextN) head on the last stage, when the
	// model has one (Config.NextN > 0); ForwardMTP runs it.
	MTP bool
	// Stage carries the hidden state between pipeline stages: a stage that
	// does not start at layer 0 receives it, one that does not end at the
	// last layer sends it. Unused (may be nil) for a single stage.
	Stage StageLink
}

// Model is a loaded model, ready to run batches on a KV cache.
type Model struct {
	Cfg   Config
	file  *gguf.Model
	w     *weights
	pool  *kernels.Pool
	comm  Comm
	stage StageLink
	sh    Shard
	rope  kernels.Rope
	// still0 is the rotary table of position 0 (cos, then sin), which the
	// pairs of Cfg.Rope.Still keep at every text position.
	still0 []float32
	mtp    *mtpHead // nil unless loaded
	// denseDSA runs a DSA model's attention over every position while its
	// indexer still selects (benchmarks compare the two).
	denseDSA bool
	// deltaRecurrent runs DeltaNet prompts in the recurrent form, not the
	// chunked one (benchmarks compare the two).
	deltaRecurrent bool

	maxBatch int
	s        scratch
	chunk    Batch
	// per-step state read by the parallel attention loop
	cur struct {
		cache  *kvcache.Cache
		batch  *Batch
		layer  int
		window int       // the layer's sliding window (0: none)
		sinks  []float32 // the layer's sink logit per head of this rank, or nil
		scale  float32   // the kq scale
		sparse bool      // attend only to the indexer's selection (DSA)
		ssm    *DeltaNet // the recurrent layer running
		n      int
		// the indexer's scoring pass
		dsaCache *kvcache.Cache
		dsaOff   int
		dsaLayer int
	}
	attnFn func(lo, hi int)
	dsaFn  func(lo, hi int)
	ssmFn  func(lo, hi int)
}

// scratch is every buffer a step needs, sized once for MaxBatch tokens.
type scratch struct {
	x, h, tmp    []float32 // [n x embd]
	q, k, v, att []float32 // [n x qdim] / [n x kvdim]
	gate, up     []float32 // [n x ff]
	cos, sin     []float32 // [n x rope.Dims/2]
	mla          mlaScratch
	qraw, qgate  []float32 // gated attention: [query | gate] per head, the gates
	ssm          ssmScratch
	dsa          dsaScratch
	stageBuf     []float32 // a DSA model's stage transfer: hidden state and selection
	probs        []float32 // [n x experts]
	score        []float32 // [experts]: one token's selection scores
	sel          []int32   // [n x expertsUsed]
	selW         []float32
	expTok       []int32   // tokens routed to one expert
	hx, ex       []float32 // gathered expert inputs / outputs
	// one token's experts (MoE.decode): their order, matrices, gate|up
	// and down outputs
	expOrd        []int32
	expW          []kernels.Matrix
	expGU, expOut []float32
	slots         []attnScratch
	outRows       []int32
}

type attnScratch struct {
	scores   []float32
	scores1  []float32 // the second head's scores when heads run in pairs
	scores16 []uint16  // the probabilities rounded to half precision
	qh       []float32
	qh1      []float32 // the second head's query, as qh
	qh16     []uint16
	out      []float32
}

// ErrBadBatch reports a batch the model cannot run; the error text names the
// token and what is wrong.
var ErrBadBatch = errors.New("model: bad batch")

// New binds the weights of an open GGUF model and allocates the step buffers.
func New(f *gguf.Model, pool *kernels.Pool, opt Options) (*Model, error) {
	c, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	sh := FullShard(c)
	if opt.Shard != nil {
		sh = *opt.Shard
	}
	if err := sh.Validate(c); err != nil {
		return nil, err
	}
	comm := opt.Comm
	if comm == nil {
		comm = Single{}
	}
	if comm.Size() != sh.TPSize || comm.Rank() != sh.TPRank {
		return nil, fmt.Errorf("model: shard is tensor-parallel rank %d of %d but the Comm is rank %d of %d", sh.TPRank, sh.TPSize, comm.Rank(), comm.Size())
	}
	if opt.Stage == nil && (sh.First > 0 || !sh.LastStage(c)) {
		return nil, fmt.Errorf("model: shard runs layers [%d,%d) of %d but has no StageLink to the other stages", sh.First, sh.Last, c.Layers)
	}
	w, _, err := bindWeights(f, c, &sh, false, opt.MTP)
	if err != nil {
		return nil, err
	}
	if opt.MTP && w.mtp == nil {
		return nil, fmt.Errorf("model: %s has no MTP head to load (%s has no nextn_predict_layers)", f.Files[0].Path, c.Arch)
	}
	return assemble(f, c, pool, comm, opt, sh, w), nil
}

// ropeAt fills the rotary table of position pos: the Rope's, with the
// pairs of Cfg.Rope.Still at position 0's angle (no turn).
func (m *Model) ropeAt(pos int, cos, sin []float32) {
	m.rope.CosSin(pos, cos, sin)
	half := len(cos)
	for _, i := range m.Cfg.Rope.Still {
		cos[i], sin[i] = m.still0[i], m.still0[half+i]
	}
}

// assemble makes a Model of bound weights and allocates its step buffers.
func assemble(f *gguf.Model, c *Config, pool *kernels.Pool, comm Comm, opt Options, sh Shard, w *weights) *Model {
	m := &Model{Cfg: *c, file: f, w: w, pool: pool, comm: comm, stage: opt.Stage, sh: sh, maxBatch: opt.MaxBatch}
	if m.maxBatch <= 0 {
		m.maxBatch = 512
	}
	r := c.Rope
	m.rope = kernels.Rope{Dims: r.Dims, Base: r.Base, FreqScale: 1 / r.Factor, ExtFactor: r.ExtFactor,
		AttnFactor: r.AttnFactor, BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx,
		FreqFactors: w.ropeFreqs, NeoX: r.NeoX}
	if len(r.Still) > 0 {
		half := r.Dims / 2
		m.still0 = make([]float32, 2*half)
		m.rope.CosSin(0, m.still0[:half], m.still0[half:])
	}
	m.mtp = w.mtp
	m.alloc()
	if m.mtp != nil {
		m.mtp.in = make([]float32, m.maxBatch*2*c.Embd)
	}
	m.attnFn = m.attention
	m.dsaFn = m.dsaScore
	m.ssmFn = m.deltaHeads
	return m
}

// Shard is the slice of the model this instance runs.
func (m *Model) Shard() Shard { return m.sh }

// Repacked says what loading repacked for this CPU's kernels.
func (m *Model) Repacked() RepackStats { return m.w.repack }

// ScratchBytes is the step scratch a shard allocates for batches of maxBatch
// tokens with threads threads, plus the attention scores that grow with the
// longest context ctx (they grow by doubling, so at most twice that).
func ScratchBytes(c *Config, sh *Shard, maxBatch, threads, ctx int) int64 {
	B, E := int64(maxBatch), int64(c.Embd)
	qd, kvd := int64(sh.Heads()*c.HeadDim), int64(sh.KVHeads()*c.HeadDim)
	ff := int64(sh.maxFF(c))
	n := B * (3*E + 2*qd + 2*kvd + 2*ff + int64(c.Rope.Dims) + 1)
	if c.HasMoE() {
		n += B*(int64(c.Experts)+2*int64(c.ExpertsUsed)+1+2*E) + int64(c.Experts)
		// one token's experts: order, gate|up and down outputs, and two
		// 80-byte matrix headers each
		K := int64(c.ExpertsUsed)
		n += K * (1 + 2*int64(sh.ExpFFHi-sh.ExpFFLo) + E + 40)
	}
	slots := int64(4 * threads)
	if c.AttnGate {
		n += 3 * B * qd
	}
	if c.SSM != nil {
		n += int64(ssmScratchLen(c, sh.SSMHi-sh.SSMLo, maxBatch, threads))
	}
	if c.MLA != nil {
		n += int64(mlaScratchLen(c, sh.Heads(), maxBatch))
		if c.MLA.Indexer != nil {
			n += int64(dsaScratchLen(c, maxBatch)) + B*(E+int64(c.MLA.Indexer.TopK)+1)
		}
	}
	if ctx > 0 {
		ctx++ // a sink logit after the row
	}
	// per slot: qh and out, qh16, scores and their half-precision copy
	n += slots * (int64(c.HeadDim)*2 + int64(c.HeadDim)/2 + 2*int64(ctx) + int64(ctx))
	return 4 * n
}

func (m *Model) alloc() {
	c, B := &m.Cfg, m.maxBatch
	qdim, kvdim := m.sh.Heads()*c.HeadDim, m.sh.KVHeads()*c.HeadDim
	ff := m.sh.maxFF(c)
	s := &m.s
	s.x, s.h, s.tmp = make([]float32, B*c.Embd), make([]float32, B*c.Embd), make([]float32, B*c.Embd)
	s.q, s.att = make([]float32, B*qdim), make([]float32, B*qdim)
	s.k, s.v = make([]float32, B*kvdim), make([]float32, B*kvdim)
	s.gate, s.up = make([]float32, B*ff), make([]float32, B*ff)
	s.cos, s.sin = make([]float32, B*c.Rope.Dims/2), make([]float32, B*c.Rope.Dims/2)
	if c.HasMoE() {
		s.probs = make([]float32, B*c.Experts)
		s.score = make([]float32, c.Experts)
		s.sel = make([]int32, B*c.ExpertsUsed)
		s.selW = make([]float32, B*c.ExpertsUsed)
		s.expTok = make([]int32, B)
		s.hx, s.ex = make([]float32, B*c.Embd), make([]float32, B*c.Embd)
		K := c.ExpertsUsed
		s.expOrd, s.expW = make([]int32, K), make([]kernels.Matrix, 2*K)
		s.expGU, s.expOut = make([]float32, 2*K*(m.sh.ExpFFHi-m.sh.ExpFFLo)), make([]float32, K*c.Embd)
	}
	s.slots = make([]attnScratch, 4*m.pool.Threads())
	for i := range s.slots {
		s.slots[i] = attnScratch{qh: make([]float32, c.HeadDim), qh1: make([]float32, c.HeadDim), qh16: make([]uint16, c.HeadDim), out: make([]float32, c.HeadDim)}
	}
	s.outRows = make([]int32, 0, B)
	if c.AttnGate {
		s.qraw, s.qgate = make([]float32, 2*B*qdim), make([]float32, B*qdim)
	}
	if c.SSM != nil {
		s.ssm.alloc(c, m.sh.SSMHi-m.sh.SSMLo, B, m.pool.Threads())
	}
	if c.MLA != nil {
		s.mla.alloc(c, m.sh.Heads(), B)
		if c.MLA.Indexer != nil {
			s.dsa.alloc(c, B)
			s.stageBuf = make([]float32, B*(c.Embd+m.selWidth()))
		}
	}
}

// StateSlotsPerSeq is the recurrent-state slots a model with recurrent
// layers keeps per sequence of its cache (kvcache.Config.Slots): the
// running sequence's live state and the snapshot at the end of its prompt,
// and as much for each of the engine's default four cached prefixes. A
// speculative step takes one slot per draft from what is free (evicting
// cached prefixes first), so its drafts stop at what the budget holds.
const StateSlotsPerSeq = 2 + 4*2

// CacheSize is what a KV cache must hold.
type CacheSize struct {
	// Positions is every sequence's positions together: the paged layers'
	// pool.
	Positions int
	// Ctx is one sequence's context (0: Positions, one sequence); with it
	// Positions/Ctx sequences run at once. Sliding-window layers keep a
	// ring per sequence instead of a row per position: rings for the
	// running sequences and the engine's default four cached prefixes
	// each.
	Ctx int
	// MaxStep is the most positions one sequence adds in one step (the
	// model's MaxBatch; 0: 512): a ring holds a window plus a step.
	MaxStep int
	F32     bool
}

// NewCache makes a KV cache for this model of the given size: this shard's
// layers and KV heads only; a step of this model adds at most its MaxBatch
// positions to a sequence.
func (m *Model) NewCache(sz CacheSize) (*kvcache.Cache, error) {
	if sz.MaxStep <= 0 || sz.MaxStep > m.maxBatch {
		sz.MaxStep = m.maxBatch
	}
	return kvcache.New(CacheConfig(&m.Cfg, &m.sh, sz))
}

// CacheConfig sizes the KV cache of a shard. A rank without KV heads still
// tracks every sequence's length (the batch checks and commits stay in step
// with the group), in rows of one value it never writes.
func CacheConfig(c *Config, sh *Shard, sz CacheSize) kvcache.Config {
	const bs = 32
	kvdim := sh.KVHeads() * c.HeadDim
	if c.MLA != nil && c.MLA.Indexer != nil {
		// A DSA layer's row is the latent row, then the indexer key.
		kvdim += c.MLA.Indexer.Dim
	}
	cfg := kvcache.Config{Layers: sh.Last - sh.First, KVDim: max(kvdim, 1), BlockSize: bs,
		Blocks: (sz.Positions + bs - 1) / bs, F32: sz.F32, SharedKV: c.MLA != nil}
	windowed := false
	for l := sh.First; l < sh.Last; l++ {
		windowed = windowed || c.Window[l] > 0
	}
	seqs := 1
	if sz.Ctx > 0 {
		seqs = max(1, (sz.Positions+sz.Ctx-1)/sz.Ctx)
	}
	if c.SSM != nil {
		// Recurrent layers: StateSlotsPerSeq state slots per sequence,
		// on every rank (one without those layers counts them too).
		cfg.State = make([]int, cfg.Layers)
		for l := sh.First; l < sh.Last; l++ {
			if c.IsRecurrent(l) {
				cfg.State[l-sh.First] = SSMStateSize(c, sh.SSMHi-sh.SSMLo)
			}
		}
		cfg.Slots = StateSlotsPerSeq * seqs
	}
	if windowed {
		cfg.Window = append([]int(nil), c.Window[sh.First:sh.Last]...)
		cfg.MaxStep = sz.MaxStep
		if cfg.MaxStep <= 0 {
			cfg.MaxStep = 512
		}
		// Never more ring blocks than the paged pool has blocks (a short
		// context gains nothing from rings), but always one ring per
		// running sequence.
		cfg.Rings = 5 * seqs
		if r := cfg.RingBlocks(); cfg.Rings*r > cfg.Blocks {
			cfg.Rings = max(seqs, cfg.Blocks/r)
		}
	}
	return cfg
}

// KVBytes is the size of the KV cache CacheConfig describes.
func KVBytes(cfg kvcache.Config) int64 {
	es := int64(2)
	if cfg.F32 {
		es = 4
	}
	parts := int64(2) // K and V
	if cfg.SharedKV {
		parts = 1
	}
	row := parts * es * int64(cfg.BlockSize) * int64(cfg.KVDim) // a block of one layer
	nw, ns := int64(cfg.WindowLayers()), int64(cfg.StateLayers())
	return row*((int64(cfg.Layers)-nw-ns)*int64(cfg.Blocks)+nw*int64(cfg.Rings)*int64(cfg.RingBlocks())) + cfg.StateBytes()
}

// Forward runs the batch, storing its keys and values in cache, and writes
// the logits of the tokens with Output set to logits, one row of
// Shard().Vocab() values each (the rank's vocabulary slice; Cfg.Vocab on a
// single node), in batch order. Stages other than the last write no logits
// (logits may be nil there). On error nothing is committed to the cache for
// the failing chunk.
//
// Every rank of a split model runs Forward with the same batch and the same
// MaxBatch at the same time: the collectives and stage transfers pair up
// step by step.
func (m *Model) Forward(cache *kvcache.Cache, b *Batch, logits []float32) error {
	return m.ForwardHidden(cache, b, logits, nil)
}

// ForwardHidden is Forward that also writes, when hidden is not nil, the
// final-normed hidden state (what the output head multiplies; an MTP head's
// input) of each output token on the last stage: Cfg.Embd values each.
func (m *Model) ForwardHidden(cache *kvcache.Cache, b *Batch, logits, hidden []float32) error {
	if m.sh.First == m.sh.Last {
		return fmt.Errorf("model: this is the MTP head alone (NewMTPHead): it runs no trunk layer")
	}
	n := len(b.Tokens)
	if len(b.Pos) != n || len(b.Seq) != n || len(b.Output) != n {
		return fmt.Errorf("%w: %d tokens but %d positions, %d sequence ids, %d output flags", ErrBadBatch, n, len(b.Pos), len(b.Seq), len(b.Output))
	}
	V := m.sh.Vocab()
	if !m.sh.LastStage(&m.Cfg) {
		V = 0
	}
	if want := b.Outputs() * V; len(logits) < want {
		return fmt.Errorf("%w: logits buffer holds %d values, need %d", ErrBadBatch, len(logits), want)
	}
	E := m.Cfg.Embd
	if want := b.Outputs() * E; hidden != nil && len(hidden) < want {
		return fmt.Errorf("%w: hidden-state buffer holds %d values, need %d", ErrBadBatch, len(hidden), want)
	}
	out := 0
	for start := 0; start < n; start += m.maxBatch {
		end := min(start+m.maxBatch, n)
		// The chunk lives in the model, not on the stack: the parallel
		// attention loop reads it through m.cur, which would make a local
		// escape and cost an allocation per step.
		sub := &m.chunk
		*sub = Batch{Tokens: b.Tokens[start:end], Pos: b.Pos[start:end], Seq: b.Seq[start:end], Output: b.Output[start:end]}
		no := sub.Outputs()
		var hid []float32
		if hidden != nil {
			hid = hidden[out*E : (out+no)*E]
		}
		if err := m.step(cache, sub, logits[out*V:(out+no)*V], hid); err != nil {
			return err
		}
		out += no
	}
	return nil
}

// step runs at most maxBatch tokens.
func (m *Model) step(cache *kvcache.Cache, b *Batch, logits, hidden []float32) error {
	c, s := &m.Cfg, &m.s
	n := len(b.Tokens)
	if err := m.checkBatch(cache, b); err != nil {
		return err
	}
	if err := reserveStep(cache, b); err != nil {
		return err
	}
	// Token embeddings and the rotary table of each token's position.
	E := c.Embd
	half := c.Rope.Dims / 2
	first := m.sh.FirstStage()
	for i, tok := range b.Tokens {
		if first {
			row := m.w.embed.Data[int64(tok)*m.w.embedRow : int64(tok+1)*m.w.embedRow]
			if err := quant.Dequantize(m.w.embed.Type, row, s.x[i*E:(i+1)*E]); err != nil {
				return fmt.Errorf("model: embedding of token %d: %w", tok, err)
			}
		}
		m.ropeAt(int(b.Pos[i]), s.cos[i*half:(i+1)*half], s.sin[i*half:(i+1)*half])
	}
	if !first {
		if err := m.recvStage(n); err != nil {
			return fmt.Errorf("model: receiving the hidden state before layer %d: %w", m.sh.First, err)
		}
	}
	m.cur.cache, m.cur.n, m.cur.batch = cache, n, b
	for l := m.sh.First; l < m.sh.Last; l++ {
		if err := m.layer(cache, b, l); err != nil {
			return err
		}
	}
	if !m.sh.LastStage(c) {
		if err := m.sendStage(n); err != nil {
			return fmt.Errorf("model: sending the hidden state after layer %d: %w", m.sh.Last-1, err)
		}
		return m.commit(cache, b)
	}
	// Final norm and the output head, for the tokens that want logits.
	s.outRows = s.outRows[:0]
	for i, o := range b.Output {
		if o {
			kernels.RMSNorm(s.h[len(s.outRows)*E:(len(s.outRows)+1)*E], s.x[i*E:(i+1)*E], m.w.outputNorm, c.NormEps)
			s.outRows = append(s.outRows, int32(i))
		}
	}
	if len(s.outRows) > 0 && m.w.output.Rows > 0 {
		m.pool.MatMul(logits, &m.w.output, s.h, len(s.outRows))
	}
	if hidden != nil {
		copy(hidden, s.h[:len(s.outRows)*E])
	}
	return m.commit(cache, b)
}

// reserveStep makes room for every sequence's tokens of the step at once,
// from its first token in the batch: a windowed layer's ring must hold
// them all before attention reads. Reserve is a no-op inside reserved,
// unshared room; it un-shares a block the first write of a step falls into.
func reserveStep(cache *kvcache.Cache, b *Batch) error {
	for i, seq := range b.Seq {
		if cache.Len(seq) != int(b.Pos[i]) {
			continue // not the sequence's first token in this step
		}
		last := b.Pos[i]
		for j := i + 1; j < len(b.Seq); j++ {
			if b.Seq[j] == seq {
				last = b.Pos[j]
			}
		}
		if err := cache.Reserve(seq, int(last)+1); err != nil {
			return fmt.Errorf("model: KV cache for sequence %d at positions [%d,%d]: %w", seq, b.Pos[i], last, err)
		}
	}
	return nil
}

// A stage passes the next one each token's hidden state and, in a DSA
// model, the indexer's selection of the last full layer, which the next
// stage's first layers may share: TopK positions and their count, as
// float32 bit patterns after the hidden state.
func (m *Model) selWidth() int {
	if c := &m.Cfg; c.MLA != nil && c.MLA.Indexer != nil {
		return c.MLA.Indexer.TopK + 1
	}
	return 0
}

func (m *Model) sendStage(n int) error {
	s, E, k := &m.s, m.Cfg.Embd, m.selWidth()
	if k == 0 {
		return m.stage.Send(s.x[:n*E])
	}
	w := E + k
	for i := 0; i < n; i++ {
		row := s.stageBuf[i*w : (i+1)*w]
		copy(row, s.x[i*E:(i+1)*E])
		for j, v := range s.dsa.sel[i*(k-1) : (i+1)*(k-1)] {
			row[E+j] = math.Float32frombits(uint32(v))
		}
		row[E+k-1] = math.Float32frombits(uint32(s.dsa.cnt[i]))
	}
	return m.stage.Send(s.stageBuf[:n*w])
}

func (m *Model) recvStage(n int) error {
	s, E, k := &m.s, m.Cfg.Embd, m.selWidth()
	if k == 0 {
		return m.stage.Recv(s.x[:n*E])
	}
	w := E + k
	if err := m.stage.Recv(s.stageBuf[:n*w]); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		row := s.stageBuf[i*w : (i+1)*w]
		copy(s.x[i*E:(i+1)*E], row[:E])
		for j := range k - 1 {
			s.dsa.sel[i*(k-1)+j] = int32(math.Float32bits(row[E+j]))
		}
		cnt := int32(math.Float32bits(row[E+k-1]))
		if cnt < 0 || int(cnt) > k-1 {
			return fmt.Errorf("token %d: the previous stage selected %d positions, at most %d", i, cnt, k-1)
		}
		s.dsa.cnt[i] = cnt
	}
	return nil
}

// commit makes the step's positions part of their sequences.
func (m *Model) commit(cache *kvcache.Cache, b *Batch) error {
	for i := range b.Tokens {
		if int(b.Pos[i])+1 > cache.Len(b.Seq[i]) {
			if err := cache.Commit(b.Seq[i], int(b.Pos[i])+1); err != nil {
				return fmt.Errorf("model: committing sequence %d: %w", b.Seq[i], err)
			}
		}
	}
	return nil
}

// checkBatch validates tokens and positions before anything is written: every
// sequence's positions must continue its cache without gaps.
func (m *Model) checkBatch(cache *kvcache.Cache, b *Batch) error {
	for i, tok := range b.Tokens {
		if tok < 0 || int(tok) >= m.Cfg.Vocab {
			return fmt.Errorf("%w: token %d at batch index %d is outside the vocabulary of %d", ErrBadBatch, tok, i, m.Cfg.Vocab)
		}
		seq := b.Seq[i]
		// The sequence's previous token in this batch, usually the one
		// just before, sets the expected position; without one the cache
		// does. (A scan, not a map: no allocation per step.)
		want := int32(-1)
		for j := i - 1; j >= 0; j-- {
			if b.Seq[j] == seq {
				want = b.Pos[j] + 1
				break
			}
		}
		if want < 0 {
			want = int32(cache.Len(seq))
		}
		if b.Pos[i] != want {
			return fmt.Errorf("%w: sequence %d: token at batch index %d has position %d, want %d (positions continue the cache without gaps)", ErrBadBatch, seq, i, b.Pos[i], want)
		}
	}
	return nil
}
