// Package server is braid's OpenAI-compatible HTTP API: chat and text
// completions (whole or streamed as server-sent events), the model list,
// health and Prometheus metrics. It talks to the engine's Scheduler only;
// the scheduler's goroutine owns the model.
package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/tokenizer"
	"braid/internal/toolcall"
)

// Config is what the server needs besides the model.
type Config struct {
	// Model is the name /v1/models lists and requests must use.
	Model string
	// Aliases are further names accepted in requests (the file name).
	Aliases []string
	// APIKeys, when any, must be presented as "Authorization: Bearer KEY"
	// on /v1/ endpoints.
	APIKeys []string
	// MaxBodyBytes bounds a request body; 0 means 8 MiB.
	MaxBodyBytes int64
	// Logf receives one line per notable event; nil discards them.
	Logf func(format string, a ...any)
	// ModelPath is the model's file, for /props.
	ModelPath string
	// AccessLog, when set, receives one entry per request (accesslog.go).
	AccessLog func(AccessEntry)
	// Tags are shown with the model in /models (llama-server's --tags).
	Tags []string
	// Defaults are the sampling settings of requests that do not set
	// them (llama-server's --temp, --seed, -n, --keep, ...); the zero
	// value means sample.DefaultParams and no token limit.
	Defaults *Defaults
	// NoMetrics, NoSlots and NoWeb turn /metrics, /slots and the web page
	// off (501, 501 and 404), as llama-server without --metrics, with
	// --no-slots and with --no-ui.
	NoMetrics, NoSlots, NoWeb bool
	// ResponsesStore is how many responses (made with store true) the
	// Responses API keeps for previous_response_id and GET, the oldest
	// forgotten first; 0 means DefaultResponsesStore, negative none.
	// ResponsesTTL is how long each is kept; 0 means DefaultResponsesTTL.
	ResponsesStore int
	ResponsesTTL   time.Duration
	// Started is the process's start, for /metrics' Process-Start-Time-Unix
	// header; zero means when New ran.
	Started time.Time
}

// Defaults are a server's sampling settings for the requests that do not
// set them.
type Defaults struct {
	// Params are the sampler's settings; Params.Seed counts only with
	// SeedSet (else every request gets a random seed).
	Params  sample.Params
	SeedSet bool
	// NPredict is the most tokens a request generates; -1: no limit but
	// the context.
	NPredict int
	// NKeep is how many prompt tokens (after a beginning-of-sequence
	// token) a context shift keeps; -1: all of them.
	NKeep int
}

// DefaultDefaults are llama-server's: sample.DefaultParams, a random seed
// per request, no token limit, n_keep 0.
func DefaultDefaults() *Defaults {
	return &Defaults{Params: sample.DefaultParams(), NPredict: -1}
}

// Backend is a loaded model as the server sees it.
type Backend struct {
	Sched *engine.Scheduler
	Tok   *tokenizer.Tokenizer
	// Template renders chat messages; nil means ChatML.
	Template *chat.Template
	Vocab    int
	// Ranks, when the model runs on a cluster, gives the per-rank step
	// times and the data-plane links for /metrics; nil on one node.
	Ranks engine.Ranked
	// Embed computes embeddings for /v1/embeddings; nil refuses them
	// (embeddings.go).
	Embed Embedder
	// Encoder marks an embedding model (BERT and the like): Sched is nil,
	// Embed serves /v1/embeddings, and the generation endpoints answer 400
	// model_not_generative.
	Encoder bool
	// Cluster describes the ranks for /cluster and the web page; nil on
	// one node (web.go).
	Cluster *ClusterInfo
	// LoadMode is how this node holds the weights (mmap, read, mlock)
	// and LoadReason why, for /props.
	LoadMode, LoadReason string
	// Meta are facts about the model for /models' meta (n_ctx_train,
	// n_embd, n_params, size), as llama-server lists them.
	Meta map[string]any

	// reasoning is how the model's output marks its reasoning, read from
	// the template by SetReady.
	reasoning chat.ReasoningFormat
	// render are the control tokens that chat replies write out although
	// the detokenizer drops control tokens: the reasoning format's tags.
	render map[int32]bool
	// vocabs are the vocabularies and guides of constrained decoding.
	vocabs vocabs
	// tools is how the model writes tool calls, read from the template;
	// fallback is set when the model has no template (ChatML, and with
	// tools the Hermes-style fallback template).
	tools    toolcall.Format
	fallback bool
}

// Server handles the HTTP API. It can answer before the model is loaded
// (health says why it is not ready) and drains on Shutdown.
type Server struct {
	cfg     Config
	metrics *metrics
	created int64

	mu       sync.RWMutex
	backend  *Backend
	notReady string // why requests are refused; "" when ready

	inflight sync.WaitGroup
	draining atomic.Bool
	// busy counts the requests running, probes and metrics aside: a drain
	// waits for them.
	busy atomic.Int64

	extra extraState // the Responses store (responses.go)

	// slots numbers the requests running for /slots (slots.go); slotMu
	// orders submissions and their numbering alike.
	slots  slotBoard
	slotMu sync.Mutex
}

// New makes a server in the "loading" state.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Defaults == nil {
		cfg.Defaults = DefaultDefaults()
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	return &Server{cfg: cfg, metrics: newMetrics(), created: time.Now().Unix(), notReady: "loading model"}
}

// SetReady starts serving requests on b. Call it once the model is loaded
// on every rank and a step has run (braid serve runs a warm-up step): from
// then on /ready answers 200 unless the backend is degraded or the server
// drains.
func (s *Server) SetReady(b *Backend) {
	if b.Template == nil {
		b.Template = chat.ChatML()
		b.fallback = true
	}
	b.reasoning = chat.DetectReasoning(b.Template.Source())
	b.render = b.reasoning.ControlTags(b.Tok)
	b.vocabs.guides = newGuideCache(64)
	s.cfg.Logf("reasoning format from the chat template: %s (%d control tokens written out for it)", b.reasoning, len(b.render))
	var known bool
	b.tools, known = toolcall.Detect(b.Template.Source())
	tags := 0
	for _, tag := range b.tools.Tags() {
		if id, ok := b.Tok.TokenID(tag); ok && b.Tok.IsControl(id) && !b.render[id] {
			b.render[id] = true
			tags++
		}
	}
	switch {
	case b.fallback:
		s.cfg.Logf("tool-call format: hermes (no chat template: ChatML, with tools written the Hermes way)")
	case known:
		s.cfg.Logf("tool-call format from the chat template: %s (%d more control tokens written out for it)", b.tools, tags)
	default:
		s.cfg.Logf("tool-call format: the chat template shows none; calls are read as hermes")
	}
	s.mu.Lock()
	s.backend, s.notReady = b, ""
	s.mu.Unlock()
}

// SetUnavailable makes requests fail with 503 and reason (loading,
// degraded, shutting down).
func (s *Server) SetUnavailable(reason string) {
	s.mu.Lock()
	s.notReady = reason
	s.mu.Unlock()
}

func (s *Server) state() (*Backend, string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.notReady == "" && s.backend != nil && s.backend.Sched != nil && !s.backend.Sched.Running() {
		return s.backend, "scheduler is not running"
	}
	return s.backend, s.notReady
}

// errNotGenerative is the answer of a generation endpoint on an encoder.
func errNotGenerative() *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "model_not_generative",
		Message: "this model is an encoder (embeddings only): it does not generate text; use /v1/embeddings"}
}

// generative wraps an endpoint that needs a generative model: on an
// encoder it answers 400 model_not_generative before reading the request.
func (s *Server) generative(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if b, _ := s.state(); b != nil && b.Encoder {
			writeError(w, errNotGenerative())
			return
		}
		h(w, r)
	}
}

// contextLen is one sequence's context: the scheduler's, or an encoder's
// longest input.
func (b *Backend) contextLen() int {
	if b.Sched == nil {
		if b.Embed != nil {
			return b.Embed.MaxTokens()
		}
		return 0
	}
	return b.Sched.Config().Context
}

func (b *Backend) degraded() string {
	if b.Sched == nil {
		return ""
	}
	return b.Sched.Degraded()
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.auth(s.generative(s.handleChatBatch)))
	mux.HandleFunc("/v1/completions", s.auth(s.generative(s.handleCompletionBatch)))
	mux.HandleFunc("/v1/models", s.auth(s.handleModels))
	mux.HandleFunc("/models", s.auth(s.handleModels))
	mux.HandleFunc("/health", s.handleHealth)
	mux.HandleFunc("/ready", s.handleReady)
	mux.HandleFunc("/metrics", s.handleMetrics)
	s.routeExtra(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		if !quietPaths[r.URL.Path] {
			s.busy.Add(1)
			defer s.busy.Add(-1)
		}
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		s.serveLogged(mux, rec, r)
		s.metrics.request(endpointLabel(r.URL.Path), rec.status)
	})
}

// endpointLabel keeps the metric's label set bounded whatever paths clients
// try.
func endpointLabel(p string) string {
	switch p {
	case "/v1/chat/completions", "/v1/completions", "/v1/models", "/models", "/health", "/ready", "/metrics":
		return p
	}
	if extraEndpoints[p] {
		return p
	}
	return "other"
}

// statusWriter remembers the status for the metrics; 499 marks a client that
// went away, as nginx logs it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	if len(s.cfg.APIKeys) == 0 {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		key, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || !s.validKey(strings.TrimSpace(key)) {
			msg := "missing API key: send Authorization: Bearer KEY"
			if h != "" {
				msg = "invalid API key"
			}
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key", Message: msg})
			return
		}
		next(w, r)
	}
}

func (s *Server) validKey(k string) bool {
	ok := 0
	for _, want := range s.cfg.APIKeys {
		ok |= subtle.ConstantTimeCompare([]byte(k), []byte(want))
	}
	return ok == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, e.body())
}

// health is what /health and /ready report: the status (loading, ok or
// degraded), whether requests should be sent here, and why not.
type health struct {
	Status string `json:"status"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

func (s *Server) health() health {
	b, why := s.state()
	if b == nil {
		return health{Status: "loading", Reason: why}
	}
	// Degraded does not turn requests away (a step re-forms a cluster
	// whose rank is back, as the scheduler's Heal does between requests),
	// but a balancer should send them elsewhere meanwhile.
	if d := b.degraded(); d != "" {
		return health{Status: "degraded", Reason: d}
	}
	if s.draining.Load() {
		return health{Status: "ok", Reason: "draining: shutting down"}
	}
	if why != "" {
		return health{Status: "ok", Reason: why}
	}
	return health{Status: "ok", Ready: true}
}

// handleHealth is liveness: 200 whenever the process serves HTTP, loading
// a model included (a probe must not kill a server that takes minutes to
// load one), with the status in the body.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.health())
}

// handleReady is readiness: 200 only when the model is loaded on every
// rank, a step has run and no rank is down, 503 with the reason otherwise
// (loading, a rank down or re-forming, draining).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h := s.health()
	if !h.Ready {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": h.Reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.NoMetrics {
		writeError(w, notSupported("this server does not serve metrics: it was started with --no-metrics (drop it, or give --metrics)"))
		return
	}
	b, why := s.state()
	// llama-server's header: a scraper tells a restart from a counter
	// reset by it.
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(s.cfg.Started.Unix(), 10))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	var sched *engine.Scheduler
	var ranks engine.Ranked
	if b != nil {
		sched, ranks = b.Sched, b.Ranks
	}
	s.metrics.write(w, why == "", sched, ranks)
}

// notSupported is llama-server's answer to an endpoint it was started
// without (501).
func notSupported(msg string) *apiError {
	return &apiError{Status: http.StatusNotImplemented, Type: "not_supported_error", Code: "not_supported", Message: msg}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(r))
		return
	}
	aliases := append([]string{}, s.cfg.Aliases...)
	tags := append([]string{}, s.cfg.Tags...)
	m := map[string]any{"id": s.cfg.Model, "aliases": aliases, "tags": tags, "object": "model", "created": s.created, "owned_by": "braid"}
	// ollama's capability names, as llama-server lists them.
	caps := []string{"completion"}
	if b, why := s.state(); b != nil && why == "" {
		if b.Encoder {
			caps = []string{"embedding"}
		}
		meta := map[string]any{"tool_call_format": b.tools.String(), "reasoning_format": b.reasoning.String(),
			"n_vocab": b.Vocab, "n_ctx": b.contextLen()}
		for k, v := range b.Meta {
			meta[k] = v
		}
		m["meta"] = meta
	}
	// "models" is the list in ollama's shape that llama-server adds
	// beside OpenAI's "data".
	ollama := map[string]any{"name": s.cfg.Model, "model": s.cfg.Model, "type": "model", "tags": tags,
		"capabilities": caps, "details": map[string]any{"format": "gguf"}}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{m}, "models": []map[string]any{ollama}})
}

func methodNotAllowed(r *http.Request) *apiError {
	return &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Message: fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)}
}

// checkModel accepts the model's name, an alias, or none (the server has
// one model, which a request without a name gets, as llama-server's).
func (s *Server) checkModel(name string) *apiError {
	if name == s.cfg.Model || name == "" {
		return nil
	}
	for _, a := range s.cfg.Aliases {
		if name == a {
			return nil
		}
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("model %q does not exist; this server serves %q", name, s.cfg.Model)}
}

// modelName is the name a reply carries: the request's, or the model's
// when the request named none.
func (s *Server) modelName(name string) string {
	if name == "" {
		return s.cfg.Model
	}
	return name
}

func randomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// job is a validated request ready for the scheduler.
type job struct {
	chat        bool
	model       string
	prompt      []int32
	maxTokens   int
	asked       int // the limit asked for (-1: none), before the context caps it
	stream      bool
	usageChunk  bool
	stops       []string
	topLogprobs int // -1: no logprobs
	ignoreEOS   bool
	// nKeep and nDiscard are the request's n_keep and n_discard (nil:
	// the server's --keep, and half), for a context shift.
	nKeep, nDiscard *int
	// render are control tokens to write out (chat replies only).
	render map[int32]bool
	// reasoning splits a chat reply; nil sends all text as content.
	reasoning *chat.ReasoningParser
	// constraint limits the output to a grammar; nil when free.
	constraint engine.Constraint
	// calls reads tool calls out of a chat reply; nil without tools.
	calls *toolcall.Parser
	// oneCall (parallel_tool_calls false) ends the reply at its first
	// call, where no grammar already allows only one.
	oneCall bool
	// slot is the request's place on /slots, once submitted.
	slot *slotUse
}

// readRequest does what both generation endpoints check first: the method,
// the body decoded into req, the model name and the sampling fields (sr,
// req's embedded samplingRequest). It answers the error itself and says
// whether to go on.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, req any, sr *samplingRequest) (sample.Params, int, bool) {
	if r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(r))
		return sample.Params{}, 0, false
	}
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, req); e != nil {
		writeError(w, e)
		return sample.Params{}, 0, false
	}
	if e := s.checkModel(sr.Model); e != nil {
		writeError(w, e)
		return sample.Params{}, 0, false
	}
	params, maxTok, e := sr.params(s.cfg.Defaults, randomSeed)
	if e != nil {
		writeError(w, e)
		return sample.Params{}, 0, false
	}
	return params, maxTok, true
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req chatRequest
	params, maxTok, ok := s.readRequest(w, r, &req, &req.samplingRequest)
	if !ok {
		return
	}
	if e := checkMessages(req.Messages); e != nil {
		writeError(w, e)
		return
	}
	if e := checkToolMessages(req.Messages); e != nil {
		writeError(w, e)
		return
	}
	ts, e := req.tools()
	if e != nil {
		writeError(w, e)
		return
	}
	extra, e := req.templateVars()
	if e != nil {
		writeError(w, e)
		return
	}
	split, e := req.splitReasoning()
	if e != nil {
		writeError(w, e)
		return
	}
	spec, e := req.outputConstraint()
	if e != nil {
		writeError(w, e)
		return
	}
	top := -1
	if req.Logprobs != nil && *req.Logprobs {
		top = 0
	}
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
			writeError(w, badRequest("top_logprobs", "top_logprobs = %d is out of range [0, 20]", *req.TopLogprobs))
			return
		}
		if top < 0 && *req.TopLogprobs > 0 {
			writeError(w, badRequest("top_logprobs", "top_logprobs needs logprobs: true"))
			return
		}
		if top >= 0 {
			top = *req.TopLogprobs
		}
	}
	b, why := s.state()
	if why != "" {
		writeError(w, unavailable(why))
		return
	}
	opts := chat.Options{AddGenerationPrompt: true, Extra: extra}
	if b.Tok.BOS() >= 0 {
		opts.BOS = b.Tok.TokenText(b.Tok.BOS())
	}
	if b.Tok.EOS() >= 0 {
		opts.EOS = b.Tok.TokenText(b.Tok.EOS())
	}
	tmpl := b.Template
	if ts.active() {
		opts.Tools = ts.raw
		if b.fallback {
			tmpl = toolcall.Fallback()
		}
	}
	text, err := toolcall.Render(tmpl, req.Messages, opts)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) && ce.Raised {
			writeError(w, badRequest("messages", "the model's chat template refused the messages: %s", ce.Message))
			return
		}
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("rendering the chat template: %v", err)})
		return
	}
	ids := b.Tok.Encode(text, true, true)
	j := &job{chat: true, model: s.modelName(req.Model), nKeep: req.keep(), nDiscard: req.discard(), prompt: ids, stream: req.Stream, stops: req.Stop, topLogprobs: top, ignoreEOS: req.IgnoreEOS, render: b.render}
	if split && b.reasoning != chat.ReasoningNone {
		j.reasoning = chat.NewReasoningParser(b.reasoning, text)
	}
	opened := strings.HasSuffix(strings.TrimRight(text, " \t\r\n"), "<think>")
	gd, e := b.outputGuide(ts, spec, opened, "response_format")
	if e != nil {
		writeError(w, e)
		return
	}
	if gd != nil {
		j.constraint = gd.NewConstraint()
	}
	if ts.active() {
		j.calls = toolcall.NewParser(b.tools, ts.tools)
		j.oneCall = !ts.parallel
	}
	j.usageChunk = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s.run(w, r, b, j, params, maxTok, start)
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req completionRequest
	params, maxTok, ok := s.readRequest(w, r, &req, &req.samplingRequest)
	if !ok {
		return
	}
	text, ids, e := parsePrompt(req.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	if req.Echo {
		writeError(w, badRequest("echo", "echo is not supported"))
		return
	}
	if req.Suffix != nil && *req.Suffix != "" {
		writeError(w, badRequest("suffix", "suffix is not supported"))
		return
	}
	spec, e := req.outputConstraint()
	if e != nil {
		writeError(w, e)
		return
	}
	top := -1
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 5 {
			writeError(w, badRequest("logprobs", "logprobs = %d is out of range [0, 5]", *req.Logprobs))
			return
		}
		top = *req.Logprobs
	}
	b, why := s.state()
	if why != "" {
		writeError(w, unavailable(why))
		return
	}
	if ids == nil {
		ids = b.Tok.Encode(text, true, false)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= b.Vocab {
			writeError(w, badRequest("prompt", "prompt token %d is %d, outside the vocabulary [0, %d)", i, id, b.Vocab))
			return
		}
	}
	j := &job{model: s.modelName(req.Model), nKeep: req.keep(), nDiscard: req.discard(), prompt: ids, stream: req.Stream, stops: req.Stop, topLogprobs: top, ignoreEOS: req.IgnoreEOS}
	if spec != nil {
		gd, e := b.specGuide(spec, false, chat.ReasoningNone, false)
		if e != nil {
			writeError(w, e)
			return
		}
		j.constraint = gd.NewConstraint()
	}
	j.usageChunk = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s.run(w, r, b, j, params, maxTok, start)
}

func unavailable(why string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "service_unavailable", Code: "unavailable", Message: "server unavailable: " + why}
}
