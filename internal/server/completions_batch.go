package server

// n > 1 and a list of prompts in /v1/completions, n > 1 in
// /v1/chat/completions: the request fans out into one single-prompt,
// single-choice request per prompt and choice, run together (the scheduler
// batches them), and their answers are joined into one response whose
// choices are numbered prompt by prompt, as OpenAI's are: choice i*n+j is
// prompt i's j-th. Streamed, the chunks of all of them are passed on as
// they come, each with its choice index. Every part carries the joined
// response's id (fanOutInfo), which /slots shows too.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// maxChoices bounds prompts x n in one request.
const maxChoices = 64

// fanOut is what handleCompletionBatch reads of a request before it
// decides whether to fan out.
type fanOut struct {
	N *int `json:"n"`
	// NCmpl is llama-server's name for n, taken when n is not given.
	NCmpl  *int            `json:"n_cmpl"`
	Prompt json.RawMessage `json:"prompt"`
	Seed   *int64          `json:"seed"`
	Stream bool            `json:"stream"`
}

// alias takes n_cmpl for n when n is not given.
func (f *fanOut) alias() {
	if f.N == nil {
		f.N = f.NCmpl
	}
}

// splitPrompts returns the prompts of a list of several (strings or token
// lists), or nil when raw is one prompt.
func splitPrompts(raw json.RawMessage) ([]json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return nil, nil // one prompt of token ids
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("prompt", "prompt must be a string, a list of token ids, or a list of either")
	}
	if len(list) < 2 {
		return nil, nil
	}
	for i, p := range list {
		var s string
		var t []int64
		if json.Unmarshal(p, &s) != nil && json.Unmarshal(p, &t) != nil {
			return nil, badRequest("prompt", "prompt[%d] must be a string or a list of token ids", i)
		}
	}
	return list, nil
}

// handleCompletionBatch is /v1/completions: requests with one prompt and
// one choice go to handleCompletion as they are.
func (s *Server) handleCompletionBatch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.handleCompletion(w, r)
		return
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	var f fanOut
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &f) != nil || json.Unmarshal(body, &fields) != nil {
		// not an object, or fields of the wrong type: the full parser says
		// what is wrong
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.handleCompletion(w, r)
		return
	}
	f.alias()
	prompts, e := splitPrompts(f.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	n := 1
	if f.N != nil {
		n = *f.N
	}
	if n < 1 {
		writeError(w, badRequest("n", "n = %d: need at least 1", n))
		return
	}
	if prompts == nil && n == 1 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.handleCompletion(w, r)
		return
	}
	if prompts == nil {
		prompts = []json.RawMessage{f.Prompt}
	}
	if len(prompts)*n > maxChoices {
		writeError(w, badRequest("n", "%d prompts x n = %d is %d choices; at most %d in one request", len(prompts), n, len(prompts)*n, maxChoices))
		return
	}
	var subs [][]byte
	for _, p := range prompts {
		subs = append(subs, subBodies(fields, "prompt", p, n, f)...)
	}
	fo := fanOutRun{handler: s.handleCompletion, object: "text_completion", id: newID("cmpl-"), n: n}
	if f.Stream {
		s.fanOutStream(w, r, subs, fo)
		return
	}
	s.fanOutWhole(w, r, subs, fo)
}

// subBodies are the n bodies of one prompt's choices: the request's fields
// with key set to p (unless p is nil), no n, and a seed of its own when one
// was given (choices of a seeded request differ and repeat).
func subBodies(fields map[string]json.RawMessage, key string, p json.RawMessage, n int, f fanOut) [][]byte {
	subs := make([][]byte, 0, n)
	for j := 0; j < n; j++ {
		m := make(map[string]json.RawMessage, len(fields)+1)
		for k, v := range fields {
			m[k] = v
		}
		if p != nil {
			m[key] = p
		}
		delete(m, "n")
		delete(m, "n_cmpl")
		if f.Seed != nil && *f.Seed != -1 {
			m["seed"], _ = json.Marshal(*f.Seed + int64(j))
		}
		if f.Stream {
			m["stream_options"] = json.RawMessage(`{"include_usage":false}`)
		}
		b, _ := json.Marshal(m)
		subs = append(subs, b)
	}
	return subs
}

// handleChatBatch is /v1/chat/completions: a request with n > 1 fans out
// into n choices run together; the others go to handleChat as they are.
func (s *Server) handleChatBatch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.handleChat(w, r)
		return
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	var f fanOut
	var fields map[string]json.RawMessage
	bad := json.Unmarshal(body, &f) != nil || json.Unmarshal(body, &fields) != nil
	f.alias()
	if bad || f.N == nil || *f.N == 1 {
		// one choice, or fields of the wrong type: the full parser says
		// what is wrong
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.handleChat(w, r)
		return
	}
	n := *f.N
	if n < 1 {
		writeError(w, badRequest("n", "n = %d: need at least 1", n))
		return
	}
	b, why := s.state()
	if why != "" {
		writeError(w, unavailable(why))
		return
	}
	// More choices than slots would run one after another; a client
	// asking for them together is told the bound instead.
	if p := b.Sched.Config().Parallel; n > p || n > maxChoices {
		writeError(w, badRequest("n", "n = %d is more choices than this server generates together: at most %d (--parallel %d)", n, min(p, maxChoices), p))
		return
	}
	fo := fanOutRun{handler: s.handleChat, object: "chat.completion.chunk", id: newID("chatcmpl-"), n: n}
	subs := subBodies(fields, "", nil, n, f)
	if f.Stream {
		s.fanOutStream(w, r, subs, fo)
		return
	}
	s.fanOutWhole(w, r, subs, fo)
}

// fanOutRun is how one request's parts are run and joined: the handler of
// one part, the object of a streamed chunk, the joined response's id, and
// n, the choices per prompt (whose prompt is counted once).
type fanOutRun struct {
	handler http.HandlerFunc
	object  string
	id      string
	n       int
}

// fanOutInfo travels in a part's context: the joined response's id and the
// part's choice index.
type fanOutInfo struct {
	id     string
	choice int
}

type fanOutKey struct{}

// fannedOut returns the fanOutInfo of a part's request.
func fannedOut(ctx context.Context) (fanOutInfo, bool) {
	fi, ok := ctx.Value(fanOutKey{}).(fanOutInfo)
	return fi, ok
}

// part is one choice of a joined response, as a sub-handler wrote it:
// the fields are kept as they came, so that nothing is lost in the join.
type part struct {
	fields  map[string]json.RawMessage
	choices []map[string]json.RawMessage
	usage   *usage
}

// readPart reads one answer or chunk; ok is false for what is not one
// (an error body).
func readPart(data []byte) (part, bool) {
	var p part
	if json.Unmarshal(data, &p.fields) != nil {
		return p, false
	}
	raw, ok := p.fields["choices"]
	if !ok || json.Unmarshal(raw, &p.choices) != nil {
		return p, false
	}
	if u, ok := p.fields["usage"]; ok && !isNull(u) {
		p.usage = &usage{}
		if json.Unmarshal(u, p.usage) != nil {
			return p, false
		}
	}
	return p, true
}

// add counts a part's usage in total: the prompt once per prompt (its
// first choice), as OpenAI counts it, the completions of every choice.
func (fo fanOutRun) add(total *usage, i int, u *usage) {
	if u == nil {
		return
	}
	if i%fo.n == 0 {
		total.PromptTokens += u.PromptTokens
		total.PromptTokensDetails.CachedTokens += u.PromptTokensDetails.CachedTokens
	}
	total.CompletionTokens += u.CompletionTokens
}

func rawJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// subRequest is r with another body, for choice i of the joined
// response id.
func subRequest(ctx context.Context, r *http.Request, body []byte, id string, i int) *http.Request {
	sr := r.Clone(context.WithValue(ctx, fanOutKey{}, fanOutInfo{id: id, choice: i}))
	sr.Body = io.NopCloser(bytes.NewReader(body))
	sr.ContentLength = int64(len(body))
	return sr
}

func (s *Server) fanOutWhole(w http.ResponseWriter, r *http.Request, subs [][]byte, fo fanOutRun) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	recs := make([]*httptest.ResponseRecorder, len(subs))
	var wg sync.WaitGroup
	for i, b := range subs {
		recs[i] = httptest.NewRecorder()
		wg.Go(func() { fo.handler(recs[i], subRequest(ctx, r, b, fo.id, i)) })
	}
	wg.Wait()
	var out map[string]json.RawMessage
	var choices []json.RawMessage
	var total usage
	forced := false
	for i, rec := range recs {
		if rec.Code != http.StatusOK {
			// the first failure answers for the request
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		p, ok := readPart(rec.Body.Bytes())
		if !ok || len(p.choices) != 1 || p.usage == nil {
			writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("choice %d: unreadable answer", i)})
			return
		}
		if i == 0 {
			out = p.fields
		}
		c := p.choices[0]
		c["index"] = json.RawMessage(strconv.Itoa(i))
		choices = append(choices, rawJSON(c))
		fo.add(&total, i, p.usage)
		forced = forced || rec.Header().Get(closureHeader) == "true"
	}
	total.TotalTokens = total.PromptTokens + total.CompletionTokens
	out["id"], out["choices"], out["usage"] = rawJSON(fo.id), rawJSON(choices), rawJSON(total)
	delete(out, "braid")
	if forced {
		// some choice was closed early to fit its budget
		out["braid"] = rawJSON(braidInfo{ClosureForced: true})
		w.Header().Set(closureHeader, "true")
	}
	writeJSON(w, http.StatusOK, out)
}

// streamTap is a ResponseWriter that hands each server-sent event's data
// to a function (the headers and status are kept for a failure).
type streamTap struct {
	h      http.Header
	status int
	buf    bytes.Buffer
	body   bytes.Buffer // what a non-stream (error) answer wrote
	event  func(data []byte)
	stream bool
}

func (t *streamTap) Header() http.Header { return t.h }
func (t *streamTap) WriteHeader(code int) {
	if t.status == 0 {
		t.status = code
		t.stream = strings.HasPrefix(t.h.Get("Content-Type"), "text/event-stream")
	}
}
func (t *streamTap) Flush() {}
func (t *streamTap) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if !t.stream {
		return t.body.Write(p)
	}
	t.buf.Write(p)
	for {
		b := t.buf.Bytes()
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			break
		}
		sc := bufio.NewScanner(bytes.NewReader(b[:i]))
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				t.event(append([]byte(nil), d...))
			}
		}
		t.buf.Next(i + 2)
	}
	return len(p), nil
}

func (s *Server) fanOutStream(w http.ResponseWriter, r *http.Request, subs [][]byte, fo fanOutRun) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type event struct {
		i    int
		data []byte
	}
	events := make(chan event, 64)
	taps := make([]*streamTap, len(subs))
	var wg sync.WaitGroup
	for i, b := range subs {
		taps[i] = &streamTap{h: http.Header{}, event: func(d []byte) {
			select {
			case events <- event{i, d}:
			case <-ctx.Done():
			}
		}}
		wg.Go(func() { fo.handler(taps[i], subRequest(ctx, r, b, fo.id, i)) })
	}
	go func() { wg.Wait(); close(events) }()
	var sse *sseWriter
	var total usage
	var failed bool
	var created, model json.RawMessage
	for ev := range events {
		if failed {
			continue
		}
		if bytes.Equal(ev.data, []byte("[DONE]")) {
			continue
		}
		if sse == nil {
			sse = newSSE(w)
		}
		p, ok := readPart(ev.data)
		if !ok || len(p.choices) == 0 {
			// an error event: pass it on and end the stream
			w.Write(append(append([]byte("data: "), ev.data...), "\n\n"...))
			failed = true
			cancel()
			continue
		}
		fo.add(&total, ev.i, p.usage)
		delete(p.fields, "usage")
		for _, c := range p.choices {
			c["index"] = json.RawMessage(strconv.Itoa(ev.i))
		}
		p.fields["choices"] = rawJSON(p.choices)
		p.fields["id"] = rawJSON(fo.id)
		created, model = p.fields["created"], p.fields["model"]
		if sse.send("", p.fields) != nil {
			failed = true
			cancel()
		}
	}
	if sse == nil {
		// every sub-request failed before streaming: the first one's answer
		for _, t := range taps {
			if t.status != 0 && t.status != http.StatusOK {
				for k, v := range t.h {
					w.Header()[k] = v
				}
				w.WriteHeader(t.status)
				w.Write(t.body.Bytes())
				return
			}
		}
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "no choice was generated"})
		return
	}
	if failed {
		w.Write([]byte("data: [DONE]\n\n"))
		return
	}
	// A choice that failed before streaming ends the stream with its error.
	for _, t := range taps {
		if t.status != 0 && t.status != http.StatusOK {
			w.Write(append(append([]byte("data: "), bytes.TrimSpace(t.body.Bytes())...), "\n\n"...))
			w.Write([]byte("data: [DONE]\n\n"))
			return
		}
	}
	// braid's streams carry the usage in their last chunk; joined, it goes
	// in a chunk of its own, as with stream_options.include_usage
	total.TotalTokens = total.PromptTokens + total.CompletionTokens
	sse.send("", map[string]any{"id": fo.id, "object": fo.object, "created": created, "model": model, "system_fingerprint": "braid", "choices": []any{}, "usage": total})
	w.Write([]byte("data: [DONE]\n\n"))
	if sse.f != nil {
		sse.f.Flush()
	}
}
