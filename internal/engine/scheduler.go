package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/sample"
)

// ErrQueueFull is returned by Submit when the waiting queue is at its bound;
// a server answers it with 429 so clients back off instead of piling up.
var ErrQueueFull = errors.New("engine: request queue is full")

// ErrStopped is the error of requests still running or queued when the
// scheduler stops.
var ErrStopped = errors.New("engine: scheduler stopped")

// SchedulerConfig sizes a Scheduler.
type SchedulerConfig struct {
	// Parallel is the most sequences decoded together in one step.
	Parallel int
	// Context is the most positions one sequence may reach.
	Context int
	// StepTokens is the token budget of one step: every decoding sequence
	// takes one, prompt chunks share the rest. 0 means 512.
	StepTokens int
	// MaxQueue is the most requests waiting for a slot; Submit beyond it
	// fails with ErrQueueFull. 0 means 16*Parallel; negative means none
	// wait (a request is taken only when a slot is free).
	MaxQueue int
	// PrefixCache is the most finished sequences kept for prefix reuse (they
	// also yield their blocks whenever a new request needs room). 0 means
	// 4*Parallel; negative disables prefix reuse.
	PrefixCache int
	// IsEOG reports end-of-generation tokens; they end a sequence with
	// FinishStop and are not emitted.
	IsEOG func(id int32) bool
	// ContextShift lets a sequence that fills the context go on: the
	// tokens after its Job.NKeep are halved (the older half dropped) and
	// what is kept is evaluated again (see shift). Off, a full context
	// ends the sequence with FinishLength.
	ContextShift bool
	// Spec, when set, decodes speculatively inside the batches (see
	// specsched.go); its Stats is not used (see Scheduler.SpecStats).
	Spec *Spec
	// NoOverlap runs a Pipeline backend's steps one at a time, each over
	// all running sequences (as micro-batches), instead of overlapping
	// the steps of groups of them (pipeline.go); for A/B measurements and
	// the tests that compare the two.
	NoOverlap bool
}

// Job is one generation request.
type Job struct {
	Prompt []int32
	// MaxTokens is the most tokens to generate; the sequence also ends at
	// the scheduler's Context.
	MaxTokens int
	Sampler   *sample.Sampler
	// TopLogprobs asks for the sampled token's logprob (0) and the k most
	// likely alternatives (k > 0); negative asks for none.
	TopLogprobs int
	// IgnoreEOG bans the end-of-generation tokens (their logits are set
	// to -Inf before sampling, as llama-server's ignore_eos does), so the
	// sequence runs to its limit (load generators use it to get outputs
	// of a fixed length).
	IgnoreEOG bool
	// NKeep is how many tokens from the start a context shift keeps (the
	// caller counts a beginning-of-sequence token in); negative keeps the
	// whole prompt. It is capped at Context-4 so that a shift always
	// frees room. NDiscard is how many tokens after them a shift drops;
	// 0 means half of those after NKeep.
	NKeep, NDiscard int
	// Constraint, when set, limits the tokens sampled (a grammar); its
	// sequence always gets full rows of logits.
	Constraint Constraint
}

// Token is one generated token as the scheduler emits it.
type Token struct {
	ID      int32
	Logprob float32          // of the sampled token, when asked for
	Top     []sample.Logprob // when TopLogprobs > 0
	At      time.Time        // when the step that produced it ended
}

// Finish says why a sequence ended.
type Finish int

// The reasons a sequence ends.
const (
	FinishNone      Finish = iota // still running
	FinishStop                    // an end-of-generation token
	FinishLength                  // MaxTokens or the context reached
	FinishCancelled               // the request's context ended
	FinishError                   // a step failed or the scheduler stopped
)

func (f Finish) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	}
	return "running"
}

// Result is the outcome of a finished Stream.
type Result struct {
	Finish       Finish
	Err          error
	PromptTokens int
	// CachedTokens is how many prompt tokens were reused from a cached
	// sequence instead of being evaluated.
	CachedTokens int
	GenTokens    int
	Admitted     time.Time // when the request got a slot
	// Shifts counts the context shifts of the sequence (SchedulerConfig.
	// ContextShift); a sequence whose first tokens were dropped so is
	// "truncated" in llama-server's words.
	Shifts int
	// CacheLen is how many tokens the sequence held in the cache at its
	// end (its prompt and generated tokens, less what shifts dropped).
	CacheLen int
}

// Stream carries one request's tokens from the scheduler to its caller. The
// scheduler never blocks on it: tokens pile up in a slice and a one-slot
// channel signals that there is news, so a slow client slows nobody else.
type Stream struct {
	ctx    context.Context
	job    Job
	notify chan struct{}

	mu     sync.Mutex
	toks   []Token
	done   bool
	result Result
}

// Recv appends the tokens produced since the last call to dst and reports
// whether the stream has ended; it waits until there is at least one token or
// the end. It returns ctx's error if ctx ends first.
func (st *Stream) Recv(ctx context.Context, dst []Token) ([]Token, bool, error) {
	for {
		st.mu.Lock()
		n := len(st.toks)
		dst = append(dst, st.toks...)
		st.toks = st.toks[:0]
		done := st.done
		st.mu.Unlock()
		if n > 0 || done {
			return dst, done, nil
		}
		select {
		case <-st.notify:
		case <-ctx.Done():
			return dst, false, ctx.Err()
		}
	}
}

// Result is the outcome; valid once Recv has reported the end.
func (st *Stream) Result() Result {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.result
}

func (st *Stream) push(t Token) {
	st.mu.Lock()
	st.toks = append(st.toks, t)
	st.mu.Unlock()
	st.wake()
}

func (st *Stream) finish(r Result) {
	st.mu.Lock()
	st.done = true
	st.result = r
	st.mu.Unlock()
	st.wake()
}

func (st *Stream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// Counters are the scheduler's running totals and gauges, read without
// stopping it: the loop publishes them, so reading them never touches the
// backend, which belongs to the loop (a cluster replaces its mesh and
// empties its cache while it re-forms).
type Counters struct {
	Steps            int64
	PromptTokens     int64 // evaluated prompt tokens (reused ones excluded)
	ReusedTokens     int64 // prompt tokens taken from cached sequences
	GenTokens        int64
	Queue            int // waiting for a slot
	Busy             int // sequences holding a slot
	KVBlocksUsed     int // includes blocks of cached finished sequences
	KVBlocksTotal    int
	CachedSequences  int // finished sequences kept for prefix reuse
	MaxStepSequences int // the most sequences decoded in one step so far
	// MaxInFlight is the most steps in flight at once on a Pipeline
	// backend (1 without overlap); OverlappedSteps counts the steps
	// launched while another was still in flight.
	MaxInFlight     int
	OverlappedSteps int64
	// StepSequences[k] counts steps that decoded k sequences together
	// (k = 0: prefill only).
	StepSequences []int64
	// ContextShifts counts the context shifts made; ShiftTokens the tokens
	// evaluated again after them (not counted in PromptTokens).
	ContextShifts, ShiftTokens int64
}

// seq is one admitted request inside the loop.
type seq struct {
	st       *Stream
	id       kvcache.SeqID
	prompt   []int32
	toks     []int32 // tokens in the cache, then the next one to feed
	fed      int     // prompt tokens in the cache
	gen      int
	limit    int // positions reserved: prompt + the most it may generate
	cached   int
	admitted time.Time
	logits   int   // row of this step's logits, -1 when none
	inFlight bool  // in a pipelined step not yet collected
	ended    bool  // finished while its group was collected
	failed   error // why the drafter refused its prompt's states, or a context shift failed (ended after the step)
	promptN  int   // the request's prompt length (prompt is replaced by a context shift)
	shifts   int   // context shifts made
}

type cachedSeq struct {
	id   kvcache.SeqID
	toks []int32
}

// Scheduler runs many sequences on one model with continuous batching: each
// step evaluates one token of every decoding sequence plus chunks of the
// prompts being read, under a token budget. One goroutine (Run) owns the model
// and the cache; callers reach it only through Submit and Streams.
type Scheduler struct {
	b   Backend
	cfg SchedulerConfig

	incoming chan *Stream
	pending  atomic.Int64 // submitted and not yet admitted (or dropped)
	running  atomic.Bool

	// written by the loop, read by Counters
	steps, promptToks, reusedToks, genToks  atomic.Int64
	shifts, shiftToks                       atomic.Int64
	busy, kvUsed, kvTotal, cachedN, maxStep atomic.Int64
	stepSeqs                                []atomic.Int64

	// degraded is why the last step (or Heal) failed with ErrUnavailable
	// (a cluster rank down), "" after a step or Heal succeeds: /health
	// and /ready report it.
	degraded atomic.Pointer[string]

	// loop state
	nextID  kvcache.SeqID
	waiting []*Stream
	active  []*seq
	lru     []cachedSeq // oldest first
	batch   model.Batch
	logits  []float32
	spec    *schedSpec // speculative decoding, or nil
	eog     []int32    // the end-of-generation tokens, which IgnoreEOG bans

	// Overlapped steps on a Pipeline backend (pipeline.go): the groups
	// in flight, oldest first, and spare group slices.
	pipe                    Pipeline // nil: one step at a time
	flight, groupPool       [][]*seq
	overlapped, maxInFlight atomic.Int64

	// Work run between steps (exclusive.go): requests come on exclusive
	// (unbuffered: a send is taken by the loop or not at all); the one
	// taken waits in exclusiveNext while a pipelined step drains; stopped
	// is closed when the loop has ended.
	exclusive     chan *exclusiveReq
	exclusiveNext *exclusiveReq
	stopped       chan struct{}
}

// Degraded is why the backend could not run the last step (a cluster rank
// down), or "" when the last step ran. It clears with the next good step,
// or when a Healer backend says it can run one again.
func (s *Scheduler) Degraded() string {
	if p := s.degraded.Load(); p != nil {
		return *p
	}
	return ""
}

// NewScheduler makes a scheduler over a backend (one node or a cluster);
// call Run to start it. The backend's cache must hold at least
// Parallel*Context positions so that every slot can reach the full context.
func NewScheduler(b Backend, cfg SchedulerConfig) (*Scheduler, error) {
	if cfg.Parallel <= 0 {
		return nil, fmt.Errorf("engine: parallel %d: need at least 1", cfg.Parallel)
	}
	if cfg.Context <= 1 {
		return nil, fmt.Errorf("engine: context %d: need at least 2", cfg.Context)
	}
	if cfg.StepTokens == 0 {
		cfg.StepTokens = 512
	}
	if cfg.StepTokens < cfg.Parallel {
		return nil, fmt.Errorf("engine: step budget %d below parallel %d leaves decoding sequences without a token", cfg.StepTokens, cfg.Parallel)
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = 16 * cfg.Parallel
	}
	if cfg.MaxQueue < 0 {
		cfg.MaxQueue = 0
	}
	if cfg.PrefixCache == 0 {
		cfg.PrefixCache = 4 * cfg.Parallel
	}
	cc := b.KVConfig()
	if have, need := cc.Blocks*cc.BlockSize, cfg.Parallel*cfg.Context; have < need {
		return nil, fmt.Errorf("engine: cache holds %d positions, %d slots of context %d need %d", have, cfg.Parallel, cfg.Context, need)
	}
	s := &Scheduler{
		b: b, cfg: cfg,
		incoming: make(chan *Stream, cfg.MaxQueue+cfg.Parallel),
		stepSeqs: make([]atomic.Int64, cfg.Parallel+1),
		logits:   make([]float32, cfg.Parallel*b.Vocab()),

		exclusive: make(chan *exclusiveReq),
		stopped:   make(chan struct{}),
	}
	if cfg.ContextShift && cfg.Spec != nil {
		return nil, fmt.Errorf("engine: context shift with speculative decoding is not supported (the drafter's states would have to be shifted too)")
	}
	if cfg.IsEOG != nil {
		// The banned list of Job.IgnoreEOG.
		for id := range int32(b.Vocab()) {
			if cfg.IsEOG(id) {
				s.eog = append(s.eog, id)
			}
		}
	}
	if cfg.Spec != nil {
		if err := s.initSpec(); err != nil {
			return nil, err
		}
	}
	if p, ok := b.(Pipeline); ok && p.Depth() > 1 && cfg.Spec == nil && !cfg.NoOverlap {
		s.pipe = p
	}
	s.publishKV()
	return s, nil
}

// Config returns the configuration in effect (defaults filled in).
func (s *Scheduler) Config() SchedulerConfig { return s.cfg }

// Submit queues a job. The stream ends when the job finishes, when ctx ends
// (within one step), or when the scheduler stops. The prompt must be
// non-empty and shorter than Context; that is the caller's check to make
// with a clear message, so here it is only an error.
func (s *Scheduler) Submit(ctx context.Context, j Job) (*Stream, error) {
	if len(j.Prompt) == 0 {
		return nil, fmt.Errorf("engine: empty prompt")
	}
	if len(j.Prompt) >= s.cfg.Context {
		return nil, fmt.Errorf("engine: prompt of %d tokens leaves no room in a context of %d", len(j.Prompt), s.cfg.Context)
	}
	if j.Sampler == nil {
		return nil, fmt.Errorf("engine: job without a sampler")
	}
	if j.MaxTokens < 0 {
		return nil, fmt.Errorf("engine: max tokens %d is negative", j.MaxTokens)
	}
	// Waiting beyond the slots is pending+busy-Parallel. busy lags the
	// loop a little, but busy >= 0 keeps pending <= Parallel+MaxQueue, the
	// channel's capacity, so the send below never blocks.
	if p := s.pending.Add(1); p+s.busy.Load() > int64(s.cfg.Parallel+s.cfg.MaxQueue) {
		s.pending.Add(-1)
		return nil, fmt.Errorf("%w (%d slots busy, %d may wait)", ErrQueueFull, s.cfg.Parallel, s.cfg.MaxQueue)
	}
	st := &Stream{ctx: ctx, job: j, notify: make(chan struct{}, 1), toks: make([]Token, 0, 16)}
	s.incoming <- st
	return st, nil
}

// Counters returns a snapshot of the totals and gauges.
func (s *Scheduler) Counters() Counters {
	c := Counters{
		Steps: s.steps.Load(), PromptTokens: s.promptToks.Load(), ReusedTokens: s.reusedToks.Load(),
		GenTokens: s.genToks.Load(), Queue: int(s.pending.Load()), Busy: int(s.busy.Load()),
		KVBlocksUsed: int(s.kvUsed.Load()), KVBlocksTotal: int(s.kvTotal.Load()),
		CachedSequences: int(s.cachedN.Load()), MaxStepSequences: int(s.maxStep.Load()),
		MaxInFlight: int(s.maxInFlight.Load()), OverlappedSteps: s.overlapped.Load(),
		StepSequences: make([]int64, len(s.stepSeqs)),
		ContextShifts: s.shifts.Load(), ShiftTokens: s.shiftToks.Load(),
	}
	for i := range s.stepSeqs {
		c.StepSequences[i] = s.stepSeqs[i].Load()
	}
	return c
}

// publishKV stores the cache's occupancy for Counters; only the goroutine
// that owns the backend (NewScheduler's caller, then Run) calls it.
func (s *Scheduler) publishKV() {
	st := s.b.KVStats()
	s.kvUsed.Store(int64(st.BlocksUsed))
	s.kvTotal.Store(int64(st.BlocksTotal))
}

// Running reports whether Run is active.
func (s *Scheduler) Running() bool { return s.running.Load() }

// Start runs Run in a goroutine of its own and returns the channel closed
// when Run has returned. Running is true when Start returns: a server that
// says it is ready right after must not answer its first request "scheduler
// is not running" because the goroutine has not been scheduled yet.
func (s *Scheduler) Start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	s.running.Store(true)
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	return done
}

// Run is the scheduler's loop; it owns the model and the cache until it
// returns, which it does when ctx ends, after failing every request it still
// holds with ErrStopped.
func (s *Scheduler) Run(ctx context.Context) error {
	s.running.Store(true)
	defer s.running.Store(false)
	defer close(s.stopped)
	defer s.failExclusive()
	defer s.shutdown()
	healer, _ := s.b.(Healer)
	var heal *time.Timer
	if healer != nil {
		heal = time.NewTimer(HealInterval)
		defer heal.Stop()
	}
	for {
		if len(s.active) == 0 && len(s.waiting) == 0 {
			var tick <-chan time.Time
			if heal != nil {
				heal.Reset(HealInterval)
				tick = heal.C
			}
			select {
			case st := <-s.incoming:
				s.waiting = append(s.waiting, st)
			case r := <-s.exclusive:
				s.exclusiveNext = r
			case <-ctx.Done():
				return ctx.Err()
			case <-tick:
				s.heal(healer)
				continue
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.drain()
		s.dropCancelled()
		s.admit()
		if len(s.active) > 0 {
			s.step()
		}
		s.runExclusive()
		// Cancelled and refused requests free blocks too, not only steps.
		s.publishKV()
	}
}

// HealInterval is how often an idle scheduler asks a Healer backend how it
// is.
const HealInterval = time.Second

// heal runs h.Heal and records what it says, as a step's outcome is.
func (s *Scheduler) heal(h Healer) {
	err := h.Heal()
	switch {
	case err == nil:
		if s.degraded.Load() != nil {
			s.degraded.Store(nil)
		}
	case errors.Is(err, ErrUnavailable):
		why := err.Error()
		s.degraded.Store(&why)
	}
}

func (s *Scheduler) drain() {
	for {
		select {
		case st := <-s.incoming:
			s.waiting = append(s.waiting, st)
		default:
			return
		}
	}
}

func (s *Scheduler) shutdown() {
	s.drain()
	for _, st := range s.waiting {
		s.pending.Add(-1)
		st.finish(Result{Finish: FinishError, Err: ErrStopped, PromptTokens: len(st.job.Prompt)})
	}
	s.waiting = nil
	for _, q := range s.active {
		s.end(q, FinishError, ErrStopped, false)
	}
	s.active = s.active[:0]
	s.busy.Store(0)
	s.publishKV()
}

// dropCancelled ends the requests whose context is over, so a client that
// went away stops costing compute at the next step.
func (s *Scheduler) dropCancelled() {
	w := s.waiting[:0]
	for _, st := range s.waiting {
		if err := st.ctx.Err(); err != nil {
			s.pending.Add(-1)
			st.finish(Result{Finish: FinishCancelled, Err: err, PromptTokens: len(st.job.Prompt)})
			continue
		}
		w = append(w, st)
	}
	clear(s.waiting[len(w):])
	s.waiting = w
	a := s.active[:0]
	for _, q := range s.active {
		// A sequence in a step in flight ends once the step is collected.
		if err := q.st.ctx.Err(); err != nil && !q.inFlight {
			s.end(q, FinishCancelled, err, false)
			continue
		}
		a = append(a, q)
	}
	clear(s.active[len(a):])
	s.active = a
	s.busy.Store(int64(len(s.active)))
}

// admit gives free slots to waiting requests in arrival order, reusing the
// longest cached prefix and reserving every position the sequence may need,
// so a running sequence never fails for want of blocks.
func (s *Scheduler) admit() {
	for len(s.active) < s.cfg.Parallel && len(s.waiting) > 0 {
		st := s.waiting[0]
		q, err := s.place(st)
		if err != nil {
			if errors.Is(err, kvcache.ErrFull) && len(s.active) > 0 {
				return // room comes back when a running sequence ends
			}
			s.waiting = s.waiting[1:]
			s.pending.Add(-1)
			st.finish(Result{Finish: FinishError, Err: err, PromptTokens: len(st.job.Prompt)})
			continue
		}
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
		s.pending.Add(-1)
		s.active = append(s.active, q)
	}
	if len(s.waiting) == 0 {
		s.waiting = s.waiting[:0:0]
	}
	s.busy.Store(int64(len(s.active)))
}

func (s *Scheduler) place(st *Stream) (*seq, error) {
	j := st.job
	limit := min(len(j.Prompt)+j.MaxTokens, s.cfg.Context)
	id := s.newID()
	q := &seq{st: st, id: id, prompt: j.Prompt, promptN: len(j.Prompt), limit: limit, admitted: time.Now()}
	q.toks = make([]int32, 0, limit+1)
	q.toks = append(q.toks, j.Prompt...)
	// The last prompt token is always evaluated: its logits give the first
	// generated token.
	if best, n := s.longestPrefix(j.Prompt); n > 0 {
		// Evictions inside reserveRetry shift the LRU, so hold the source
		// by id, not index.
		src, srcLen := s.lru[best].id, len(s.lru[best].toks)
		if err := s.reserveRetry(func() error { return s.b.CopyPrefix(id, src, n) }); err == nil {
			q.fed, q.cached = n, n
			if n == srcLen {
				// The new sequence extends the cached one; keeping both
				// would only hold a duplicate entry.
				for i := range s.lru {
					if s.lru[i].id == src {
						s.evict(i)
						break
					}
				}
			}
		}
	}
	if err := s.reserveRetry(func() error { return s.b.Reserve(id, limit) }); err != nil {
		s.b.Drop(id)
		return nil, fmt.Errorf("engine: no KV room for %d positions: %w", limit, err)
	}
	// A model with recurrent layers keeps its state before the prompt's
	// last token, where a later prompt that repeats or extends this one
	// resumes (the state at the end of the sequence serves only one that
	// continues its generated tokens as they are). Best effort: without a
	// slot, even after evicting cached sequences, the prompt just runs.
	if P := len(j.Prompt); P > 1 && s.cfg.PrefixCache > 0 && s.b.KVConfig().Recurrent() {
		_ = s.snapshotRetry(id, P-1)
	}
	for _, t := range j.Prompt {
		j.Sampler.Accept(t)
	}
	s.reusedToks.Add(int64(q.cached))
	return q, nil
}

// snapshotRetry keeps seq's state at length n (snapshot), evicting cached
// sequences (oldest first) while there is no slot for it. (A closure for
// reserveRetry would cost an allocation per verified draft.)
func (s *Scheduler) snapshotRetry(seq kvcache.SeqID, n int) error {
	for {
		err := snapshot(s.b, seq, n)
		if err == nil || !errors.Is(err, kvcache.ErrFull) || len(s.lru) == 0 {
			return err
		}
		s.evict(0)
	}
}

// reserveRetry runs op, evicting cached sequences (oldest first) while it
// fails for want of blocks.
func (s *Scheduler) reserveRetry(op func() error) error {
	for {
		err := op()
		if err == nil || !errors.Is(err, kvcache.ErrFull) || len(s.lru) == 0 {
			return err
		}
		s.evict(0)
	}
}

func (s *Scheduler) newID() kvcache.SeqID {
	for {
		s.nextID++
		if !s.b.Has(s.nextID) {
			return s.nextID
		}
	}
}

// longestPrefix finds the cached sequence from which prompt resumes
// furthest: the longest prefix it shares with prompt (capped at
// len(prompt)-1), cut back to where the cache can continue it (for a
// model with recurrent layers, the sequence's end or a snapshot). It
// returns the sequence's index in the LRU and that length.
func (s *Scheduler) longestPrefix(prompt []int32) (int, int) {
	best, bestN := -1, 0
	for i := len(s.lru) - 1; i >= 0; i-- {
		c := s.lru[i].toks
		n := 0
		for n < len(c) && n < len(prompt)-1 && c[n] == prompt[n] {
			n++
		}
		if n > bestN {
			n = resumePoint(s.b, s.lru[i].id, n)
		}
		if n > bestN {
			best, bestN = i, n
		}
	}
	return best, bestN
}

func (s *Scheduler) evict(i int) {
	s.b.Drop(s.lru[i].id)
	s.lru = append(s.lru[:i], s.lru[i+1:]...)
	s.cachedN.Store(int64(len(s.lru)))
}

// end finishes a sequence and frees its slot's blocks at once; a sequence
// that ended normally stays in the prefix cache (only the positions it wrote)
// for a later request to continue.
func (s *Scheduler) end(q *seq, f Finish, err error, keep bool) {
	n := s.b.Len(q.id)
	r := Result{Finish: f, Err: err, PromptTokens: q.promptN, CachedTokens: q.cached, GenTokens: q.gen, Admitted: q.admitted,
		Shifts: q.shifts, CacheLen: n}
	if keep && s.cfg.PrefixCache > 0 && n > 0 && s.b.Truncate(q.id, n) == nil {
		if len(s.lru) >= s.cfg.PrefixCache {
			s.evict(0)
		}
		s.lru = append(s.lru, cachedSeq{id: q.id, toks: q.toks[:n]})
		s.cachedN.Store(int64(len(s.lru)))
	} else {
		s.b.Drop(q.id)
	}
	if s.spec != nil {
		s.spec.end(q.id)
	}
	// The slot is free before the client hears the result, so counters read
	// after a response never show it busy; the caller's store of the active
	// count after its loop agrees.
	s.busy.Add(-1)
	q.st.finish(r)
}

// step builds one batch (a token of every decoding sequence first, then
// prompt chunks in admission order under the budget), runs it, and samples.
func (s *Scheduler) step() {
	if s.spec != nil {
		s.stepSpec()
		return
	}
	if s.pipe != nil {
		s.stepOverlapped()
		return
	}
	out, decoding := s.buildBatch(s.active)
	err := s.b.Forward(&s.batch, out, s.logits)
	now := time.Now()
	s.countStep(decoding)
	if err != nil {
		s.failAll(err)
		return
	}
	s.stepDone(nil)
	a := s.active[:0]
	vocab := s.b.Vocab()
	for _, q := range s.active {
		if q.logits < 0 {
			a = append(a, q)
			continue
		}
		row := s.logits[q.logits*vocab : (q.logits+1)*vocab]
		if f := s.sampleInto(q, row, now); f != FinishNone {
			s.end(q, f, q.failed, q.failed == nil)
			continue
		}
		a = append(a, q)
	}
	clear(s.active[len(a):])
	s.active = a
	s.busy.Store(int64(len(s.active)))
}

// sampleInto samples q's next token from its logits row and emits it;
// it returns why q ends, or FinishNone.
func (s *Scheduler) sampleInto(q *seq, row []float32, now time.Time) Finish {
	j := q.st.job
	if q.gen >= j.MaxTokens {
		return FinishLength
	}
	if j.IgnoreEOG {
		s.ban(row)
	}
	var id int32
	if j.Constraint != nil {
		if bc, ok := j.Constraint.(BudgetedConstraint); ok {
			// After this token the sequence ends at MaxTokens, at its
			// reserved positions or at the context (see below).
			bc.Budget(min(j.MaxTokens-q.gen, q.limit-len(q.toks), s.cfg.Context-len(q.toks)))
		}
		id = j.Constraint.Sample(j.Sampler, row, j.TopLogprobs >= 0)
	} else {
		id = j.Sampler.Sample(row)
	}
	j.Sampler.Accept(id)
	if !j.IgnoreEOG && s.cfg.IsEOG != nil && s.cfg.IsEOG(id) {
		return FinishStop
	}
	t := Token{ID: id, At: now}
	if j.TopLogprobs >= 0 {
		var logZ float32
		if j.TopLogprobs > 0 {
			t.Top, logZ = sample.TopLogprobs(row, j.TopLogprobs, nil)
		} else {
			logZ = sample.LogSumExp(row)
		}
		t.Logprob = row[id] - logZ
	}
	q.gen++
	s.genToks.Add(1)
	q.toks = append(q.toks, id)
	q.st.push(t)
	if j.Constraint != nil && j.Constraint.Advance(id) {
		return FinishStop // the grammar is complete: nothing may follow
	}
	if q.gen >= j.MaxTokens {
		return FinishLength
	}
	if len(q.toks) >= q.limit || len(q.toks) >= s.cfg.Context {
		// len(q.toks) counts the new token, which would sit at position
		// len-1; at the limit there is no room to feed it.
		if !s.cfg.ContextShift || len(q.toks) < s.cfg.Context {
			return FinishLength
		}
		if err := s.shift(q); err != nil {
			q.failed = err
			return FinishError
		}
	}
	return FinishNone
}

// ban sets the logits of the end-of-generation tokens to -Inf.
func (s *Scheduler) ban(row []float32) {
	for _, id := range s.eog {
		row[id] = float32(math.Inf(-1))
	}
}

// shift makes room in q's full context, as llama-server's context shift
// does: it keeps the first NKeep tokens, drops the NDiscard after them
// (half of the rest by default) and moves the others down. Where
// llama-server moves the cached keys (a RoPE re-rotation), this drops the
// cache after the kept tokens and evaluates the moved ones again, as a
// prompt chunk of the next steps: that is correct for every architecture
// (latent MLA caches, sliding windows, indexer keys, recurrent state,
// which cannot be moved at all) and over every split, where each rank
// replays the Truncate and the chunk is an ordinary step, and it costs
// about one prompt token per generated one (a prompt token is far cheaper
// than a decoded one). The kept tokens' cache is then exactly what the
// model computes for the shortened text.
func (s *Scheduler) shift(q *seq) error {
	j := q.st.job
	n := len(q.toks) - 1 // in the cache; q.toks[n] is the token to feed next
	keep := j.NKeep
	if keep < 0 {
		keep = q.promptN
	}
	keep = max(0, min(keep, s.cfg.Context-4, n))
	left := n - keep
	discard := j.NDiscard
	if discard <= 0 {
		discard = left / 2
	}
	discard = min(discard, max(0, left-1))
	if discard == 0 {
		return fmt.Errorf("engine: context shift of a full context of %d: n_keep %d leaves nothing to drop", s.cfg.Context, keep)
	}
	q.toks = append(q.toks[:keep], q.toks[keep+discard:]...)
	// Where the cache can go on from: keep, or for recurrent layers the
	// snapshot at or before it (0 when none).
	from := resumePoint(s.b, q.id, keep)
	if err := s.b.Truncate(q.id, from); err != nil {
		return fmt.Errorf("engine: context shift: truncating sequence %d to %d: %w", q.id, from, err)
	}
	if err := s.reserveRetry(func() error { return s.b.Reserve(q.id, q.limit) }); err != nil {
		return fmt.Errorf("engine: context shift: reserving %d positions: %w", q.limit, err)
	}
	// The kept tokens after from and the moved ones are fed as a prompt
	// chunk; its last row gives the next token.
	q.prompt, q.fed = q.toks, from
	q.shifts++
	s.shifts.Add(1)
	return nil
}
