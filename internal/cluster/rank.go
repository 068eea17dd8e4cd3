package cluster

import (
	"fmt"
	"time"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// group is one rank's view of a subset of a mesh's ranks (its tensor-
// parallel group, or its pipeline of stages), so that a dist.Comm built on
// it runs its collectives among those ranks only. Pairs of different groups
// never overlap (a tensor-parallel pair is in one stage, a pipeline pair
// spans two), so their tags never mix on a connection.
type group struct {
	t     dist.Transport
	ranks []int // mesh rank of each group member
	me    int
}

func newGroup(t dist.Transport, ranks []int) *group {
	g := &group{t: t, ranks: ranks, me: -1}
	for i, r := range ranks {
		if r == t.Rank() {
			g.me = i
		}
	}
	return g
}

func (g *group) peer(p int) int {
	if p < 0 || p >= len(g.ranks) {
		return -1 // the transport names the bad index in its error
	}
	return g.ranks[p]
}

func (g *group) Rank() int                                { return g.me }
func (g *group) Size() int                                { return len(g.ranks) }
func (g *group) Kind() string                             { return g.t.Kind() }
func (g *group) Send(p int, tag wire.Tag, b []byte) error { return g.t.Send(g.peer(p), tag, b) }
func (g *group) Post(p int, tag wire.Tag, b []byte) error { return g.t.Post(g.peer(p), tag, b) }
func (g *group) Flush(p int) error                        { return g.t.Flush(g.peer(p)) }
func (g *group) Recv(p int, tag wire.Tag) ([]byte, error) { return g.t.Recv(g.peer(p), tag) }
func (g *group) SendControl(p int, t wire.Tag, b []byte) error {
	return g.t.SendControl(g.peer(p), t, b)
}
func (g *group) RecvControl(p int) (wire.Tag, []byte, error) { return g.t.RecvControl(g.peer(p)) }
func (g *group) Peer(p int) dist.PeerInfo                    { return g.t.Peer(g.peer(p)) }

func (g *group) Stats() dist.Stats {
	all := g.t.Stats()
	s := dist.Stats{Kind: all.Kind, Rank: g.me, Peers: make([]dist.PeerStats, len(g.ranks))}
	for i, r := range g.ranks {
		if r < len(all.Peers) {
			s.Peers[i] = all.Peers[r]
		}
	}
	return s
}

// Close does nothing: the mesh's owner closes it.
func (g *group) Close() error { return nil }

// swapComm is the model's Comm for a rank whose weights outlive its meshes:
// the model is bound once, and every Load points it at the new mesh. The
// rank and size never change (they are the shard's).
type swapComm struct {
	rank, size int
	c          *dist.Comm
	prof       *profiler // nil unless profiling
	// wait is the time in all-reduces in the current step (two clock
	// reads per all-reduce, next to a network round trip): every step
	// result carries it, for the server's per-rank metrics.
	wait time.Duration
}

func (s *swapComm) Rank() int { return s.rank }
func (s *swapComm) Size() int { return s.size }

func (s *swapComm) AllReduceSum(x []float32) error {
	if s.size == 1 {
		return nil
	}
	if s.c == nil {
		return errNotFormed
	}
	t0 := time.Now()
	err := s.c.AllReduceSum(x)
	t1 := time.Now()
	s.wait += t1.Sub(t0)
	if s.prof != nil {
		s.prof.allReduceDone(t0, t1, len(x))
	}
	return err
}

// swapStage is the StageLink of one stage: rank i of the previous stage and
// rank i of the next, over the current mesh.
type swapStage struct {
	stage int // this rank's index in its pipeline
	c     *dist.Comm
	prof  *profiler     // nil unless profiling
	wait  time.Duration // in Recv and Send in the current step, as swapComm.wait
}

func (s *swapStage) Recv(x []float32) error {
	if s.c == nil {
		return errNotFormed
	}
	t0 := time.Now()
	err := s.c.RecvFloat32(s.stage-1, x)
	s.timed(t0, len(x))
	return err
}

func (s *swapStage) Send(x []float32) error {
	if s.c == nil {
		return errNotFormed
	}
	t0 := time.Now()
	err := s.c.SendFloat32(s.stage+1, x)
	s.timed(t0, len(x))
	return err
}

func (s *swapStage) timed(t0 time.Time, n int) {
	t1 := time.Now()
	s.wait += t1.Sub(t0)
	if s.prof != nil {
		s.prof.stageWait(t0, t1, n)
	}
}

// rank is one rank's model and cache, and what it needs to run a step: the
// same code on the coordinator and on the workers.
type rank struct {
	m     *model.Model
	cache *kvcache.Cache
	size  model.CacheSize // what cache was made for
	cfg   *model.Config
	sh    model.Shard
	world int
	tp    int
	pp    int
	comm  *swapComm
	stage *swapStage

	logits []float32
	hidden []float32 // the last step's final-normed states, when it asked (sendsHidden)
	cands  []model.Candidate
	mb     model.Batch
	prof   *profiler // nil unless profiling
}

// sendsHidden says whether this rank returns a step's hidden states when
// asked: the first rank of the last stage (every rank of that stage holds
// the same states after the last all-reduce; one sends them).
func (r *rank) sendsHidden() bool { return r.lastStage() && r.sh.TPRank == 0 }

func newRankLinks(sh *model.Shard, world, tp, pp int) (*swapComm, *swapStage) {
	comm := &swapComm{rank: sh.TPRank, size: sh.TPSize}
	var st *swapStage
	if pp > 1 {
		st = &swapStage{}
	}
	return comm, st
}

// emptyCache gives the rank an empty KV cache of size sz for a new session.
// The same size empties the cache it has (Reset): a new one allocated
// beside it would double the KV memory for as long as both are live, at
// the moment a re-form follows a failure. Another size lets the old cache
// go before allocating the new one.
func (r *rank) emptyCache(sz model.CacheSize) error {
	if r.cache != nil && r.size == sz {
		r.cache.Reset()
		return nil
	}
	r.cache = nil
	c, err := r.m.NewCache(sz)
	if err != nil {
		return err
	}
	r.cache, r.size = c, sz
	return nil
}

// attach points the rank's links at a new mesh (nil detaches them).
func (r *rank) attach(t dist.Transport, meshRank int) {
	if t == nil {
		r.comm.c = nil
		if r.stage != nil {
			r.stage.c = nil
		}
		return
	}
	s, i := meshRank/r.tp, meshRank%r.tp
	if r.tp > 1 {
		ranks := make([]int, r.tp)
		for j := range ranks {
			ranks[j] = s*r.tp + j
		}
		r.comm.c = dist.NewComm(newGroup(t, ranks))
	}
	if r.stage != nil {
		ranks := make([]int, r.pp)
		for j := range ranks {
			ranks[j] = j*r.tp + i
		}
		r.stage.stage = s
		r.stage.c = dist.NewComm(newGroup(t, ranks))
	}
}

// setStep tags the step's messages with its number on every link.
func (r *rank) setStep(step uint64) {
	if r.comm.c != nil {
		r.comm.c.SetStep(step)
	}
	if r.stage != nil && r.stage.c != nil {
		r.stage.c.SetStep(step)
	}
}

func (r *rank) lastStage() bool { return r.sh.LastStage(r.cfg) }

// waits are the all-reduce and pipeline waits of the last step.
func (r *rank) waits() (allReduce, pipeline time.Duration) {
	allReduce = r.comm.wait
	if r.stage != nil {
		pipeline = r.stage.wait
	}
	return allReduce, pipeline
}

// run executes one step on this rank: the KV operations, then the batch.
// With several pipeline stages the batch runs as up to parts micro-batches
// (the same cut on every rank, from the Step message), so a stage works on
// the next one while the later stages work on the previous one. The logits
// of the output rows (this rank's vocabulary slice) are left in r.logits;
// with hidden set, the rank that sends them leaves the output rows'
// final-normed hidden states in r.hidden.
func (r *rank) run(step uint64, ops []kvOp, b *model.Batch, parts int, hidden bool) (time.Duration, error) {
	if r.prof != nil {
		r.prof.beginStep()
		defer r.prof.endStep()
	}
	for i, o := range ops {
		if err := o.apply(r.cache); err != nil {
			return 0, fmt.Errorf("KV operation %d of the step (%s): %w", i, o, err)
		}
	}
	r.setStep(step)
	r.comm.wait = 0
	if r.stage != nil {
		r.stage.wait = 0
	}
	V := 0
	if r.lastStage() {
		V = r.sh.Vocab()
	}
	rows := b.Outputs()
	if need := rows * V; cap(r.logits) < need {
		r.logits = make([]float32, need)
	}
	r.logits = r.logits[:rows*V]
	E := 0
	if hidden && r.sendsHidden() {
		E = r.cfg.Embd
		if need := rows * E; cap(r.hidden) < need {
			r.hidden = make([]float32, need)
		}
	}
	r.hidden = r.hidden[:rows*E]
	start := time.Now()
	n := len(b.Tokens)
	parts = min(parts, n)
	if r.pp == 1 {
		parts = 1
	}
	if parts <= 1 {
		// Forward first: in "return time.Since(start), Forward(...)" the
		// clock is read before the call runs.
		err := r.m.ForwardHidden(r.cache, b, r.logits, r.hiddenRows(0, rows))
		return time.Since(start), err
	}
	out := 0
	for p := 0; p < parts; p++ {
		lo, hi := p*n/parts, (p+1)*n/parts
		r.mb = model.Batch{Tokens: b.Tokens[lo:hi], Pos: b.Pos[lo:hi], Seq: b.Seq[lo:hi], Output: b.Output[lo:hi]}
		no := r.mb.Outputs()
		if err := r.m.ForwardHidden(r.cache, &r.mb, r.logits[out*V:(out+no)*V], r.hiddenRows(out, out+no)); err != nil {
			return time.Since(start), err
		}
		out += no
	}
	return time.Since(start), nil
}

// hiddenRows are output rows [lo, hi) of r.hidden, nil when the step
// keeps no hidden states.
func (r *rank) hiddenRows(lo, hi int) []float32 {
	if len(r.hidden) == 0 {
		return nil
	}
	E := r.cfg.Embd
	return r.hidden[lo*E : hi*E]
}

// result fills res with what this rank returns for the step just run (its
// hidden states too when the step left them).
func (r *rank) result(res *result, rows int, full bool, k int) {
	res.Rows, res.Cands, res.Logits = rows, res.Cands[:0], nil
	res.HiddenWidth, res.Hidden = 0, nil
	if len(r.hidden) > 0 && len(r.hidden) == rows*r.cfg.Embd {
		res.HiddenWidth, res.Hidden = r.cfg.Embd, r.hidden
	}
	if !r.lastStage() {
		res.Mode, res.Width = resNone, 0
		return
	}
	V := r.sh.Vocab()
	if full || k >= V {
		res.Mode, res.Width, res.Logits = resFull, V, r.logits[:rows*V]
		return
	}
	k = max(k, 1)
	res.Mode, res.Width = resCands, k
	for row := 0; row < rows; row++ {
		r.cands = model.TopK(r.cands[:0], r.logits[row*V:(row+1)*V], int32(r.sh.VocabLo), k)
		// TopK returns fewer when the slice holds NaNs; pad with -Inf ids
		// outside the vocabulary so every row has Width entries.
		for len(r.cands) < k {
			r.cands = append(r.cands, model.Candidate{ID: -1, Logit: negInf})
		}
		res.Cands = append(res.Cands, r.cands...)
	}
}
