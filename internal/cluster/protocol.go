// Package cluster runs one model across several machines as if they were
// one: `braid worker` processes (Worker) and the coordinator (Cluster, rank
// 0, which holds a shard too and implements engine.Backend).
//
// Each worker has two kinds of connections. The session is one connection
// from the coordinator (a dist TCP mesh of two: the handshake checks the
// protocol version, the build digest and the shared secret, and exchanges
// node facts); it carries Info, Load, Connect, Step, Unload, Ping, Profile
// and Netbench requests on its control lane, each answered by one response
// (a Load also by progress lines while it runs). A worker told to stop
// (SIGTERM) answers the request in progress, then sends one unsolicited
// Leaving notice and closes the session, so that the coordinator fails the
// requests it runs at once, naming the rank, instead of at a timeout. The data plane is one dist
// TCP mesh between all ranks of a plan, formed by the Connect after every
// Load: all-reduces and hidden states between pipeline stages go over it
// peer to peer, never through the coordinator.
//
// A decode step is one Step request to each worker (tokens, positions,
// sequence ids, outputs wanted, the KV operations queued since the last
// step, whether full logits are needed, and for the verification steps of
// speculative decoding whether to compute every token as a one-token step
// does and whether to return the trunk's final-normed hidden states) and
// one small result back (each last-stage rank's top candidates per output
// row, or its vocabulary slice when full logits are asked for; the hidden
// states from one rank when asked for).
package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"braid/internal/dist"
	"braid/internal/dist/wire"
	"braid/internal/kvcache"
	"braid/internal/model"
)

// Message kinds: the first byte of every session payload.
const (
	kindInfo     byte = 1 // request: what are you? [+ loadMsg (JSON): where would its model come from?]; response: infoMsg (JSON)
	kindLoad     byte = 2 // request: loadMsg (JSON); responses: progress..., then ok
	kindConnect  byte = 3 // request: connectMsg (JSON): form the data-plane mesh
	kindStep     byte = 4 // request: stepMsg (binary); response: result (binary)
	kindUnload   byte = 5 // request: free the weights
	kindPing     byte = 6 // request: liveness through the step loop
	kindProfile  byte = 7 // request: u8 1 = start profiling, 0 = stop; response: RankProfile (JSON) at stop
	kindChunk    byte = 8 // after a kindStream answer: the next bytes of the weight stream
	kindNetbench byte = 9 // request: netbenchMsg (JSON): join a netbench mesh; responses: progress..., then ok

	kindOK       byte = 64 // response: done, kind-specific payload follows
	kindProgress byte = 65 // response: a progress line; the final answer follows
	kindError    byte = 66 // response: the request failed (UTF-8 text)
	kindStream   byte = 67 // response to Load: no local copy, stream me the slices (kindChunk frames follow)
	// kindLeaving is sent by a worker unasked, after its last response:
	// it stops (UTF-8 reason follows) and closes the session next. Peers
	// of one build only meet (the handshake compares build digests), so
	// a coordinator that does not know it never sees it.
	kindLeaving byte = 68
)

// Limits on what a peer may ask for; a frame beyond them is malformed.
const (
	maxStepTokens = 1 << 20
	maxStepOps    = 1 << 20
	maxTopK       = 1 << 16
	maxJSON       = 1 << 20
)

// infoMsg is a worker's answer to Info: the facts the plan needs.
type infoMsg struct {
	Facts dist.NodeFacts `json:"facts"`
	// Mem is what the worker offers for a shard: its usable memory (lowered
	// by --mem-limit) plus what its current model holds (freed or reused
	// by the next Load).
	Mem      int64  `json:"mem"`
	Threads  int    `json:"threads"`
	DataAddr string `json:"data_addr"` // the data-plane listener
	Loaded   string `json:"loaded,omitempty"`
	// Source answers an Info request that carries a Load (braid plan asks
	// it, loading nothing): where the worker's copy would come from.
	Source *sourceMsg `json:"source,omitempty"`
}

// What a worker does for its weights at a Load (sourceMsg.Action).
const (
	SourceRead    = "read"    // reads its shard from a file it has
	SourcePull    = "pull"    // downloads the model from the hub, then reads its shard
	SourceReceive = "receive" // the coordinator streams it its shard's slices
)

// Where the weights a worker reads are (sourceMsg.From).
const (
	fromLoaded     = "loaded"      // it holds the shard now: nothing is read
	fromPath       = "path"        // its copy at the path the load names
	fromModelsDir  = "models-dir"  // its copy under --models-dir
	fromHubCache   = "hub-cache"   // its hub cache
	fromShardCache = "shard-cache" // the shard it received before, cached
	fromShardFile  = "shard-file"  // a shard file (braid split) under --models-dir
)

// sourceMsg is a worker's answer to "where would the model of this Load
// come from?", decided as Worker.load decides it (Worker.source).
type sourceMsg struct {
	Action string `json:"action"`         // SourceRead, SourcePull or SourceReceive
	From   string `json:"from,omitempty"` // read: one of the from* values
	Path   string `json:"path,omitempty"` // read: the file (from the hub cache: the cache); pull: the hub cache
	// Pull is what a pull downloads (the model's files not in its hub
	// cache, less partial downloads), from Endpoint.
	Pull     int64  `json:"pull,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Why says why it does not read a copy of its own, or pull one.
	Why string `json:"why,omitempty"`
}

// loadMsg asks a worker to hold its shard of a model.
type loadMsg struct {
	SHA256   string      `json:"sha256"`
	Path     string      `json:"path"` // tried first (the same path, or the cluster file's)
	Size     int64       `json:"size"`
	Rank     int         `json:"rank"`
	World    int         `json:"world"`
	TP       int         `json:"tp"`
	PP       int         `json:"pp"`
	Shard    model.Shard `json:"shard"`
	MaxBatch int         `json:"max_batch"`
	// Ctx is the longest context of one sequence (it sizes the scratch).
	Ctx int `json:"ctx"`
	// Positions sizes the KV cache; KVF32 stores it in float32.
	Positions int  `json:"positions"`
	KVF32     bool `json:"kv_f32"`
	// Stream says the coordinator can send the shard's slices when the
	// worker has no copy of the model.
	Stream bool `json:"stream"`
	// Hub names the model on a hub, for a worker to fetch its own copy.
	Hub *HubModel `json:"hub,omitempty"`
}

// cacheSize is the KV cache the load asks for: the same on every rank, so
// that an operation the coordinator's cache accepts fits every worker's.
func (m *loadMsg) cacheSize() model.CacheSize {
	return model.CacheSize{Positions: m.Positions, Ctx: m.Ctx, MaxStep: m.MaxBatch, F32: m.KVF32}
}

// connectMsg asks a loaded worker to join the data-plane mesh.
type connectMsg struct {
	// Addrs[j] is where this rank dials rank j (j > rank).
	Addrs     []string `json:"addrs"`
	TimeoutMS int64    `json:"timeout_ms"`
	Stripes   int      `json:"stripes"`
	// SpinUS is how long the rank's receives poll before parking, in
	// µs (dist.MeshConfig.Spin); negative: never; 0: the worker's own.
	SpinUS int64 `json:"spin_us"`
}

// KV operation kinds replayed on every rank before a step.
const (
	opDrop uint8 = iota + 1
	opReserve
	opCopyPrefix
	opTruncate
	opSnapshot
	opForget
)

// kvOp is one cache operation made on the coordinator since the last step.
type kvOp struct {
	Kind uint8
	A, B kvcache.SeqID
	N    int32
}

func (o kvOp) apply(c *kvcache.Cache) error {
	switch o.Kind {
	case opDrop:
		c.Drop(o.A)
		return nil
	case opReserve:
		return c.Reserve(o.A, int(o.N))
	case opCopyPrefix:
		return c.CopyPrefix(o.A, o.B, int(o.N))
	case opTruncate:
		return c.Truncate(o.A, int(o.N))
	case opSnapshot:
		return c.Snapshot(o.A, int(o.N))
	case opForget:
		c.Forget(o.A, int(o.N))
		return nil
	}
	return fmt.Errorf("unknown KV operation %d", o.Kind)
}

func (o kvOp) String() string {
	switch o.Kind {
	case opDrop:
		return fmt.Sprintf("drop(%d)", o.A)
	case opReserve:
		return fmt.Sprintf("reserve(%d, %d)", o.A, o.N)
	case opCopyPrefix:
		return fmt.Sprintf("copy-prefix(%d <- %d, %d)", o.A, o.B, o.N)
	case opTruncate:
		return fmt.Sprintf("truncate(%d, %d)", o.A, o.N)
	case opSnapshot:
		return fmt.Sprintf("snapshot(%d, %d)", o.A, o.N)
	case opForget:
		return fmt.Sprintf("forget(%d, %d)", o.A, o.N)
	}
	return fmt.Sprintf("op%d", o.Kind)
}

// stepMsg is one Step request.
type stepMsg struct {
	Step uint64
	Full bool
	// Hidden asks the first rank of the last stage for the final-normed
	// hidden state of every output row (an MTP head on the coordinator
	// reads them).
	Hidden bool
	// Exact, when > 0, is kernels.Pool.SetExactColumns for this step on
	// every rank: the products of at most Exact tokens compute each token
	// as a one-token step does (a speculative verification).
	Exact int
	TopK  int
	// Parts is how many micro-batches the ranks cut the batch into (the
	// same cut on every rank; see rank.run): one per stage for a step
	// that runs alone, 1 for a step that overlaps others (engine.Pipeline).
	Parts int
	Ops   []kvOp
	Batch model.Batch
}

// Result modes: what a rank's result carries.
const (
	resNone  byte = 0 // not a last-stage rank: no logits
	resCands byte = 1 // rows x TopK candidates
	resFull  byte = 2 // rows x vocab slice logits
	// resHidden is a bit over the mode: rows x the hidden width of
	// final-normed states follow the logits.
	resHidden byte = 0x80
)

// Step flags (the byte after the step number). A step without the
// speculative ones is the frame it was before they existed, and a peer
// that does not know a bit refuses the frame as malformed.
const (
	stepFull   byte = 1 << 0 // full logits rows
	stepHidden byte = 1 << 1 // return the hidden states (stepMsg.Hidden)
	stepExact  byte = 1 << 2 // a u32 exact-columns bound follows parts (stepMsg.Exact)
	stepFlags       = stepFull | stepHidden | stepExact
)

// appendStep encodes m after the kind byte:
//
//	u8 kind=step | u64 step | u8 flags | u32 topk | u32 parts | [u32 exact if flags&stepExact]
//	| u32 ops | ops x (u8 kind, i32 a, i32 b, i32 n)
//	| u32 tokens | tokens x i32 | pos x i32 | seq x i32 | output x u8
func appendStep(dst []byte, m *stepMsg) []byte {
	le := binary.LittleEndian
	dst = append(dst, kindStep)
	dst = le.AppendUint64(dst, m.Step)
	flags := b2u(m.Full)
	if m.Hidden {
		flags |= stepHidden
	}
	if m.Exact > 0 {
		flags |= stepExact
	}
	dst = append(dst, flags)
	dst = le.AppendUint32(dst, uint32(m.TopK))
	dst = le.AppendUint32(dst, uint32(m.Parts))
	if m.Exact > 0 {
		dst = le.AppendUint32(dst, uint32(m.Exact))
	}
	dst = le.AppendUint32(dst, uint32(len(m.Ops)))
	for _, o := range m.Ops {
		dst = append(dst, o.Kind)
		dst = le.AppendUint32(dst, uint32(o.A))
		dst = le.AppendUint32(dst, uint32(o.B))
		dst = le.AppendUint32(dst, uint32(o.N))
	}
	b := &m.Batch
	dst = le.AppendUint32(dst, uint32(len(b.Tokens)))
	for _, v := range b.Tokens {
		dst = le.AppendUint32(dst, uint32(v))
	}
	for _, v := range b.Pos {
		dst = le.AppendUint32(dst, uint32(v))
	}
	for _, v := range b.Seq {
		dst = le.AppendUint32(dst, uint32(v))
	}
	for _, v := range b.Output {
		dst = append(dst, b2u(v))
	}
	return dst
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// reader decodes a payload with bounds checks: the first short read sets err
// and every later read returns zero.
type reader struct {
	p   []byte
	err error
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.p) < n {
		r.err = fmt.Errorf("%w: %s needs %d bytes, %d left", wire.ErrMalformed, what, n, len(r.p))
		return false
	}
	return true
}

func (r *reader) u8(what string) byte {
	if !r.need(1, what) {
		return 0
	}
	v := r.p[0]
	r.p = r.p[1:]
	return v
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.p)
	r.p = r.p[4:]
	return v
}

func (r *reader) u64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.p)
	r.p = r.p[8:]
	return v
}

// count reads a u32 count and checks it against max and against the bytes
// left (each item at least size bytes), before anything is allocated.
func (r *reader) count(what string, max, size int) int {
	n := r.u32(what)
	if r.err != nil {
		return 0
	}
	if uint64(n) > uint64(max) {
		r.err = fmt.Errorf("%w: %s %d exceeds the limit of %d", wire.ErrMalformed, what, n, max)
		return 0
	}
	if uint64(n)*uint64(size) > uint64(len(r.p)) {
		r.err = fmt.Errorf("%w: %s %d needs %d bytes, %d left", wire.ErrMalformed, what, n, uint64(n)*uint64(size), len(r.p))
		return 0
	}
	return int(n)
}

// parseStep decodes a Step payload (after the kind byte) into m, reusing its
// memory. Every count is checked against the limits and the bytes present.
func parseStep(p []byte, m *stepMsg) error {
	r := reader{p: p}
	m.Step = r.u64("step number")
	flags := r.u8("step flags")
	k := r.u32("top-k")
	if r.err == nil && (flags&^stepFlags != 0 || k > maxTopK) {
		return fmt.Errorf("%w: step flags %#x top-k=%d (known flags %#x, top-k at most %d)", wire.ErrMalformed, flags, k, stepFlags, maxTopK)
	}
	m.Full, m.Hidden, m.TopK = flags&stepFull != 0, flags&stepHidden != 0, int(k)
	parts := r.u32("micro-batch count")
	if r.err == nil && (parts < 1 || parts > maxStepTokens) {
		return fmt.Errorf("%w: step in %d micro-batches (want 1..%d)", wire.ErrMalformed, parts, maxStepTokens)
	}
	m.Parts = int(parts)
	m.Exact = 0
	if flags&stepExact != 0 {
		x := r.u32("exact columns")
		if r.err == nil && (x < 1 || x > maxStepTokens) {
			return fmt.Errorf("%w: exact columns %d (want 1..%d)", wire.ErrMalformed, x, maxStepTokens)
		}
		m.Exact = int(x)
	}
	nops := r.count("KV operation count", maxStepOps, 13)
	m.Ops = m.Ops[:0]
	for i := 0; i < nops && r.err == nil; i++ {
		o := kvOp{Kind: r.u8("op kind"), A: kvcache.SeqID(r.u32("op a")), B: kvcache.SeqID(r.u32("op b")), N: int32(r.u32("op n"))}
		if o.Kind < opDrop || o.Kind > opForget {
			return fmt.Errorf("%w: KV operation %d has kind %d", wire.ErrMalformed, i, o.Kind)
		}
		m.Ops = append(m.Ops, o)
	}
	n := r.count("token count", maxStepTokens, 13)
	if r.err != nil {
		return r.err
	}
	b := &m.Batch
	b.Reset()
	for i := 0; i < n; i++ {
		b.Tokens = append(b.Tokens, int32(r.u32("token")))
	}
	for i := 0; i < n; i++ {
		b.Pos = append(b.Pos, int32(r.u32("position")))
	}
	for i := 0; i < n; i++ {
		b.Seq = append(b.Seq, kvcache.SeqID(r.u32("sequence")))
	}
	for i := 0; i < n; i++ {
		v := r.u8("output flag")
		if v > 1 {
			return fmt.Errorf("%w: output flag %d of token %d", wire.ErrMalformed, v, i)
		}
		b.Output = append(b.Output, v == 1)
	}
	if r.err != nil {
		return r.err
	}
	if len(r.p) != 0 {
		return fmt.Errorf("%w: %d bytes after the step", wire.ErrMalformed, len(r.p))
	}
	return nil
}

// result is one rank's answer to a Step.
type result struct {
	Mode    byte // resNone, resCands or resFull (without resHidden)
	Rows    int
	Width   int               // candidates per row, or the vocabulary slice's width
	Compute uint64            // nanoseconds the rank spent in Forward
	Reduce  uint64            // of which in all-reduces
	Stage   uint64            // of which waiting for or sending to other pipeline stages
	Cands   []model.Candidate // Rows x Width, resCands
	Logits  []float32         // Rows x Width, resFull
	// HiddenWidth > 0: Hidden holds Rows x HiddenWidth final-normed
	// states (a step that asked for them, from the rank that sends them).
	HiddenWidth int
	Hidden      []float32
}

// maxHiddenWidth bounds a result's hidden-state width (a model's Embd).
const maxHiddenWidth = 1 << 20

// appendResult encodes r:
//
//	u8 kind=ok | u8 mode [| resHidden] | u32 rows | u32 width | u64 compute ns | u64 all-reduce ns
//	| u64 pipeline ns | [u32 hidden width if resHidden] | payload | [rows x hidden width x f32]
func appendResult(dst []byte, r *result) []byte {
	le := binary.LittleEndian
	mode := r.Mode
	if r.HiddenWidth > 0 {
		mode |= resHidden
	}
	dst = append(dst, kindOK, mode)
	dst = le.AppendUint32(dst, uint32(r.Rows))
	dst = le.AppendUint32(dst, uint32(r.Width))
	dst = le.AppendUint64(dst, r.Compute)
	dst = le.AppendUint64(dst, r.Reduce)
	dst = le.AppendUint64(dst, r.Stage)
	if r.HiddenWidth > 0 {
		dst = le.AppendUint32(dst, uint32(r.HiddenWidth))
	}
	switch r.Mode {
	case resCands:
		for _, c := range r.Cands {
			dst = le.AppendUint32(dst, uint32(c.ID))
			dst = le.AppendUint32(dst, math.Float32bits(c.Logit))
		}
	case resFull:
		for _, v := range r.Logits {
			dst = le.AppendUint32(dst, math.Float32bits(v))
		}
	}
	if r.HiddenWidth > 0 {
		for _, v := range r.Hidden[:r.Rows*r.HiddenWidth] {
			dst = le.AppendUint32(dst, math.Float32bits(v))
		}
	}
	return dst
}

// parseResult decodes a result payload (after the kind byte) into r, reusing
// its memory.
func parseResult(p []byte, r *result) error {
	rd := reader{p: p}
	mode := rd.u8("result mode")
	rows, width := rd.u32("rows"), rd.u32("width")
	r.Compute = rd.u64("compute time")
	r.Reduce = rd.u64("all-reduce time")
	r.Stage = rd.u64("pipeline time")
	hw := uint32(0)
	if mode&resHidden != 0 {
		hw = rd.u32("hidden width")
		if rd.err == nil && (hw < 1 || hw > maxHiddenWidth) {
			return fmt.Errorf("%w: hidden width %d (want 1..%d)", wire.ErrMalformed, hw, maxHiddenWidth)
		}
	}
	if rd.err != nil {
		return rd.err
	}
	r.Mode = mode &^ resHidden
	if r.Mode > resFull {
		return fmt.Errorf("%w: result mode %d", wire.ErrMalformed, mode)
	}
	size := uint64(0)
	switch r.Mode {
	case resCands:
		size = 8
	case resFull:
		size = 4
	}
	if rows > maxStepTokens || uint64(rows)*(uint64(width)*size+4*uint64(hw)) != uint64(len(rd.p)) {
		return fmt.Errorf("%w: result of %d rows x %d (mode %d, hidden width %d) in %d bytes", wire.ErrMalformed, rows, width, r.Mode, hw, len(rd.p))
	}
	r.Rows, r.Width, r.HiddenWidth = int(rows), int(width), int(hw)
	n := int(rows) * int(width)
	r.Cands, r.Logits, r.Hidden = r.Cands[:0], r.Logits[:0], r.Hidden[:0]
	le := binary.LittleEndian
	switch r.Mode {
	case resCands:
		for i := 0; i < n; i++ {
			b := rd.p[8*i:]
			r.Cands = append(r.Cands, model.Candidate{ID: int32(le.Uint32(b)), Logit: math.Float32frombits(le.Uint32(b[4:]))})
		}
	case resFull:
		for i := 0; i < n; i++ {
			r.Logits = append(r.Logits, math.Float32frombits(le.Uint32(rd.p[4*i:])))
		}
	}
	hp := rd.p[uint64(n)*size:]
	for i := 0; i < int(rows)*int(hw); i++ {
		r.Hidden = append(r.Hidden, math.Float32frombits(le.Uint32(hp[4*i:])))
	}
	return nil
}

// appendJSON encodes a JSON message after its kind byte.
func appendJSON(dst []byte, kind byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(append(dst, kind), b...), nil
}

// parseJSON decodes a bounded JSON payload.
func parseJSON(p []byte, v any) error {
	if len(p) > maxJSON {
		return fmt.Errorf("%w: JSON message of %d bytes exceeds %d", wire.ErrMalformed, len(p), maxJSON)
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: %v", wire.ErrMalformed, err)
	}
	return nil
}

// errorPayload is a kindError response.
func errorPayload(dst []byte, err error) []byte {
	msg := err.Error()
	if len(msg) > 8<<10 {
		msg = msg[:8<<10] + "..."
	}
	return append(append(dst, kindError), msg...)
}

// remoteError is a failure a worker reported about a request.
type remoteError struct {
	Rank int
	Addr string
	Msg  string
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("rank %d (%s): %s", e.Rank, e.Addr, e.Msg)
}

// leftError is a worker that left the cluster in order: it was told to
// stop and said so before closing its session.
type leftError struct {
	Rank   int
	Addr   string
	Reason string
}

func (e *leftError) Error() string {
	return fmt.Sprintf("rank %d (%s) left the cluster: %s", e.Rank, e.Addr, e.Reason)
}

var errNotFormed = errors.New("cluster: not formed")

// errStreamWanted is a worker's answer to Load when it has no copy of the
// model and waits for the coordinator to stream the slices.
var errStreamWanted = errors.New("the worker asks for its slices")
