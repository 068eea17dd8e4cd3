package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/sample"
)

// Backend is what the engine runs a model on: one node (Local) or a cluster
// of ranks (package cluster). The Generator and the Scheduler need only
// this, so they run unchanged on a cluster.
//
// The KV methods are those of kvcache.Cache. On a cluster they act on the
// coordinator's cache at once (so Has, Len, Stats and the success of Reserve
// are answered locally) and are replayed on every other rank before the next
// step, in the same order, so all caches stay in step.
//
// One goroutine uses a Backend at a time, its figures included: what other
// goroutines show (the server's /metrics) comes from what that goroutine
// publishes (Scheduler.Counters) and from the methods a backend documents
// as safe from any goroutine (Ranked).
type Backend interface {
	// Vocab is the size of a full logits row.
	Vocab() int
	// Forward runs the batch and writes one row of Vocab() values per
	// output token, in batch order. out says what the rows must hold: full
	// logits, or only each rank's best candidates (the rest -Inf), which
	// is enough for the sampling parameters NeedFor accepts. A Local
	// backend always writes full rows.
	Forward(b *model.Batch, out Output, logits []float32) error

	Drop(seq kvcache.SeqID)
	Has(seq kvcache.SeqID) bool
	Len(seq kvcache.SeqID) int
	Reserve(seq kvcache.SeqID, n int) error
	CopyPrefix(dst, src kvcache.SeqID, n int) error
	Truncate(seq kvcache.SeqID, n int) error
	// KVConfig and KVStats describe the (coordinator's) cache: block size
	// and count, blocks in use. Every rank's cache has the same blocks.
	KVConfig() kvcache.Config
	KVStats() kvcache.Stats

	// Close releases what the backend owns (on a cluster: the connections;
	// the workers keep their weights for a fast re-join).
	Close() error
}

// Resumer is a Backend that says where a sequence can continue and keeps
// the snapshots that let a model with recurrent layers (whose state holds
// the last position only) continue elsewhere than at a sequence's end:
// kvcache.Cache's ResumePoint, Snapshot and Forget, on every rank. Local
// and the cluster implement it; without it a recurrent model's sequences
// resume at their end only (see resumePoint).
type Resumer interface {
	ResumePoint(seq kvcache.SeqID, n int) int
	Snapshot(seq kvcache.SeqID, n int) error
	Forget(seq kvcache.SeqID, from int)
}

// resumePoint is the longest length up to n (and Len(seq)) at which seq
// can continue on b.
func resumePoint(b Backend, seq kvcache.SeqID, n int) int {
	if r, ok := b.(Resumer); ok {
		return r.ResumePoint(seq, n)
	}
	n = min(n, b.Len(seq))
	if b.KVConfig().Recurrent() && n != b.Len(seq) {
		return 0
	}
	return n
}

// snapshot keeps seq's state at length n on b: nothing to do for a model
// without recurrent layers, an error for one on a backend that cannot.
func snapshot(b Backend, seq kvcache.SeqID, n int) error {
	if r, ok := b.(Resumer); ok {
		return r.Snapshot(seq, n)
	}
	if b.KVConfig().Recurrent() {
		return fmt.Errorf("%w: this backend keeps no snapshots of recurrent state", kvcache.ErrNotResumable)
	}
	return nil
}

// forget releases seq's snapshots from length from on b.
func forget(b Backend, seq kvcache.SeqID, from int) {
	if r, ok := b.(Resumer); ok {
		r.Forget(seq, from)
	}
}

// Healer is a Backend that can check and repair itself between requests: a
// cluster notices a rank that left and re-forms once it is back, without
// waiting for a request to fail. The scheduler calls Heal on its own
// goroutine every HealInterval while it has no request.
type Healer interface {
	// Heal returns nil when the next step can run, else why not, wrapping
	// ErrUnavailable.
	Heal() error
}

// ErrUnavailable is wrapped by the errors of a backend that cannot run a
// step now but may later (a cluster whose node died re-forms by itself):
// the server answers those requests with 503, not 500.
var ErrUnavailable = errors.New("backend unavailable")

// Output says what a step must return for its output rows.
type Output struct {
	// Full asks for whole rows of logits: logprobs, `braid logits`, and
	// sampling parameters that candidates cannot serve exactly.
	Full bool
	// TopK is how many of its best logits each rank of a vocabulary-
	// parallel output head returns per row when Full is false (at least 1).
	// The rows then hold the merged candidates and -Inf elsewhere.
	TopK int
}

// FullLogits asks for whole rows.
var FullLogits = Output{Full: true}

// Merge combines the needs of several sequences in one step: full rows if
// any needs them, else the most candidates any needs.
func (o Output) Merge(p Output) Output {
	return Output{Full: o.Full || p.Full, TopK: max(o.TopK, p.TopK)}
}

// NeedFor is the output a sequence sampled with p needs for its next token
// to be exactly what Sample over the full row would pick (same token for the
// same PRNG state), given the number of tokens in its penalty history
// (prompt tokens accepted plus generated ones) and whether logprobs are
// reported. It asks for candidates when they are exact:
//
//   - Temperature 0 (greedy): 1+P candidates per rank,
//   - TopK > 0: TopK+P candidates per rank (the global top K lies inside
//     the union of the per-rank top Ks; top_p, min_p and temperature act
//     only on those K),
//
// where P bounds the distinct penalised tokens: 0 without penalties, else
// min(window, history). Penalties must only lower logits (RepeatPenalty >=
// 1, frequency and presence penalties >= 0): a boosted token could come from
// outside a rank's list. Everything else asks for full rows: TopK 0 with a
// temperature (the whole distribution matters), boosting penalties, and
// logprobs (the normaliser needs every logit). See sample.SampleCandidates.
func NeedFor(p sample.Params, history int, logprobs bool) Output {
	if logprobs {
		return FullLogits
	}
	penalised := 0
	if p.RepeatLastN != 0 && (p.RepeatPenalty != 1 || p.FrequencyPenalty != 0 || p.PresencePenalty != 0) {
		if p.RepeatPenalty < 1 || p.FrequencyPenalty < 0 || p.PresencePenalty < 0 {
			return FullLogits
		}
		penalised = history
		if p.RepeatLastN > 0 {
			penalised = min(penalised, p.RepeatLastN)
		}
	}
	switch {
	case p.Temperature <= 0:
		return Output{TopK: 1 + penalised}
	case p.TopK > 0:
		return Output{TopK: p.TopK + penalised}
	}
	return FullLogits
}

// Local is a Backend on one node: a model and its KV cache.
type Local struct {
	M     *model.Model
	Cache *kvcache.Cache
}

// NewLocal wraps a model and its cache.
func NewLocal(m *model.Model, cache *kvcache.Cache) *Local { return &Local{M: m, Cache: cache} }

// Vocab is the model's vocabulary size.
func (l *Local) Vocab() int { return l.M.Cfg.Vocab }

// Forward runs the batch on the model; a single node always has full rows,
// so out is ignored.
func (l *Local) Forward(b *model.Batch, _ Output, logits []float32) error {
	return l.M.Forward(l.Cache, b, logits)
}

// Drop forgets a sequence.
func (l *Local) Drop(seq kvcache.SeqID) { l.Cache.Drop(seq) }

// Has reports whether the cache holds seq.
func (l *Local) Has(seq kvcache.SeqID) bool { return l.Cache.Has(seq) }

// Len is the number of positions seq holds.
func (l *Local) Len(seq kvcache.SeqID) int { return l.Cache.Len(seq) }

// Reserve makes room for n positions of seq.
func (l *Local) Reserve(seq kvcache.SeqID, n int) error { return l.Cache.Reserve(seq, n) }

// CopyPrefix makes dst share the first n positions of src.
func (l *Local) CopyPrefix(dst, src kvcache.SeqID, n int) error {
	return l.Cache.CopyPrefix(dst, src, n)
}

// Truncate shortens seq to n positions.
func (l *Local) Truncate(seq kvcache.SeqID, n int) error { return l.Cache.Truncate(seq, n) }

// ResumePoint is the longest length up to n at which seq can continue.
func (l *Local) ResumePoint(seq kvcache.SeqID, n int) int { return l.Cache.ResumePoint(seq, n) }

// Snapshot keeps seq's recurrent state at length n.
func (l *Local) Snapshot(seq kvcache.SeqID, n int) error { return l.Cache.Snapshot(seq, n) }

// Forget releases seq's snapshots at lengths from and above.
func (l *Local) Forget(seq kvcache.SeqID, from int) { l.Cache.Forget(seq, from) }

// KVConfig is the cache's configuration.
func (l *Local) KVConfig() kvcache.Config { return l.Cache.Config() }

// KVStats is the cache's pool snapshot.
func (l *Local) KVStats() kvcache.Stats { return l.Cache.Stats() }

// Close does nothing: the caller owns the model and its cache.
func (l *Local) Close() error { return nil }

// FillCandidates writes candidates into a full row: -Inf everywhere, then
// each candidate's logit at its id. Sample over such a row picks what
// sample.SampleCandidates picks over the list.
func FillCandidates(row []float32, cands []model.Candidate) {
	inf := float32(math.Inf(-1))
	for i := range row {
		row[i] = inf
	}
	for _, c := range cands {
		if c.ID >= 0 && int(c.ID) < len(row) {
			row[c.ID] = c.Logit
		}
	}
}

// RankStats are one rank's running totals on a backend spread over several
// ranks: the steps it ran, the time in them, and the parts of that time it
// spent waiting in all-reduces and for the neighbouring pipeline stages.
type RankStats struct {
	Rank      int
	Addr      string // "" for this node
	Steps     uint64
	Step      time.Duration // in the rank's forward passes, waits included
	AllReduce time.Duration // all-reduce calls, from the call to the summed result
	Pipeline  time.Duration // receiving from the previous stage, sending to the next
}

// Link is one data-plane connection of a cluster: rank From reaches rank To
// at Addr over Transport ("tcp").
type Link struct {
	From, To  int
	Addr      string
	Transport string
}

// Ranked is implemented by backends spread over several ranks (a cluster),
// so that the server can export their per-rank figures. Its methods are
// safe to call from any goroutine while steps run.
type Ranked interface {
	RankStats() []RankStats
	Links() []Link
}
