package server

// llama-server's native endpoints, for the tools written against them:
// /tokenize, /detokenize, /props, /slots and /completion (its own request
// and response shapes, streamed as data-only server-sent events).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/sysinfo"
	"braid/internal/tokenizer"
)

// routeExtra registers the endpoints beyond OpenAI's chat and text
// completions: llama-server's native ones, the Responses API, embeddings,
// the web page and its cluster data.
func (s *Server) routeExtra(mux *http.ServeMux) {
	mux.HandleFunc("/tokenize", s.auth(s.handleTokenize))
	mux.HandleFunc("/detokenize", s.auth(s.handleDetokenize))
	mux.HandleFunc("/props", s.auth(s.handleProps))
	mux.HandleFunc("/slots", s.auth(s.generative(s.handleSlots)))
	mux.HandleFunc("/completion", s.auth(s.generative(s.handleNativeCompletion)))
	mux.HandleFunc("/completions", s.auth(s.generative(s.handleNativeCompletion)))
	mux.HandleFunc("/v1/embeddings", s.auth(s.handleEmbeddings))
	mux.HandleFunc("/embeddings", s.auth(s.handleEmbeddings))
	mux.HandleFunc("/v1/responses", s.auth(s.generative(s.handleResponses)))
	mux.HandleFunc("/v1/responses/{id}", s.auth(s.generative(s.handleResponseByID)))
	mux.HandleFunc("/cluster", s.auth(s.generative(s.handleCluster)))
	web := s.handleWeb
	if s.cfg.NoWeb {
		web = func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
				Message: "the web page is off: this server was started with --no-ui"})
		}
	}
	mux.HandleFunc("GET /{$}", web)
	mux.HandleFunc("GET /web/{file}", web)
}

// extraEndpoints are the metric labels of the endpoints routeExtra adds.
var extraEndpoints = map[string]bool{
	"/tokenize": true, "/detokenize": true, "/props": true, "/slots": true, "/completion": true, "/completions": true,
	"/v1/embeddings": true, "/embeddings": true, "/v1/responses": true, "/cluster": true, "/": true,
}

// ready answers 503 when no model is loaded and returns the backend.
func (s *Server) ready(w http.ResponseWriter) (*Backend, bool) {
	b, why := s.state()
	if why != "" {
		writeError(w, unavailable(why))
		return nil, false
	}
	return b, true
}

// post reads a POST body into v, answering the error itself.
func (s *Server) post(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(r))
		return false
	}
	if e := decodeBody(w, r, s.cfg.MaxBodyBytes, v); e != nil {
		writeError(w, e)
		return false
	}
	return true
}

// tokenizeRequest is llama-server's /tokenize body.
type tokenizeRequest struct {
	Content      *string `json:"content"`
	AddSpecial   bool    `json:"add_special"`
	ParseSpecial *bool   `json:"parse_special"`
	WithPieces   bool    `json:"with_pieces"`
}

// tokenPiece is a token with its text: a string when the bytes are valid
// UTF-8, else the list of byte values (a token can hold part of a
// character).
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

func pieceOf(tok *tokenizer.Tokenizer, id int32) tokenPiece {
	p := tok.Piece(id, true)
	if utf8.ValidString(p) {
		return tokenPiece{id, p}
	}
	bs := make([]int, len(p))
	for i := 0; i < len(p); i++ {
		bs[i] = int(p[i])
	}
	return tokenPiece{id, bs}
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if !s.post(w, r, &req) {
		return
	}
	if req.Content == nil {
		writeError(w, badRequest("content", "content (the text to tokenize) is required"))
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	parse := req.ParseSpecial == nil || *req.ParseSpecial
	ids := b.Tok.Encode(*req.Content, req.AddSpecial, parse)
	if !req.WithPieces {
		if ids == nil {
			ids = []int32{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	out := make([]tokenPiece, len(ids))
	for i, id := range ids {
		out[i] = pieceOf(b.Tok, id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

type detokenizeRequest struct {
	Tokens     *[]int64 `json:"tokens"`
	WithPieces bool     `json:"with_pieces"`
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req detokenizeRequest
	if !s.post(w, r, &req) {
		return
	}
	if req.Tokens == nil {
		writeError(w, badRequest("tokens", "tokens (a list of token ids) is required"))
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	ids := make([]int32, len(*req.Tokens))
	for i, id := range *req.Tokens {
		if id < 0 || id >= int64(b.Tok.VocabSize()) {
			writeError(w, badRequest("tokens", "tokens[%d] = %d is outside the vocabulary [0, %d)", i, id, b.Tok.VocabSize()))
			return
		}
		ids[i] = int32(id)
	}
	resp := map[string]any{"content": b.Tok.DecodeWith(ids, tokenizer.DecodeOptions{RenderSpecial: true})}
	if req.WithPieces {
		out := make([]tokenPiece, len(ids))
		for i, id := range ids {
			out[i] = pieceOf(b.Tok, id)
		}
		resp["pieces"] = out
	}
	writeJSON(w, http.StatusOK, resp)
}

// generationSettings are the server's defaults for requests (its
// sampling flags), as llama-server's /props and /slots show them: n_ctx
// is one slot's context.
func (s *Server) generationSettings(b *Backend) map[string]any {
	d := s.cfg.Defaults
	p := s.paramsJSON(b, d.Params)
	if d.SeedSet {
		p["seed"] = d.Params.Seed
	}
	return map[string]any{"n_ctx": b.contextLen(), "params": p}
}

// round32 is a float32 as the float64 it is written as (0.05, not
// 0.05000000074505806).
func round32(v float32) json.Number {
	return json.Number(fmt.Sprint(v))
}

func (s *Server) handleProps(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(r))
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	var cfg engine.SchedulerConfig
	if b.Sched != nil {
		cfg = b.Sched.Config()
	}
	tokText := func(id int32) string {
		if id < 0 {
			return ""
		}
		return b.Tok.TokenText(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"default_generation_settings": s.generationSettings(b),
		"total_slots":                 cfg.Parallel,
		"model_alias":                 s.cfg.Model,
		"model_path":                  s.cfg.ModelPath,
		"chat_template":               b.Template.Source(),
		"bos_token":                   tokText(b.Tok.BOS()),
		"eos_token":                   tokText(b.Tok.EOS()),
		"reasoning_format":            b.reasoning.String(),
		"modalities":                  map[string]bool{"vision": false, "audio": false},
		"embeddings":                  b.Embed != nil,
		"build_info":                  sysinfo.ReadBuild().Digest(),
		"load_mode":                   b.LoadMode,
		"load_mode_reason":            b.LoadReason,
		"webui":                       !s.cfg.NoWeb,
		"ui":                          !s.cfg.NoWeb,
		"endpoint_slots":              !s.cfg.NoSlots,
		"endpoint_metrics":            !s.cfg.NoMetrics,
		"endpoint_props":              false,
		"context_shift":               cfg.ContextShift,
	})
}

// handleSlots lists the slots (slots.go): for a busy one its request's
// id, prompt tokens, tokens generated so far and their speed, and the
// request's sampling settings; an idle one says so. ?fail_on_no_slot=1
// answers 503 when none is idle, as llama-server's.
func (s *Server) handleSlots(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, methodNotAllowed(r))
		return
	}
	if s.cfg.NoSlots {
		writeError(w, notSupported("this server does not serve slots: it was started with --no-slots"))
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	cfg := b.Sched.Config()
	busy := s.slots.busy(cfg.Parallel)
	slots := make([]map[string]any, cfg.Parallel)
	idle := 0
	for i, st := range busy {
		m := map[string]any{"id": i, "n_ctx": cfg.Context, "speculative": false, "is_processing": st != nil}
		if st == nil {
			idle++
			m["state"] = "idle"
			m["params"] = s.paramsJSON(b, s.cfg.Defaults.Params)
			slots[i] = m
			continue
		}
		m["state"] = "prompt" // evaluating the prompt, or waiting for room in the KV cache
		if st.gen > 0 {
			m["state"] = "generating"
		}
		m["request_id"] = st.id
		if st.choice >= 0 {
			m["choice"] = st.choice
		}
		m["n_prompt_tokens"] = st.prompt
		m["n_decoded"] = st.gen
		m["tokens_per_second"] = st.speed
		m["elapsed_ms"] = st.age.Milliseconds()
		p := s.paramsJSON(b, st.params)
		p["n_predict"], p["max_tokens"] = st.remain+st.gen, st.remain+st.gen // the request's limit
		m["params"] = p
		m["next_token"] = []map[string]any{{"has_next_token": true, "n_remain": st.remain, "n_decoded": st.gen}}
		slots[i] = m
	}
	if r.URL.Query().Get("fail_on_no_slot") == "1" && idle == 0 {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Code: "no_slot_available",
			Message: fmt.Sprintf("no slot available: all %d are busy", cfg.Parallel)})
		return
	}
	writeJSON(w, http.StatusOK, slots)
}

// nativeRequest is llama-server's /completion body: its names (n_predict,
// n_probs, cache_prompt) and the OpenAI sampling fields it shares.
type nativeRequest struct {
	samplingRequest
	Prompt      json.RawMessage `json:"prompt"`
	NPredict    *int            `json:"n_predict"`
	NProbs      *int            `json:"n_probs"`
	CachePrompt *bool           `json:"cache_prompt"`
	ReturnToks  bool            `json:"return_tokens"`
}

// start checks the prompt against the context and queues the job, answering
// any error itself; promptField names the request field for a prompt that
// does not fit. It returns the stream, its context (cancel it when done)
// and the generation state.
func (s *Server) start(w http.ResponseWriter, r *http.Request, b *Backend, j *job, params sample.Params, maxTok int, promptField string, start time.Time) (*engine.Stream, context.Context, context.CancelFunc, *generation, bool) {
	ctx, cancel := context.WithCancel(r.Context())
	st, e := s.submit(ctx, b, j, params, maxTok, promptField)
	if e != nil {
		cancel()
		writeError(w, e)
		return nil, nil, nil, nil, false
	}
	g := &generation{s: s, b: b, j: j, text: newTextStream(b.Tok, j.stops, j.render), start: start, id: newID("cmpl-")}
	j.slot.name(ctx, g.id)
	return st, ctx, cancel, g, true
}

// sseWriter writes server-sent events and flushes each.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, f: f}
}

// send writes one event: "event: NAME" when name is set, then the data.
func (e *sseWriter) send(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf []byte
	if name != "" {
		buf = append(append(append(buf, "event: "...), name...), '\n')
	}
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	if _, err := e.w.Write(buf); err != nil {
		return err
	}
	if e.f != nil {
		e.f.Flush()
	}
	return nil
}

func (s *Server) handleNativeCompletion(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req nativeRequest
	if !s.post(w, r, &req) {
		return
	}
	if req.Model != "" {
		if e := s.checkModel(req.Model); e != nil {
			writeError(w, e)
			return
		}
	}
	if req.NPredict != nil {
		if *req.NPredict < -1 {
			writeError(w, badRequest("n_predict", "n_predict = %d: give a number of tokens, or -1 for no limit but the context", *req.NPredict))
			return
		}
		if *req.NPredict >= 0 && req.MaxTokens == nil {
			req.MaxTokens = req.NPredict
		}
	}
	unlimited := req.NPredict != nil && *req.NPredict == -1 && req.MaxTokens == nil && req.MaxCompletionTokens == nil
	if req.NProbs != nil && *req.NProbs != 0 {
		writeError(w, badRequest("n_probs", "n_probs is not supported here; /v1/completions returns logprobs"))
		return
	}
	params, maxTok, e := req.params(s.cfg.Defaults, randomSeed)
	if e != nil {
		writeError(w, e)
		return
	}
	if unlimited {
		maxTok = -1 // n_predict -1 says so over the server's --n-predict
	}
	text, ids, e := parsePrompt(req.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	spec, e := req.outputConstraint()
	if e != nil {
		writeError(w, e)
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	if ids == nil {
		ids = b.Tok.Encode(text, true, true)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= b.Vocab {
			writeError(w, badRequest("prompt", "prompt token %d is %d, outside the vocabulary [0, %d)", i, id, b.Vocab))
			return
		}
	}
	model := req.Model
	if model == "" {
		model = s.cfg.Model
	}
	j := &job{model: model, prompt: ids, stream: req.Stream, stops: req.Stop, topLogprobs: -1, ignoreEOS: req.IgnoreEOS, nKeep: req.NKeep, nDiscard: req.NDiscard}
	if spec != nil {
		gd, e := b.specGuide(spec, false, chat.ReasoningNone, false)
		if e != nil {
			writeError(w, e)
			return
		}
		j.constraint = gd.NewConstraint()
	}
	st, ctx, cancel, g, ok := s.start(w, r, b, j, params, maxTok, "prompt", start)
	if !ok {
		return
	}
	defer cancel()
	noteTokens(r.Context(), len(ids), 0)
	var sse *sseWriter
	var content strings.Builder
	var toks []int32
	var first, last time.Time
	var newToks []int32 // taken since the last emit
	onToken := func(t engine.Token) {
		if first.IsZero() {
			first = t.At
		}
		last = t.At
		newToks = append(newToks, t.ID)
	}
	emit := func(d chat.Split) error {
		defer func() { newToks = nil }()
		content.WriteString(d.Content)
		toks = append(toks, newToks...)
		if sse == nil {
			return nil
		}
		if d.Content == "" && len(newToks) == 0 {
			return nil
		}
		if newToks == nil {
			newToks = []int32{}
		}
		return sse.send("", map[string]any{"index": 0, "content": d.Content, "tokens": newToks, "stop": false,
			"id_slot": -1, "tokens_predicted": g.ntok, "tokens_evaluated": len(ids)})
	}
	if req.Stream {
		sse = newSSE(w)
	}
	finish, res, err := g.driveTokens(ctx, cancel, st, onToken, emit)
	noteTokens(r.Context(), len(ids), g.ntok)
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() != nil {
			if sse == nil {
				w.WriteHeader(499)
			}
			return
		}
		s.cfg.Logf("request %s failed: %v", g.id, err)
		if sse != nil {
			sse.send("", engineError(err).body())
			return
		}
		writeError(w, engineError(err))
		return
	}
	stopType := "limit"
	switch {
	case g.text.stopped:
		stopType = "word"
	case finish == "stop":
		stopType = "eos"
	}
	stopWord := ""
	if stopType == "word" && len(j.stops) == 1 {
		stopWord = j.stops[0]
	}
	// truncated, as llama-server: a context shift dropped tokens, or the
	// generation ended because the context was full.
	truncated := res.Shifts > 0 || finish == "length" && len(ids)+g.ntok >= b.Sched.Config().Context
	final := map[string]any{
		"index": 0, "content": content.String(), "tokens": []int32{}, "id_slot": -1, "stop": true, "model": model,
		"tokens_predicted": g.ntok, "tokens_evaluated": len(ids), "tokens_cached": res.CacheLen,
		"generation_settings": s.generationParams(b, params, j, req.NPredict),
		"prompt":              text, "truncated": truncated, "stop_type": stopType, "stopping_word": stopWord, "has_new_line": strings.Contains(content.String(), "\n"),
		"timings": newTimings(len(ids), res.CachedTokens, g.ntok, start, first, last),
	}
	if req.ReturnToks || sse == nil {
		if toks == nil {
			toks = []int32{}
		}
		final["tokens"] = toks
	}
	if sse != nil {
		final["content"] = ""
		sse.send("", final)
		return
	}
	writeJSON(w, http.StatusOK, final)
}

// generationParams are a request's settings as llama-server's
// generation_settings shows them; nPredict is the request's n_predict.
func (s *Server) generationParams(b *Backend, p sample.Params, j *job, nPredict *int) map[string]any {
	m := s.paramsJSON(b, p)
	n := j.asked
	if nPredict != nil && j.asked < 0 {
		n = *nPredict
	}
	m["n_predict"], m["max_tokens"] = n, n
	m["seed"] = p.Seed
	m["stop"] = nonNil(j.stops)
	if j.nKeep != nil {
		m["n_keep"] = *j.nKeep
	}
	if j.nDiscard != nil {
		m["n_discard"] = *j.nDiscard
	}
	m["ignore_eos"] = j.ignoreEOS
	m["stream"] = j.stream
	// ignore_eos is llama-server's bias of -Inf on every end-of-generation
	// token; JSON has no -Inf, and llama-server writes it as null.
	bias := []map[string]any{}
	if j.ignoreEOS {
		for _, id := range b.Tok.EOGs() {
			bias = append(bias, map[string]any{"bias": nil, "token": id})
		}
	}
	m["logit_bias"] = bias
	return m
}

// paramsJSON are sampling settings under llama-server's names.
func (s *Server) paramsJSON(b *Backend, p sample.Params) map[string]any {
	d := s.cfg.Defaults
	seed := any(p.Seed)
	if !d.SeedSet && p == d.Params {
		seed = -1 // a random one per request
	}
	return map[string]any{
		"seed": seed, "temperature": round32(p.Temperature), "top_k": p.TopK, "top_p": round32(p.TopP), "min_p": round32(p.MinP),
		"repeat_last_n": p.RepeatLastN, "repeat_penalty": round32(p.RepeatPenalty), "presence_penalty": round32(p.PresencePenalty),
		"frequency_penalty": round32(p.FrequencyPenalty), "n_predict": d.NPredict, "max_tokens": d.NPredict, "n_keep": d.NKeep,
		"n_discard": 0, "ignore_eos": false, "stream": false, "n_probs": 0, "logit_bias": []any{},
		"samplers": []string{"penalties", "top_k", "top_p", "min_p", "temperature"},
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// driveTokens is drive (generate.go) that also shows each token to onToken
// before its text is taken, and gives emit the text split into reasoning
// and content: the native and Responses endpoints report the token ids
// and their times, and read no tool calls.
func (g *generation) driveTokens(ctx context.Context, cancel context.CancelFunc, st *engine.Stream, onToken func(engine.Token), emit func(d chat.Split) error) (string, engine.Result, error) {
	var toks []engine.Token
	for {
		var done bool
		var err error
		toks, done, err = st.Recv(ctx, toks[:0])
		if err != nil {
			return "", engine.Result{}, err
		}
		var out piece
		for i, t := range toks {
			onToken(t)
			p, stopped := g.take(t)
			if stopped {
				cancel()
				g.j.slot.release()
				return "stop", st.Result(), emit(splitOf(join(p, g.flush())))
			}
			if done && i == len(toks)-1 {
				out = p
				break
			}
			if !p.empty() {
				if err := emit(splitOf(p)); err != nil {
					return "", engine.Result{}, err
				}
			}
		}
		if !done {
			continue
		}
		res := st.Result()
		g.j.slot.release()
		rest, stopped := g.text.flush()
		out = join(out, join(g.split(rest), g.flush()))
		g.offset += len(rest)
		if err := emit(splitOf(out)); err != nil {
			return "", res, err
		}
		g.s.metrics.observeITL(g.gaps)
		g.s.metrics.observeE2E(time.Since(g.start))
		g.finished(res)
		switch {
		case stopped:
			return "stop", res, nil
		case closureForced(g.j.constraint) && (res.Finish == engine.FinishStop || res.Finish == engine.FinishLength):
			g.forced = true // closed early to fit the budget
			return "length", res, nil
		case res.Finish == engine.FinishStop:
			return "stop", res, nil
		case res.Finish == engine.FinishLength:
			return "length", res, nil
		case res.Finish == engine.FinishCancelled:
			return "", res, res.Err
		}
		if res.Err == nil {
			res.Err = fmt.Errorf("generation ended with %v", res.Finish)
		}
		return "", res, res.Err
	}
}

// splitOf is a piece of output as reasoning and content (these endpoints
// read no tool calls, so every event is content).
func splitOf(p piece) chat.Split {
	sp := chat.Split{Reasoning: p.reasoning}
	for _, e := range p.events {
		sp.Content += e.Content
	}
	return sp
}
