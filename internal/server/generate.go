package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/sample"
	"braid/internal/tokenizer"
	"braid/internal/toolcall"
)

// usage is OpenAI's token accounting, present in every final response.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type topEntry struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type logprobEntry struct {
	topEntry
	TopLogprobs []topEntry `json:"top_logprobs"`
}

// chatLogprobs is the chat API's logprobs object.
type chatLogprobs struct {
	Content []logprobEntry `json:"content"`
}

// textLogprobs is the legacy completions API's logprobs object.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type chatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the model's reasoning, as DeepSeek's API and
	// vLLM name it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls of a reply, or one delta of them.
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
	// nullContent writes "content": null (a reply of calls only).
	nullContent bool
}

// MarshalJSON writes "content": null for a whole reply that is only tool
// calls, as OpenAI does.
func (m chatMessage) MarshalJSON() ([]byte, error) {
	type plain chatMessage
	if !m.nullContent {
		return json.Marshal(plain(m))
	}
	return json.Marshal(struct {
		plain
		Content *string `json:"content"`
	}{plain: plain(m)})
}

// toolCallOut is one tool call in OpenAI's shape; in a stream, the first
// delta of a call has its id, type and name, the next ones add to its
// arguments.
type toolCallOut struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string  `json:"name,omitempty"`
		Arguments *string `json:"arguments,omitempty"`
	} `json:"function"`
}

type choice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Text         *string      `json:"text,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type response struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	SystemFingerprint string   `json:"system_fingerprint"`
	Choices           []choice `json:"choices"`
	Usage             *usage   `json:"usage,omitempty"`
	// Braid is braid's own report (see braidInfo), on the whole reply
	// or a stream's last chunk.
	Braid *braidInfo `json:"braid,omitempty"`
	// Timings are llama-server's, on the whole reply and a stream's last
	// chunk: the chat UIs written for it show tokens/s from them.
	Timings *timings `json:"timings,omitempty"`
}

// timings is llama-server's report of a request's speed: the prompt tokens
// evaluated (not taken from the cache) and the time to the first token,
// the tokens generated and the time from the first to the last.
type timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

// newTimings computes them from a request's prompt length, its cached
// tokens, the tokens generated and the times of the request's start, its
// first token and its last. The generation's rates count the tokens after
// the first (the first's time is the prompt's).
func newTimings(prompt, cached, generated int, start, first, last time.Time) *timings {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	t := &timings{CacheN: cached, PromptN: prompt - cached, PredictedN: generated}
	if !first.IsZero() {
		t.PromptMS, t.PredictedMS = ms(first.Sub(start)), ms(last.Sub(first))
	}
	rate := func(n int, msv float64) (perTok, perSec float64) {
		if n <= 0 || msv <= 0 {
			return 0, 0
		}
		return msv / float64(n), float64(n) / msv * 1000
	}
	t.PromptPerTokenMS, t.PromptPerSecond = rate(t.PromptN, t.PromptMS)
	t.PredictedPerTokenMS, t.PredictedPerSecond = rate(generated-1, t.PredictedMS)
	return t
}

func (g *generation) timings(res engine.Result) *timings {
	return newTimings(len(g.j.prompt), res.CachedTokens, g.ntok, g.start, g.first, g.last)
}

// generation is one request's state while tokens arrive.
type generation struct {
	s      *Server
	b      *Backend
	j      *job
	text   *textStream
	id     string
	start  time.Time
	first  time.Time // the first token's
	last   time.Time
	gaps   []time.Duration
	ntok   int
	offset int // text sent so far, for text_offset

	// logprobs of the tokens since the last chunk
	chatLP *chatLogprobs
	textLP *textLogprobs

	ncalls int // tool calls sent

	// forced is set when the constraint closed the reply early to fit
	// its budget (drive).
	forced bool
	// callStop is set once the first call of a oneCall job is read: the
	// reply ends there.
	callStop bool
}

// piece is output ready to send: reasoning, then content and tool calls
// in the order the model wrote them.
type piece struct {
	reasoning string
	events    []toolcall.Event
}

func (p piece) empty() bool { return p.reasoning == "" && len(p.events) == 0 }

func (p *piece) addContent(s string) {
	if s == "" {
		return
	}
	if n := len(p.events); n > 0 && p.events[n-1].Call == nil {
		p.events[n-1].Content += s
		return
	}
	p.events = append(p.events, toolcall.Event{Content: s})
}

func (g *generation) resp(object string) response {
	return response{ID: g.id, Object: object, Created: time.Now().Unix(), Model: g.j.model, SystemFingerprint: "braid"}
}

// take handles one token: timing, logprobs, text; it returns the text to
// send and whether a stop string ended the generation.
func (g *generation) take(t engine.Token) (piece, bool) {
	g.ntok++
	if g.ntok == 1 {
		g.first = t.At
		g.s.metrics.observeTTFT(t.At.Sub(g.start))
	} else {
		g.gaps = append(g.gaps, t.At.Sub(g.last))
	}
	g.last = t.At
	g.j.slot.token(t.At)
	if g.j.topLogprobs >= 0 {
		g.addLogprob(t)
	}
	out, stop := g.text.add(t.ID)
	g.offset += len(out)
	p := g.split(out)
	return p, stop || g.callStop
}

// split divides released text into reasoning, content and tool calls.
func (g *generation) split(text string) piece {
	sp := chat.Split{Content: text}
	if g.j.reasoning != nil {
		sp = g.j.reasoning.Add(text)
	}
	return g.calls(sp, false)
}

// calls passes the content of sp through the tool-call parser.
func (g *generation) calls(sp chat.Split, final bool) piece {
	if g.callStop {
		return piece{} // what follows the one call asked for is dropped
	}
	p := piece{reasoning: sp.Reasoning}
	if g.j.calls == nil {
		p.addContent(sp.Content)
		return p
	}
	p.events = g.j.calls.Add(sp.Content)
	if final {
		p.events = append(p.events, g.j.calls.Flush()...)
	}
	if g.j.oneCall {
		for i, e := range p.events {
			if e.Call != nil {
				p.events, g.callStop = p.events[:i+1], true
				break
			}
		}
	}
	return p
}

// flush returns what the parsers still hold at the end.
func (g *generation) flush() piece {
	sp := chat.Split{}
	if g.j.reasoning != nil {
		sp = g.j.reasoning.Flush()
	}
	return g.calls(sp, true)
}

func join(a, b piece) piece {
	out := piece{reasoning: a.reasoning + b.reasoning}
	for _, e := range append(append([]toolcall.Event(nil), a.events...), b.events...) {
		if e.Call != nil {
			out.events = append(out.events, e)
		} else {
			out.addContent(e.Content)
		}
	}
	return out
}

func (g *generation) addLogprob(t engine.Token) {
	tok := g.b.Tok
	piece := tok.Piece(t.ID, true)
	if g.j.chat {
		if g.chatLP == nil {
			g.chatLP = &chatLogprobs{}
		}
		e := logprobEntry{topEntry: entry(tok, t.ID, t.Logprob), TopLogprobs: make([]topEntry, 0, len(t.Top))}
		for _, c := range t.Top {
			e.TopLogprobs = append(e.TopLogprobs, entry(tok, c.ID, c.Logprob))
		}
		g.chatLP.Content = append(g.chatLP.Content, e)
		_ = piece
		return
	}
	if g.textLP == nil {
		g.textLP = &textLogprobs{}
	}
	lp := g.textLP
	lp.Tokens = append(lp.Tokens, piece)
	lp.TokenLogprobs = append(lp.TokenLogprobs, t.Logprob)
	lp.TextOffset = append(lp.TextOffset, g.offset)
	m := make(map[string]float32, len(t.Top))
	for _, c := range t.Top {
		m[tok.Piece(c.ID, true)] = c.Logprob
	}
	lp.TopLogprobs = append(lp.TopLogprobs, m)
}

func entry(tok *tokenizer.Tokenizer, id int32, lp float32) topEntry {
	p := tok.Piece(id, true)
	bs := make([]int, len(p))
	for i := 0; i < len(p); i++ {
		bs[i] = int(p[i])
	}
	return topEntry{Token: p, Logprob: lp, Bytes: bs}
}

// takeLogprobs returns and clears the logprobs gathered since the last call
// (nil when none were asked for).
func (g *generation) takeLogprobs() any {
	if g.chatLP != nil {
		lp := g.chatLP
		g.chatLP = nil
		return lp
	}
	if g.textLP != nil {
		lp := g.textLP
		g.textLP = nil
		return lp
	}
	return nil
}

func (g *generation) usage(res engine.Result) *usage {
	u := &usage{PromptTokens: len(g.j.prompt), CompletionTokens: g.ntok}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = res.CachedTokens
	return u
}

// run checks the prompt against the context, queues the request and answers
// it whole or streamed.
func (s *Server) run(w http.ResponseWriter, r *http.Request, b *Backend, j *job, params sample.Params, maxTok int, start time.Time) {
	param := "prompt" // /v1/completions
	if j.chat {
		param = "messages"
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st, e := s.submit(ctx, b, j, params, maxTok, param)
	if e != nil {
		writeError(w, e)
		return
	}
	g := &generation{s: s, b: b, j: j, text: newTextStream(b.Tok, j.stops, j.render), start: start, id: newID("cmpl-")}
	if j.chat {
		g.id = newID("chatcmpl-")
	}
	if fi, ok := fannedOut(r.Context()); ok {
		g.id = fi.id // one choice of a joined response
	}
	j.slot.name(ctx, g.id)
	if j.stream {
		s.stream(ctx, cancel, w, st, g)
	} else {
		s.whole(ctx, cancel, w, st, g)
	}
}

// finished records a request's times for the llamacpp: series: its
// prompt from admission to the first token, its generation from there to
// the last.
func (g *generation) finished(res engine.Result) {
	if g.first.IsZero() {
		return
	}
	from := res.Admitted
	if from.IsZero() || from.After(g.first) {
		from = g.start
	}
	g.s.metrics.finished(res.PromptTokens-res.CachedTokens, g.first.Sub(from).Seconds(), g.ntok, g.last.Sub(g.first).Seconds(), res.PromptTokens+g.ntok)
}

// submit checks the prompt against the context, sets the token limit
// (j.maxTokens) and queues the job; promptField names the request field
// for a prompt that does not fit.
func (s *Server) submit(ctx context.Context, b *Backend, j *job, params sample.Params, maxTok int, promptField string) (*engine.Stream, *apiError) {
	cfg := b.Sched.Config()
	ctxLen := cfg.Context
	if len(j.prompt) == 0 {
		return nil, badRequest(promptField, "the prompt is empty")
	}
	if len(j.prompt) >= ctxLen {
		// Also with a context shift, as llama-server: a shift makes room
		// for generated tokens, never drops prompt tokens unasked.
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: promptField, Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt has %d tokens but the context holds %d (and at least one token must be generated)", len(j.prompt), ctxLen)}
	}
	j.asked = maxTok
	switch room := ctxLen - len(j.prompt); {
	case cfg.ContextShift && maxTok < 0:
		// As llama-server's n_predict -1 with --context-shift: until an
		// end-of-generation token, a stop string or the client leaves.
		maxTok = math.MaxInt32
	case cfg.ContextShift:
	case maxTok < 0 || maxTok > room:
		maxTok = room
	}
	if e := checkClosureBudget(j.constraint, j.asked, maxTok); e != nil {
		return nil, e
	}
	j.maxTokens = maxTok
	smp, err := sample.New(params, b.Vocab)
	if err != nil {
		return nil, badRequest("", "%v", err)
	}
	keep := s.cfg.Defaults.NKeep
	if j.nKeep != nil {
		keep = *j.nKeep
	}
	if keep >= 0 && b.Tok.BOS() >= 0 && j.prompt[0] == b.Tok.BOS() {
		keep++ // llama-server counts n_keep after the BOS token
	}
	discard := 0
	if j.nDiscard != nil {
		discard = *j.nDiscard
	}
	// The slot is taken with the submission, so that the board's order
	// is the scheduler's; it is given back at the generation's end, or
	// when the request's context ends, whichever is first.
	s.slotMu.Lock()
	st, err := b.Sched.Submit(ctx, engine.Job{Prompt: j.prompt, MaxTokens: maxTok, Sampler: smp, TopLogprobs: j.topLogprobs,
		IgnoreEOG: j.ignoreEOS, Constraint: j.constraint, NKeep: keep, NDiscard: discard})
	if err == nil {
		j.slot = s.slots.take(b.Sched.Config().Parallel, len(j.prompt), maxTok, params)
		context.AfterFunc(ctx, j.slot.release)
	}
	s.slotMu.Unlock()
	if err != nil {
		if errors.Is(err, engine.ErrQueueFull) {
			return nil, &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_exceeded", Code: "queue_full",
				Message: fmt.Sprintf("server busy: %v; retry later", err)}
		}
		return nil, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
	}
	return st, nil
}

// drive receives tokens until the end, a stop string, or the client leaving;
// emit gets the text of each token. It returns the finish reason ("" when
// the client left) and the engine's result.
func (g *generation) drive(ctx context.Context, cancel context.CancelFunc, st *engine.Stream, emit func(d piece) error) (string, engine.Result, error) {
	var toks []engine.Token
	for {
		var done bool
		var err error
		toks, done, err = st.Recv(ctx, toks[:0])
		if err != nil {
			return "", engine.Result{}, err
		}
		// One event per token, also when several arrived together (a
		// client counting events, or timing them, sees every token), except
		// the stream's last, which goes out with the flushed rest below.
		var out piece
		for i, t := range toks {
			s, stopped := g.take(t)
			if stopped {
				// The engine may still run a step for this sequence;
				// cancelling frees its slot at the next one.
				cancel()
				g.j.slot.release()
				return "stop", st.Result(), emit(join(s, g.flush()))
			}
			if done && i == len(toks)-1 {
				out = s
				break
			}
			if !s.empty() || g.chatLP != nil || g.textLP != nil {
				if err := emit(s); err != nil {
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
		if err := emit(out); err != nil {
			return "", res, err
		}
		g.s.metrics.observeITL(g.gaps)
		g.s.metrics.observeE2E(time.Since(g.start))
		g.finished(res)
		switch {
		case stopped:
			return "stop", res, nil
		case closureForced(g.j.constraint) && (res.Finish == engine.FinishStop || res.Finish == engine.FinishLength):
			// Closed early to fit: complete, yet cut by the budget.
			g.forced = true
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

func (s *Server) whole(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, st *engine.Stream, g *generation) {
	var text, reasoning []byte
	var calls []toolCallOut
	var lps []any
	finish, res, err := g.drive(ctx, cancel, st, func(d piece) error {
		reasoning = append(reasoning, d.reasoning...)
		for _, e := range d.events {
			if e.Call == nil {
				text = append(text, e.Content...)
				continue
			}
			calls = append(calls, callOut(e.Call, nil, true))
		}
		if lp := g.takeLogprobs(); lp != nil {
			lps = append(lps, lp)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			w.WriteHeader(499) // nobody is listening; for the metrics
			return
		}
		s.cfg.Logf("request %s failed: %v", g.id, err)
		writeError(w, engineError(err))
		return
	}
	str := string(text)
	if len(calls) > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	c := choice{FinishReason: &finish, Logprobs: mergeLogprobs(lps)}
	var resp response
	if g.j.chat {
		resp = g.resp("chat.completion")
		c.Message = &chatMessage{Role: "assistant", Content: &str, ReasoningContent: string(reasoning), ToolCalls: calls}
		if len(calls) > 0 && strings.TrimSpace(str) == "" {
			// A reply of calls only has null content, as OpenAI's.
			c.Message.Content, c.Message.nullContent = nil, true
		}
	} else {
		resp = g.resp("text_completion")
		c.Text = &str
	}
	resp.Choices = []choice{c}
	resp.Usage = g.usage(res)
	resp.Timings = g.timings(res)
	if g.forced {
		resp.Braid = &braidInfo{ClosureForced: true}
		w.Header().Set(closureHeader, "true")
	}
	writeJSON(w, http.StatusOK, resp)
}

func engineError(err error) *apiError {
	if errors.Is(err, engine.ErrStopped) {
		return unavailable("shutting down")
	}
	if errors.Is(err, engine.ErrUnavailable) {
		return unavailable(err.Error())
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// mergeLogprobs joins the per-chunk logprobs of a whole response.
func mergeLogprobs(lps []any) any {
	if len(lps) == 0 {
		return nil
	}
	switch lps[0].(type) {
	case *chatLogprobs:
		out := &chatLogprobs{}
		for _, l := range lps {
			out.Content = append(out.Content, l.(*chatLogprobs).Content...)
		}
		return out
	case *textLogprobs:
		out := &textLogprobs{}
		for _, l := range lps {
			t := l.(*textLogprobs)
			out.Tokens = append(out.Tokens, t.Tokens...)
			out.TokenLogprobs = append(out.TokenLogprobs, t.TokenLogprobs...)
			out.TopLogprobs = append(out.TopLogprobs, t.TopLogprobs...)
			out.TextOffset = append(out.TextOffset, t.TextOffset...)
		}
		return out
	}
	return nil
}

func (s *Server) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, st *engine.Stream, g *generation) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if g.j.constraint != nil {
		// Known only at the end: a trailer (and the last chunk's
		// "braid" field).
		h.Set("Trailer", closureHeader)
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf := make([]byte, 0, len(data)+8)
		buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	object := "text_completion"
	if g.j.chat {
		object = "chat.completion.chunk"
		empty := ""
		r := g.resp(object)
		r.Choices = []choice{{Delta: &chatMessage{Role: "assistant", Content: &empty}}}
		if send(r) != nil {
			return
		}
	}
	chunk := func(text string, finish *string) response {
		r := g.resp(object)
		c := choice{FinishReason: finish, Logprobs: g.takeLogprobs()}
		if g.j.chat {
			c.Delta = &chatMessage{}
			if text != "" || finish == nil {
				c.Delta.Content = &text
			}
		} else {
			c.Text = &text
		}
		r.Choices = []choice{c}
		return r
	}
	finish, res, err := g.drive(ctx, cancel, st, func(d piece) error {
		// A piece holds both only where the reasoning ends and the answer
		// starts, so reasoning first keeps the order the model wrote.
		if d.reasoning != "" {
			r := g.resp(object)
			r.Choices = []choice{{Delta: &chatMessage{ReasoningContent: d.reasoning}, Logprobs: g.takeLogprobs()}}
			if err := send(r); err != nil {
				return err
			}
		}
		sent := false
		for _, e := range d.events {
			if e.Call == nil {
				if e.Content == "" {
					continue
				}
				if err := send(chunk(e.Content, nil)); err != nil {
					return err
				}
				sent = true
				continue
			}
			// OpenAI's shape: the call's id, type and name first, then
			// its arguments.
			i := g.ncalls
			g.ncalls++
			for _, tc := range []toolCallOut{callOut(e.Call, &i, false), argsOut(e.Call, &i)} {
				r := g.resp(object)
				r.Choices = []choice{{Delta: &chatMessage{ToolCalls: []toolCallOut{tc}}, Logprobs: g.takeLogprobs()}}
				if err := send(r); err != nil {
					return err
				}
			}
			sent = true
		}
		if sent || g.chatLP == nil && g.textLP == nil {
			return nil
		}
		return send(chunk("", nil))
	})
	if err != nil {
		if ctx.Err() != nil {
			return // the client left; nothing more to say
		}
		s.cfg.Logf("request %s failed mid-stream: %v", g.id, err)
		send(engineError(err).body())
		w.Write([]byte("data: [DONE]\n\n"))
		return
	}
	if g.ncalls > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	last := chunk("", &finish)
	if !g.j.usageChunk {
		// llama-server's place for it. With include_usage it goes in the
		// chunk of its own only, as OpenAI sends it: clients that add up
		// the usage of every chunk (LangChain's) would count it twice.
		last.Usage = g.usage(res)
	}
	last.Timings = g.timings(res)
	if g.forced {
		last.Braid = &braidInfo{ClosureForced: true}
	}
	if send(last) != nil {
		return
	}
	if g.j.usageChunk {
		r := g.resp(object)
		r.Choices = []choice{}
		r.Usage = g.usage(res)
		if send(r) != nil {
			return
		}
	}
	w.Write([]byte("data: [DONE]\n\n"))
	if g.j.constraint != nil {
		h.Set(closureHeader, fmt.Sprint(g.forced))
	}
	if flusher != nil {
		flusher.Flush()
	}
}

// Serve answers on ln until ctx ends, then drains: /ready turns 503 at
// once and new requests are refused with 503 (the listener stays open, so
// that clients a balancer still sends here get a reason, not a refused
// connection), running requests have up to grace to finish, then the rest
// are cancelled (their sequences leave the scheduler at its next step),
// the listener closes and Serve waits for their handlers to return.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs := &http.Server{
		Handler:           s.Handler(),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 30 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.SetUnavailable("draining: shutting down")
	deadline := time.Now().Add(grace)
	s.cfg.Logf("draining: /ready and new requests answer 503; waiting up to %v for %d running requests", grace, s.busy.Load())
	tick := time.NewTicker(20 * time.Millisecond)
	for s.busy.Load() > 0 && time.Now().Before(deadline) {
		<-tick.C
	}
	tick.Stop()
	sctx, stop := context.WithDeadline(context.Background(), deadline)
	defer stop()
	if err := hs.Shutdown(sctx); err != nil {
		s.cfg.Logf("grace period over; cancelling the requests still running")
		cancelBase()
		hs.Close()
	}
	s.inflight.Wait()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// callOut is a call in OpenAI's shape: whole (with its arguments) in a
// reply, or the first delta of a streamed one (the arguments come next).
func callOut(c *toolcall.Call, index *int, whole bool) toolCallOut {
	out := toolCallOut{Index: index, ID: c.ID, Type: "function"}
	out.Function.Name = c.Name
	args := ""
	if whole {
		args = c.Arguments
	}
	out.Function.Arguments = &args
	return out
}

// argsOut is the delta that carries a streamed call's arguments.
func argsOut(c *toolcall.Call, index *int) toolCallOut {
	out := toolCallOut{Index: index}
	args := c.Arguments
	out.Function.Arguments = &args
	return out
}
