package server

// n > 1 and a list of prompts in /v1/completions: the request fans out into
// one single-prompt, single-choice request per prompt and choice, run
// together (the scheduler batches them), and their answers are joined into
// one response whose choices are numbered prompt by prompt, as OpenAI's are:
// choice i*n+j is prompt i's j-th. Streamed, the chunks of all of them are
// passed on as they come, each with its choice index.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// maxChoices bounds prompts x n in one request.
const maxChoices = 64

// fanOut is what handleCompletionBatch reads of a request before it
// decides whether to fan out.
type fanOut struct {
	N      *int            `json:"n"`
	Prompt json.RawMessage `json:"prompt"`
	Seed   *int64          `json:"seed"`
	Stream bool            `json:"stream"`
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("request body is over the limit of %d bytes", mb.Limit)})
			return
		}
		writeError(w, badRequest("", "reading the request body: %v", err))
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
	// One body per choice: its prompt, n 1, and a seed of its own when one
	// was given (choices of a seeded request differ and repeat).
	subs := make([][]byte, 0, len(prompts)*n)
	for _, p := range prompts {
		for j := 0; j < n; j++ {
			m := make(map[string]json.RawMessage, len(fields)+1)
			for k, v := range fields {
				m[k] = v
			}
			m["prompt"] = p
			delete(m, "n")
			if f.Seed != nil {
				m["seed"], _ = json.Marshal(*f.Seed + int64(j))
			}
			if f.Stream {
				m["stream_options"] = json.RawMessage(`{"include_usage":false}`)
			}
			b, _ := json.Marshal(m)
			subs = append(subs, b)
		}
	}
	if f.Stream {
		s.fanOutStream(w, r, subs, n)
		return
	}
	s.fanOutWhole(w, r, subs, n)
}

// subRequest is r with another body.
func subRequest(ctx context.Context, r *http.Request, body []byte) *http.Request {
	sr := r.Clone(ctx)
	sr.Body = io.NopCloser(bytes.NewReader(body))
	sr.ContentLength = int64(len(body))
	return sr
}

func (s *Server) fanOutWhole(w http.ResponseWriter, r *http.Request, subs [][]byte, n int) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	recs := make([]*httptest.ResponseRecorder, len(subs))
	var wg sync.WaitGroup
	for i, b := range subs {
		recs[i] = httptest.NewRecorder()
		wg.Go(func() { s.handleCompletion(recs[i], subRequest(ctx, r, b)) })
	}
	wg.Wait()
	var out response
	var total usage
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
		var one response
		if err := json.Unmarshal(rec.Body.Bytes(), &one); err != nil || len(one.Choices) != 1 || one.Usage == nil {
			writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("choice %d: unreadable answer", i)})
			return
		}
		if i == 0 {
			out = one
			out.Choices = nil
		}
		c := one.Choices[0]
		c.Index = i
		out.Choices = append(out.Choices, c)
		if i%n == 0 { // the prompt once, as OpenAI counts it
			total.PromptTokens += one.Usage.PromptTokens
			total.PromptTokensDetails.CachedTokens += one.Usage.PromptTokensDetails.CachedTokens
		}
		total.CompletionTokens += one.Usage.CompletionTokens
	}
	total.TotalTokens = total.PromptTokens + total.CompletionTokens
	out.Usage = &total
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

func (s *Server) fanOutStream(w http.ResponseWriter, r *http.Request, subs [][]byte, n int) {
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
		wg.Go(func() { s.handleCompletion(taps[i], subRequest(ctx, r, b)) })
	}
	go func() { wg.Wait(); close(events) }()
	var sse *sseWriter
	id := newID("cmpl-")
	var total usage
	var failed bool
	var created int64
	var model string
	for ev := range events {
		if failed {
			continue
		}
		if bytes.Equal(ev.data, []byte("[DONE]")) {
			continue
		}
		var c response
		if err := json.Unmarshal(ev.data, &c); err != nil || len(c.Choices) == 0 {
			// an error event: pass it on and end the stream
			if sse == nil {
				sse = newSSE(w)
			}
			w.Write(append(append([]byte("data: "), ev.data...), "\n\n"...))
			failed = true
			cancel()
			continue
		}
		if sse == nil {
			sse = newSSE(w)
		}
		if c.Usage != nil {
			if ev.i%n == 0 {
				total.PromptTokens += c.Usage.PromptTokens
				total.PromptTokensDetails.CachedTokens += c.Usage.PromptTokensDetails.CachedTokens
			}
			total.CompletionTokens += c.Usage.CompletionTokens
			c.Usage = nil
		}
		c.ID = id
		c.Choices[0].Index = ev.i
		created, model = c.Created, c.Model
		if sse.send("", c) != nil {
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
	sse.send("", response{ID: id, Object: "text_completion", Created: created, Model: model, SystemFingerprint: "braid", Choices: []choice{}, Usage: &total})
	w.Write([]byte("data: [DONE]\n\n"))
	if sse.f != nil {
		sse.f.Flush()
	}
}
