package server

// POST /v1/responses: OpenAI's Responses API over the same scheduler as chat
// completions. input is a string or a list of message items; instructions
// become the system message; previous_response_id continues a conversation
// kept in a bounded in-memory store; stream sends the typed events
// (response.created ... response.completed) that the SDKs' stream helpers
// assemble. GET and DELETE /v1/responses/{id} read and forget a stored
// response.

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
)

// responsesRequest is the body of POST /v1/responses.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	Stream             bool            `json:"stream"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	TopK               *int            `json:"top_k"`
	MinP               *float64        `json:"min_p"`
	Seed               *int64          `json:"seed"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	Reasoning          *struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Text *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	Metadata          map[string]string `json:"metadata"`
	User              string            `json:"user"`
	Truncation        *string           `json:"truncation"`
	Include           []string          `json:"include"`
	Background        bool              `json:"background"`
}

// inputItem is one item of a list input: a message (type "message" or
// none) with string content or content parts.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	ID      string          `json:"id"`
}

// inputMessages turns input into chat messages.
func inputMessages(raw json.RawMessage) ([]chat.Message, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest("input", "input is required: a string or a list of input items")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []chat.Message{{Role: "user", Content: text}}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input must be a string or a list of input items")
	}
	if len(items) == 0 {
		return nil, badRequest("input", "input is an empty list")
	}
	var msgs []chat.Message
	for i, it := range items {
		p := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
		case "reasoning":
			continue // earlier reasoning is not fed back, as templates drop it
		default:
			return nil, badRequest(p+".type", "%s.type %q is not supported: only message items (function calls and tools are not)", p, it.Type)
		}
		switch it.Role {
		case "user", "assistant", "system", "developer":
		default:
			return nil, badRequest(p+".role", "%s.role %q is not one of user, assistant, system, developer", p, it.Role)
		}
		content, e := itemText(it.Content, p+".content")
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, chat.Message{Role: it.Role, Content: content})
	}
	if len(msgs) == 0 {
		return nil, badRequest("input", "input holds no message to answer")
	}
	return msgs, nil
}

// itemText reads a message item's content: a string, or parts of type
// input_text / output_text / text (the model reads text only).
func itemText(raw json.RawMessage, param string) (string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, "%s must be a string or a list of content parts", param)
	}
	var b strings.Builder
	for j, pt := range parts {
		switch pt.Type {
		case "input_text", "output_text", "text":
			if pt.Text == nil {
				return "", badRequest(param, "%s[%d] has no text", param, j)
			}
			b.WriteString(*pt.Text)
		default:
			return "", badRequest(param, "%s[%d].type %q is not supported: only input_text and output_text parts", param, j, pt.Type)
		}
	}
	return b.String(), nil
}

// responseStore keeps the conversations of recent stored responses for
// previous_response_id, the oldest forgotten first.
type responseStore struct {
	mu    sync.Mutex
	max   int
	order *list.List // of string ids, oldest first
	items map[string]*storedResponse
}

type storedResponse struct {
	el   *list.Element
	msgs []chat.Message // the conversation up to and including the reply
	resp map[string]any // the response object, for GET
}

// maxStoredResponses bounds the store.
const maxStoredResponses = 1024

func newResponseStore(n int) *responseStore {
	return &responseStore{max: n, order: list.New(), items: map[string]*storedResponse{}}
}

func (st *responseStore) put(id string, msgs []chat.Message, resp map[string]any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if old, ok := st.items[id]; ok {
		st.order.Remove(old.el)
	}
	st.items[id] = &storedResponse{el: st.order.PushBack(id), msgs: msgs, resp: resp}
	for st.order.Len() > st.max {
		oldest := st.order.Front()
		st.order.Remove(oldest)
		delete(st.items, oldest.Value.(string))
	}
}

func (st *responseStore) get(id string) (*storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.items[id]
	return r, ok
}

func (st *responseStore) remove(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.items[id]
	if ok {
		st.order.Remove(r.el)
		delete(st.items, id)
	}
	return ok
}

// extraState is the Server's state for the endpoints beyond chat and
// text completions.
type extraState struct {
	once  sync.Once
	store *responseStore
}

func (s *Server) responses() *responseStore {
	s.extra.once.Do(func() { s.extra.store = newResponseStore(maxStoredResponses) })
	return s.extra.store
}

func (s *Server) handleResponseByID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	switch r.Method {
	case http.MethodGet:
		if sr, ok := s.responses().get(id); ok {
			writeJSON(w, http.StatusOK, sr.resp)
			return
		}
	case http.MethodDelete:
		if s.responses().remove(id) {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
			return
		}
	default:
		writeError(w, methodNotAllowed(r))
		return
	}
	writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
		Message: fmt.Sprintf("no stored response %q (kept: the last %d responses made with store true)", id, maxStoredResponses)})
}

// toSampling maps the Responses fields onto the chat ones, so the ranges
// are checked the same way.
func (q *responsesRequest) toSampling() (samplingRequest, *apiError) {
	sr := samplingRequest{Model: q.Model, Stream: q.Stream, MaxTokens: q.MaxOutputTokens, Temperature: q.Temperature,
		TopP: q.TopP, TopK: q.TopK, MinP: q.MinP, Seed: q.Seed}
	if q.MaxOutputTokens != nil && *q.MaxOutputTokens < 1 {
		return sr, badRequest("max_output_tokens", "max_output_tokens = %d: need at least 1", *q.MaxOutputTokens)
	}
	if q.Text != nil && q.Text.Format != nil {
		f := q.Text.Format
		switch f.Type {
		case "text":
		case "json_object":
			sr.ResponseFormat = &responseFormat{Type: "json_object"}
		case "json_schema":
			if isNull(f.Schema) {
				return sr, badRequest("text.format.schema", "text.format of type json_schema needs its schema")
			}
			sr.ResponseFormat = &responseFormat{Type: "json_schema"}
			sr.ResponseFormat.JSONSchema = &struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Schema      json.RawMessage `json:"schema"`
				Strict      *bool           `json:"strict"`
			}{Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		default:
			return sr, badRequest("text.format.type", "text.format.type %q is not one of text, json_object, json_schema", f.Type)
		}
	}
	if len(q.Tools) > 0 {
		return sr, badRequest("tools", "tools are not supported by /v1/responses yet; use /v1/chat/completions")
	}
	if q.Background {
		return sr, badRequest("background", "background responses are not supported")
	}
	if q.Truncation != nil && *q.Truncation != "disabled" {
		return sr, badRequest("truncation", "truncation %q is not supported: only disabled (a prompt that does not fit is refused)", *q.Truncation)
	}
	return sr, nil
}

// responseState builds the response object as it grows.
type responseState struct {
	id, msgID, rsID string
	created         int64
	req             *responsesRequest
	model           string
	reasoning       strings.Builder
	text            strings.Builder
	status          string
	incomplete      string // the reason, when status is incomplete
	usage           map[string]any
	hasReasoning    bool
}

func (rs *responseState) reasoningItem(status string) map[string]any {
	return map[string]any{"type": "reasoning", "id": rs.rsID, "summary": []any{}, "status": status,
		"content": []any{map[string]any{"type": "reasoning_text", "text": rs.reasoning.String()}}}
}

func (rs *responseState) messageItem(status string, withText bool) map[string]any {
	content := []any{}
	if withText {
		content = append(content, outputText(rs.text.String()))
	}
	return map[string]any{"type": "message", "id": rs.msgID, "status": status, "role": "assistant", "content": content}
}

func outputText(t string) map[string]any {
	return map[string]any{"type": "output_text", "text": t, "annotations": []any{}, "logprobs": []any{}}
}

// object is the response object; output holds what is finished so far.
func (rs *responseState) object(output []any) map[string]any {
	q := rs.req
	var instr any
	if q.Instructions != nil {
		instr = *q.Instructions
	}
	var prev any
	if q.PreviousResponseID != nil {
		prev = *q.PreviousResponseID
	}
	var effort any
	if q.Reasoning != nil && q.Reasoning.Effort != nil {
		effort = *q.Reasoning.Effort
	}
	var incomplete any
	if rs.incomplete != "" {
		incomplete = map[string]any{"reason": rs.incomplete}
	}
	format := map[string]any{"type": "text"}
	if q.Text != nil && q.Text.Format != nil {
		format = map[string]any{"type": q.Text.Format.Type}
		if q.Text.Format.Name != "" {
			format["name"] = q.Text.Format.Name
		}
		if !isNull(q.Text.Format.Schema) {
			format["schema"] = q.Text.Format.Schema
		}
	}
	meta := q.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	if output == nil {
		output = []any{}
	}
	o := map[string]any{
		"id": rs.id, "object": "response", "created_at": rs.created, "status": rs.status, "error": nil,
		"incomplete_details": incomplete, "instructions": instr, "max_output_tokens": q.MaxOutputTokens, "model": rs.model,
		"output": output, "parallel_tool_calls": true, "previous_response_id": prev,
		"reasoning": map[string]any{"effort": effort, "summary": nil}, "store": q.Store == nil || *q.Store,
		"temperature": q.Temperature, "text": map[string]any{"format": format}, "tool_choice": "auto", "tools": []any{},
		"top_p": q.TopP, "truncation": "disabled", "usage": rs.usage, "user": nilIfEmpty(q.User), "metadata": meta,
	}
	return o
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// finalOutput is the output list of the finished response.
func (rs *responseState) finalOutput() []any {
	var out []any
	if rs.hasReasoning {
		out = append(out, rs.reasoningItem("completed"))
	}
	status := "completed"
	if rs.status == "incomplete" {
		status = "incomplete"
	}
	return append(out, rs.messageItem(status, true))
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req responsesRequest
	if !s.post(w, r, &req) {
		return
	}
	sr, e := req.toSampling()
	if e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	params, maxTok, e := sr.params(s.cfg.Defaults, randomSeed)
	if e != nil {
		writeError(w, e)
		return
	}
	msgs, e := inputMessages(req.Input)
	if e != nil {
		writeError(w, e)
		return
	}
	var history []chat.Message
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev, ok := s.responses().get(*req.PreviousResponseID)
		if !ok {
			writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "previous_response_id", Code: "previous_response_not_found",
				Message: fmt.Sprintf("previous_response_id %q is not stored here (kept: the last %d responses made with store true)", *req.PreviousResponseID, maxStoredResponses)})
			return
		}
		// The previous turn's instructions are not carried over, as
		// OpenAI's API does.
		for _, m := range prev.msgs {
			if m.Role != "system" && m.Role != "developer" {
				history = append(history, m)
			}
		}
	}
	conv := append(append([]chat.Message(nil), history...), msgs...)
	var all []chat.Message
	if req.Instructions != nil && *req.Instructions != "" {
		all = append(all, chat.Message{Role: "system", Content: *req.Instructions})
	}
	all = append(all, conv...)
	extra := map[string]any{}
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		if err := chat.CheckReasoningEffort(*req.Reasoning.Effort); err != nil {
			writeError(w, badRequest("reasoning.effort", "%v", err))
			return
		}
		extra["reasoning_effort"] = *req.Reasoning.Effort
	}
	spec, e := sr.outputConstraint()
	if e != nil {
		writeError(w, e)
		return
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	text, e := b.renderChat(all, extra)
	if e != nil {
		writeError(w, e)
		return
	}
	ids := b.Tok.Encode(text, true, true)
	j := &job{chat: true, model: s.modelName(req.Model), prompt: ids, stream: req.Stream, topLogprobs: -1, render: b.render}
	if b.reasoning != chat.ReasoningNone {
		j.reasoning = chat.NewReasoningParser(b.reasoning, text)
	}
	if spec != nil {
		opened := strings.HasSuffix(strings.TrimRight(text, " \t\r\n"), "<think>")
		gd, e := b.specGuide(spec, true, b.reasoning, opened)
		if e != nil {
			writeError(w, e)
			return
		}
		j.constraint = gd.NewConstraint()
	}
	st, ctx, cancel, g, ok := s.start(w, r, b, j, params, maxTok, "input", start)
	if !ok {
		return
	}
	defer cancel()
	rs := &responseState{id: newID("resp_"), msgID: newID("msg_"), rsID: newID("rs_"), created: start.Unix(), req: &req,
		model: s.modelName(req.Model), status: "in_progress"}
	g.id = rs.id
	var ev *responseEvents
	if req.Stream {
		ev = &responseEvents{sse: newSSE(w), rs: rs}
		if ev.emit("response.created", map[string]any{"response": rs.object(nil)}) != nil {
			return
		}
		if ev.emit("response.in_progress", map[string]any{"response": rs.object(nil)}) != nil {
			return
		}
	}
	finish, res, err := g.driveTokens(ctx, cancel, st, func(engine.Token) {}, func(d chat.Split) error {
		if ev != nil {
			return ev.add(d)
		}
		rs.reasoning.WriteString(d.Reasoning)
		rs.text.WriteString(d.Content)
		rs.hasReasoning = rs.hasReasoning || d.Reasoning != ""
		return nil
	})
	noteTokens(r.Context(), len(ids), g.ntok)
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() != nil {
			if ev == nil {
				w.WriteHeader(499)
			}
			return
		}
		s.cfg.Logf("response %s failed: %v", rs.id, err)
		ae := engineError(err)
		if ev == nil {
			writeError(w, ae)
			return
		}
		rs.status = "failed"
		ev.emit("error", map[string]any{"code": ae.Code, "message": ae.Message, "param": nil})
		failed := rs.object(nil)
		failed["error"] = map[string]any{"code": "server_error", "message": ae.Message}
		ev.emit("response.failed", map[string]any{"response": failed})
		return
	}
	rs.status = "completed"
	if finish == "length" {
		rs.status, rs.incomplete = "incomplete", "max_output_tokens"
	}
	reasoningTokens := 0
	if rs.hasReasoning && j.reasoning != nil {
		// the share of the output that was reasoning, by characters: the
		// parser does not split tokens
		if n := rs.reasoning.Len() + rs.text.Len(); n > 0 {
			reasoningTokens = g.ntok * rs.reasoning.Len() / n
		}
	}
	rs.usage = map[string]any{
		"input_tokens": len(ids), "input_tokens_details": map[string]int{"cached_tokens": res.CachedTokens},
		"output_tokens": g.ntok, "output_tokens_details": map[string]int{"reasoning_tokens": reasoningTokens},
		"total_tokens": len(ids) + g.ntok,
	}
	if ev != nil {
		if ev.finish() != nil {
			return
		}
	}
	resp := rs.object(rs.finalOutput())
	if req.Store == nil || *req.Store {
		reply := chat.Message{Role: "assistant", Content: rs.text.String()}
		s.responses().put(rs.id, append(conv, reply), resp)
	}
	if ev != nil {
		name := "response.completed"
		if rs.status == "incomplete" {
			name = "response.incomplete"
		}
		ev.emit(name, map[string]any{"response": resp})
		return
	}
	resp["output_text"] = rs.text.String()
	writeJSON(w, http.StatusOK, resp)
}

// renderChat renders messages with the model's template and the request's
// extra variables, as handleChat does.
func (b *Backend) renderChat(msgs []chat.Message, extra map[string]any) (string, *apiError) {
	opts := chat.Options{AddGenerationPrompt: true, Extra: extra}
	if b.Tok.BOS() >= 0 {
		opts.BOS = b.Tok.TokenText(b.Tok.BOS())
	}
	if b.Tok.EOS() >= 0 {
		opts.EOS = b.Tok.TokenText(b.Tok.EOS())
	}
	text, err := b.Template.RenderChat(msgs, opts)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) && ce.Raised {
			return "", badRequest("input", "the model's chat template refused the input: %s", ce.Message)
		}
		return "", &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("rendering the chat template: %v", err)}
	}
	return text, nil
}

// responseEvents writes a response's stream: the typed events with their
// sequence numbers, opening the reasoning and message items as their text
// arrives.
type responseEvents struct {
	sse *sseWriter
	rs  *responseState
	seq int
	// the output items opened so far: reasoning (index 0 when there is
	// reasoning) and the message
	rsIndex, msgIndex int
	rsOpen, msgOpen   bool
	next              int
}

func (e *responseEvents) emit(name string, fields map[string]any) error {
	fields["type"] = name
	fields["sequence_number"] = e.seq
	e.seq++
	return e.sse.send(name, fields)
}

func (e *responseEvents) add(d chat.Split) error {
	rs := e.rs
	if d.Reasoning != "" {
		if !e.rsOpen {
			if e.msgOpen {
				// reasoning after the answer started: keep it in the
				// answer's order by closing nothing; append to the text
				rs.text.WriteString(d.Reasoning)
				return e.delta(d.Reasoning)
			}
			e.rsOpen, e.rsIndex = true, e.next
			e.next++
			rs.hasReasoning = true
			item := map[string]any{"type": "reasoning", "id": rs.rsID, "summary": []any{}, "status": "in_progress", "content": []any{}}
			if err := e.emit("response.output_item.added", map[string]any{"output_index": e.rsIndex, "item": item}); err != nil {
				return err
			}
			if err := e.emit("response.content_part.added", map[string]any{"item_id": rs.rsID, "output_index": e.rsIndex, "content_index": 0,
				"part": map[string]any{"type": "reasoning_text", "text": ""}}); err != nil {
				return err
			}
		}
		rs.reasoning.WriteString(d.Reasoning)
		if err := e.emit("response.reasoning_text.delta", map[string]any{"item_id": rs.rsID, "output_index": e.rsIndex, "content_index": 0, "delta": d.Reasoning}); err != nil {
			return err
		}
	}
	if d.Content != "" {
		if err := e.openMessage(); err != nil {
			return err
		}
		rs.text.WriteString(d.Content)
		return e.delta(d.Content)
	}
	return nil
}

func (e *responseEvents) delta(t string) error {
	return e.emit("response.output_text.delta", map[string]any{"item_id": e.rs.msgID, "output_index": e.msgIndex, "content_index": 0, "delta": t, "logprobs": []any{}})
}

func (e *responseEvents) closeReasoning() error {
	if !e.rsOpen {
		return nil
	}
	e.rsOpen = false
	rs := e.rs
	t := rs.reasoning.String()
	if err := e.emit("response.reasoning_text.done", map[string]any{"item_id": rs.rsID, "output_index": e.rsIndex, "content_index": 0, "text": t}); err != nil {
		return err
	}
	if err := e.emit("response.content_part.done", map[string]any{"item_id": rs.rsID, "output_index": e.rsIndex, "content_index": 0,
		"part": map[string]any{"type": "reasoning_text", "text": t}}); err != nil {
		return err
	}
	return e.emit("response.output_item.done", map[string]any{"output_index": e.rsIndex, "item": rs.reasoningItem("completed")})
}

func (e *responseEvents) openMessage() error {
	if e.msgOpen {
		return nil
	}
	if err := e.closeReasoning(); err != nil {
		return err
	}
	e.msgOpen, e.msgIndex = true, e.next
	e.next++
	rs := e.rs
	if err := e.emit("response.output_item.added", map[string]any{"output_index": e.msgIndex, "item": rs.messageItem("in_progress", false)}); err != nil {
		return err
	}
	return e.emit("response.content_part.added", map[string]any{"item_id": rs.msgID, "output_index": e.msgIndex, "content_index": 0, "part": outputText("")})
}

// finish closes the open items; the caller sends response.completed.
func (e *responseEvents) finish() error {
	if err := e.openMessage(); err != nil { // an empty answer is still a message
		return err
	}
	rs := e.rs
	t := rs.text.String()
	if err := e.emit("response.output_text.done", map[string]any{"item_id": rs.msgID, "output_index": e.msgIndex, "content_index": 0, "text": t, "logprobs": []any{}}); err != nil {
		return err
	}
	if err := e.emit("response.content_part.done", map[string]any{"item_id": rs.msgID, "output_index": e.msgIndex, "content_index": 0, "part": outputText(t)}); err != nil {
		return err
	}
	status := "completed"
	if rs.status == "incomplete" {
		status = "incomplete"
	}
	return e.emit("response.output_item.done", map[string]any{"output_index": e.msgIndex, "item": rs.messageItem(status, true)})
}
