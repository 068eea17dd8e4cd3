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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"braid/internal/chat"
	"braid/internal/toolcall"
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
	Include           json.RawMessage   `json:"include"`
	Background        bool              `json:"background"`
}

// inputItem is one item of a list input: a message (type "message" or
// none) with string content or content parts, a function call the model
// made (type "function_call") or its result (type "function_call_output").
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputMessages turns input into chat messages: function calls join the
// assistant message before them (or make one), their outputs become tool
// messages. calls are the call ids of the conversation so far (the stored
// one continued); an output must answer one of them.
func inputMessages(raw json.RawMessage, calls map[string]bool) ([]chat.Message, *apiError) {
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
		return nil, badRequest("input", "input must be a string or a list of input items: %v", jsonErr(err))
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
		case "function_call":
			c, e := functionCall(it, p)
			if e != nil {
				return nil, e
			}
			if calls[c.ID] {
				return nil, badRequest(p+".call_id", "%s.call_id %q is the id of an earlier call too; each call needs its own", p, c.ID)
			}
			calls[c.ID] = true
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, c)
			} else {
				msgs = append(msgs, chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{c}})
			}
			continue
		case "function_call_output":
			if it.CallID == nil || *it.CallID == "" {
				return nil, badRequest(p+".call_id", "%s.call_id is required: the call_id of the function_call this answers", p)
			}
			if !calls[*it.CallID] {
				return nil, badRequest(p+".call_id", "%s.call_id %q answers no function_call of the conversation (neither an input item before it nor the continued response)", p, *it.CallID)
			}
			if isNull(it.Output) {
				return nil, badRequest(p+".output", "%s.output is required: the call's result, a string or input_text parts", p)
			}
			out, e := itemText(it.Output, p+".output")
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, chat.Message{Role: "tool", ToolCallID: *it.CallID, Content: out})
			continue
		default:
			return nil, badRequest(p+".type", "%s.type %q is not supported: only message, function_call, function_call_output and reasoning items", p, it.Type)
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

// functionCall reads a function_call input item: the call as a chat
// message holds it.
func functionCall(it inputItem, p string) (chat.ToolCall, *apiError) {
	var c chat.ToolCall
	if it.CallID == nil || *it.CallID == "" {
		return c, badRequest(p+".call_id", "%s.call_id is required", p)
	}
	if it.Name == nil || *it.Name == "" {
		return c, badRequest(p+".name", "%s.name is required: the function called", p)
	}
	if it.Arguments == nil {
		return c, badRequest(p+".arguments", "%s.arguments is required: the call's arguments as JSON text", p)
	}
	if !json.Valid([]byte(*it.Arguments)) {
		return c, badRequest(p+".arguments", "%s.arguments must be JSON text: %s", p, abbrev(*it.Arguments))
	}
	c = chat.ToolCall{ID: *it.CallID, Type: "function", Function: chat.FunctionCall{Name: *it.Name, Arguments: *it.Arguments}}
	return c, nil
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

// callIDs are the ids of the calls in msgs.
func callIDs(msgs []chat.Message) map[string]bool {
	ids := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			ids[c.ID] = true
		}
	}
	return ids
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
	if q.Background {
		return sr, badRequest("background", "background: true is not supported: braid answers a response while the request is open (stream: true sends it as it is written)")
	}
	if q.Truncation != nil && *q.Truncation != "disabled" {
		return sr, badRequest("truncation", "truncation %q is not supported: only disabled (a prompt that does not fit is refused)", *q.Truncation)
	}
	return sr, nil
}

// toolSetup reads tools (function tools in the Responses shape: name,
// description, parameters and strict on the tool), tool_choice and
// parallel_tool_calls, validated as the chat endpoint's.
func (q *responsesRequest) toolSetup() (*toolSetup, *apiError) {
	ts := &toolSetup{choice: "auto", parallel: true}
	if q.ParallelToolCalls != nil {
		ts.parallel = *q.ParallelToolCalls
	}
	names := map[string]bool{}
	for i, raw := range q.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type *string `json:"type"`
			funcDef
			Function json.RawMessage `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badRequest(param, "%s must be an object {\"type\": \"function\", \"name\": ..., \"parameters\": {...}}: %v", param, jsonErr(err))
		}
		if t.Type == nil {
			return nil, badRequest(param+".type", "%s.type is required: \"function\"", param)
		}
		if *t.Type != "function" {
			return nil, badRequest(param+".type", "%s.type %q is not supported: only function tools (braid runs no hosted tools)", param, *t.Type)
		}
		if !isNull(t.Function) {
			return nil, badRequest(param+".function", "%s.function is the chat completions' shape; in the Responses API name, description, parameters and strict are fields of the tool itself", param)
		}
		// The template reads tools in the chat shape.
		var chatShape struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description json.RawMessage `json:"description,omitempty"`
				Parameters  json.RawMessage `json:"parameters,omitempty"`
				Strict      json.RawMessage `json:"strict,omitempty"`
			} `json:"function"`
		}
		chatShape.Type = "function"
		if t.Name != nil {
			chatShape.Function.Name = *t.Name
		}
		chatShape.Function.Description, chatShape.Function.Parameters, chatShape.Function.Strict = t.Description, t.Parameters, t.Strict
		cr, err := json.Marshal(chatShape)
		if err != nil {
			return nil, badRequest(param, "%s: %v", param, err)
		}
		if e := ts.addFunction(param, &t.funcDef, cr, names, true); e != nil {
			return nil, e
		}
	}
	if !isNull(q.ToolChoice) {
		if word, ok, e := toolChoiceWord(q.ToolChoice, `{"type": "function", "name": ...}`); e != nil {
			return nil, e
		} else if ok {
			ts.choice = word
		} else {
			var c struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if err := json.Unmarshal(q.ToolChoice, &c); err != nil || c.Type == "" {
				return nil, badRequest("tool_choice", "tool_choice must be none, auto, required, or {\"type\": \"function\", \"name\": ...}")
			}
			if c.Type != "function" {
				return nil, badRequest("tool_choice", "tool_choice of type %q is not supported: only function tools, named as {\"type\": \"function\", \"name\": ...}", c.Type)
			}
			if c.Name == "" {
				return nil, badRequest("tool_choice", "tool_choice {\"type\": \"function\"} needs the function's name")
			}
			if !names[c.Name] {
				return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not among the tools", c.Name)
			}
			ts.choice, ts.only = "function", c.Name
		}
	}
	if ts.choice == "required" && len(ts.tools) == 0 {
		return nil, badRequest("tool_choice", "tool_choice required needs tools")
	}
	return ts, nil
}

// unsupportedFields are Responses fields braid does not carry out, with
// why; a request that sets one (to anything but null) is refused, so that
// nothing it asks for is silently dropped.
var unsupportedFields = map[string]string{
	"conversation":   "conversations are not supported: continue with previous_response_id",
	"prompt":         "prompt templates are not supported: send input (and instructions)",
	"max_tool_calls": "max_tool_calls is not supported (parallel_tool_calls: false allows one call)",
	"top_logprobs":   "top_logprobs is not supported by /v1/responses; /v1/chat/completions returns logprobs",
}

// refuseUnsupported answers a request that sets a field of
// unsupportedFields, or an include braid cannot fill.
func refuseUnsupported(body map[string]json.RawMessage) *apiError {
	for _, k := range slices.Sorted(maps.Keys(body)) {
		if why, ok := unsupportedFields[k]; ok && !isNull(body[k]) {
			return badRequest(k, "%s", why)
		}
	}
	if raw, ok := body["include"]; ok && !isNull(raw) {
		var inc []string
		if json.Unmarshal(raw, &inc) != nil {
			return badRequest("include", "include must be a list of strings")
		}
		for _, v := range inc {
			if v != includeEncryptedReasoning {
				return badRequest("include", "include %q is not supported: braid adds no extra data (logprobs, search results) to the output beyond %q", v, includeEncryptedReasoning)
			}
		}
	}
	return nil
}

// includeEncryptedReasoning is the include a stateless client (store
// false, the Codex CLI's way) sends to get its reasoning items back in a
// form it can send again.
const includeEncryptedReasoning = "reasoning.encrypted_content"

// includes reports whether the request's include lists v (refuseUnsupported
// has checked its shape).
func (q *responsesRequest) includes(v string) bool {
	var inc []string
	json.Unmarshal(q.Include, &inc)
	return slices.Contains(inc, v)
}

// outItem is one output item of a response: reasoning, a message or a
// function call.
type outItem struct {
	kind string // "reasoning", "message", "function_call"
	id   string
	text strings.Builder // reasoning or message text
	call *toolcall.Call
	// encrypted: a reasoning item carries encrypted_content. braid keeps
	// no secret from the client that asked: the content is the reasoning
	// text, base64 with a version prefix, opaque as OpenAI's is, and
	// reasoning items given back as input are dropped either way (chat
	// templates do not render earlier turns' reasoning).
	encrypted bool
}

// encryptedReasoning is the encrypted_content of a reasoning text.
func encryptedReasoning(text string) string {
	return "braid-r1:" + base64.StdEncoding.EncodeToString([]byte(text))
}

// json is the item as the output list shows it.
func (it *outItem) json(status string) map[string]any {
	switch it.kind {
	case "reasoning":
		m := map[string]any{"type": "reasoning", "id": it.id, "summary": []any{}, "status": status,
			"content": []any{map[string]any{"type": "reasoning_text", "text": it.text.String()}}}
		if it.encrypted && status != "in_progress" {
			m["encrypted_content"] = encryptedReasoning(it.text.String())
		}
		return m
	case "function_call":
		args := ""
		if status != "in_progress" {
			args = it.call.Arguments
		}
		return map[string]any{"type": "function_call", "id": it.id, "call_id": it.call.ID, "name": it.call.Name, "arguments": args, "status": status}
	}
	content := []any{}
	if status != "in_progress" {
		content = append(content, outputText(it.text.String()))
	}
	return map[string]any{"type": "message", "id": it.id, "status": status, "role": "assistant", "content": content}
}

func outputText(t string) map[string]any {
	return map[string]any{"type": "output_text", "text": t, "annotations": []any{}, "logprobs": []any{}}
}

// responseState builds the response as the output arrives: the items in
// the order the model wrote them, and, streamed, their events.
type responseState struct {
	id         string
	created    int64
	req        *responsesRequest
	tools      *toolSetup
	model      string
	status     string
	incomplete string // the reason, when status is incomplete
	usage      map[string]any

	items []*outItem
	open  *outItem // the reasoning or message item being written
	// pending is whitespace not yet given to a message: between or
	// around calls it is dropped, before text it opens the message.
	pending string
	sse     *sseWriter // nil when the response is sent whole
	seq     int
}

func (rs *responseState) emit(name string, fields map[string]any) error {
	if rs.sse == nil {
		return nil
	}
	fields["type"] = name
	fields["sequence_number"] = rs.seq
	rs.seq++
	return rs.sse.send(name, fields)
}

func (rs *responseState) index(it *outItem) int { return slices.Index(rs.items, it) }

// openItem starts an item of kind (a function call's call c), closing
// the one open.
func (rs *responseState) openItem(kind, prefix string, c *toolcall.Call) (*outItem, error) {
	if err := rs.closeOpen(); err != nil {
		return nil, err
	}
	it := &outItem{kind: kind, id: newID(prefix), call: c, encrypted: kind == "reasoning" && rs.req.includes(includeEncryptedReasoning)}
	rs.items = append(rs.items, it)
	i := rs.index(it)
	if err := rs.emit("response.output_item.added", map[string]any{"output_index": i, "item": it.json("in_progress")}); err != nil {
		return nil, err
	}
	switch kind {
	case "reasoning":
		rs.open = it
		return it, rs.emit("response.content_part.added", map[string]any{"item_id": it.id, "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "reasoning_text", "text": ""}})
	case "message":
		rs.open = it
		return it, rs.emit("response.content_part.added", map[string]any{"item_id": it.id, "output_index": i, "content_index": 0, "part": outputText("")})
	}
	return it, nil
}

// closeOpen ends the reasoning or message item being written.
func (rs *responseState) closeOpen() error {
	it := rs.open
	if it == nil {
		return nil
	}
	rs.open = nil
	i, t := rs.index(it), it.text.String()
	status := "completed"
	if it.kind == "reasoning" {
		if err := rs.emit("response.reasoning_text.done", map[string]any{"item_id": it.id, "output_index": i, "content_index": 0, "text": t}); err != nil {
			return err
		}
		if err := rs.emit("response.content_part.done", map[string]any{"item_id": it.id, "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "reasoning_text", "text": t}}); err != nil {
			return err
		}
	} else {
		if rs.status == "incomplete" && it == rs.items[len(rs.items)-1] {
			status = "incomplete" // the message the budget cut
		}
		if err := rs.emit("response.output_text.done", map[string]any{"item_id": it.id, "output_index": i, "content_index": 0, "text": t, "logprobs": []any{}}); err != nil {
			return err
		}
		if err := rs.emit("response.content_part.done", map[string]any{"item_id": it.id, "output_index": i, "content_index": 0, "part": outputText(t)}); err != nil {
			return err
		}
	}
	return rs.emit("response.output_item.done", map[string]any{"output_index": i, "item": it.json(status)})
}

func (rs *responseState) addReasoning(t string) error {
	if t == "" {
		return nil
	}
	if rs.open != nil && rs.open.kind == "message" {
		// reasoning after the answer started: kept in the answer, in
		// the order written
		return rs.addContent(t)
	}
	it := rs.open
	if it == nil {
		var err error
		if it, err = rs.openItem("reasoning", "rs_", nil); err != nil {
			return err
		}
	}
	it.text.WriteString(t)
	return rs.emit("response.reasoning_text.delta", map[string]any{"item_id": it.id, "output_index": rs.index(it), "content_index": 0, "delta": t})
}

func (rs *responseState) addContent(t string) error {
	if t == "" {
		return nil
	}
	it := rs.open
	if it == nil || it.kind != "message" {
		rs.pending += t
		if strings.TrimSpace(rs.pending) == "" {
			return nil
		}
		t, rs.pending = rs.pending, ""
		var err error
		if it, err = rs.openItem("message", "msg_", nil); err != nil {
			return err
		}
	}
	it.text.WriteString(t)
	return rs.emit("response.output_text.delta", map[string]any{"item_id": it.id, "output_index": rs.index(it), "content_index": 0, "delta": t, "logprobs": []any{}})
}

func (rs *responseState) addCall(c *toolcall.Call) error {
	rs.pending = ""
	it, err := rs.openItem("function_call", "fc_", c)
	if err != nil {
		return err
	}
	i := rs.index(it)
	if err := rs.emit("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": i, "delta": c.Arguments}); err != nil {
		return err
	}
	if err := rs.emit("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": i, "name": c.Name, "arguments": c.Arguments}); err != nil {
		return err
	}
	return rs.emit("response.output_item.done", map[string]any{"output_index": i, "item": it.json("completed")})
}

func (rs *responseState) add(d piece) error {
	if err := rs.addReasoning(d.reasoning); err != nil {
		return err
	}
	for _, e := range d.events {
		var err error
		if e.Call != nil {
			err = rs.addCall(e.Call)
		} else {
			err = rs.addContent(e.Content)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finish closes the open item; an output without a message or a call
// still has a message (empty, or the whitespace written).
func (rs *responseState) finish() error {
	answered := slices.ContainsFunc(rs.items, func(it *outItem) bool { return it.kind != "reasoning" })
	if !answered {
		t := rs.pending
		rs.pending = ""
		if _, err := rs.openItem("message", "msg_", nil); err != nil {
			return err
		}
		if t != "" {
			if err := rs.addContent(t); err != nil {
				return err
			}
		}
	}
	return rs.closeOpen()
}

// text is the text of the message items, as output_text.
func (rs *responseState) text() string {
	var b strings.Builder
	for _, it := range rs.items {
		if it.kind == "message" {
			b.WriteString(it.text.String())
		}
	}
	return b.String()
}

// reasoningLen is how many bytes of reasoning were written.
func (rs *responseState) reasoningLen() int {
	n := 0
	for _, it := range rs.items {
		if it.kind == "reasoning" {
			n += it.text.Len()
		}
	}
	return n
}

// reply is the output as the assistant message a continued conversation
// holds.
func (rs *responseState) reply() chat.Message {
	m := chat.Message{Role: "assistant"}
	for _, it := range rs.items {
		if it.kind == "function_call" {
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: it.call.ID, Type: "function", Function: chat.FunctionCall{Name: it.call.Name, Arguments: it.call.Arguments}})
		}
	}
	if t := rs.text(); t != "" || len(m.ToolCalls) == 0 {
		m.Content = t
	}
	return m
}

// output is the output list: the finished items, and when final, the
// open one too.
func (rs *responseState) output() []any {
	out := []any{}
	for _, it := range rs.items {
		status := "completed"
		if rs.status == "incomplete" && it.kind == "message" && it == rs.items[len(rs.items)-1] {
			status = "incomplete"
		}
		out = append(out, it.json(status))
	}
	return out
}

// object is the response object with output.
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
	tools := []any{}
	for _, t := range q.Tools {
		tools = append(tools, t)
	}
	var choice any = "auto"
	if !isNull(q.ToolChoice) {
		choice = q.ToolChoice
	}
	return map[string]any{
		"id": rs.id, "object": "response", "created_at": rs.created, "status": rs.status, "error": nil,
		"incomplete_details": incomplete, "instructions": instr, "max_output_tokens": q.MaxOutputTokens, "model": rs.model,
		"output": output, "parallel_tool_calls": rs.tools.parallel, "previous_response_id": prev,
		"reasoning": map[string]any{"effort": effort, "summary": nil}, "store": q.Store == nil || *q.Store,
		"temperature": q.Temperature, "text": map[string]any{"format": format}, "tool_choice": choice, "tools": tools,
		"top_p": q.TopP, "truncation": "disabled", "usage": rs.usage, "user": nilIfEmpty(q.User), "metadata": meta,
		"background": false,
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req responsesRequest
	if r.Method != http.MethodPost {
		writeError(w, methodNotAllowed(r))
		return
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	if e := parseJSON(body, &req); e != nil {
		writeError(w, e)
		return
	}
	var fields map[string]json.RawMessage
	json.Unmarshal(body, &fields) // an object: parseJSON took it
	if e := refuseUnsupported(fields); e != nil {
		writeError(w, e)
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
	ts, e := req.toolSetup()
	if e != nil {
		writeError(w, e)
		return
	}
	var history []chat.Message
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev, ok := s.responses().get(*req.PreviousResponseID)
		if !ok {
			writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "previous_response_id", Code: "previous_response_not_found",
				Message: fmt.Sprintf("previous_response_id %q is not stored here: %s", *req.PreviousResponseID, s.responses().kept())})
			return
		}
		// The stored conversation is its input and output; the previous
		// turn's instructions are not in it, as in OpenAI's API.
		history = prev.msgs
	}
	msgs, e := inputMessages(req.Input, callIDs(history))
	if e != nil {
		writeError(w, e)
		return
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
	if spec != nil {
		spec.param = strings.Replace(strings.Replace(spec.param, "response_format.json_schema", "text.format", 1), "response_format", "text.format", 1)
	}
	b, ok := s.ready(w)
	if !ok {
		return
	}
	text, e := b.renderChat(all, extra, ts)
	if e != nil {
		writeError(w, e)
		return
	}
	ids := b.Tok.Encode(text, true, true)
	j := &job{chat: true, model: s.modelName(req.Model), prompt: ids, stream: req.Stream, topLogprobs: -1, render: b.render}
	if b.reasoning != chat.ReasoningNone {
		j.reasoning = chat.NewReasoningParser(b.reasoning, text)
	}
	opened := strings.HasSuffix(strings.TrimRight(text, " \t\r\n"), "<think>")
	gd, e := b.outputGuide(ts, spec, opened, "text.format")
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
	st, ctx, cancel, g, ok := s.start(w, r, b, j, params, maxTok, "input", start)
	if !ok {
		return
	}
	defer cancel()
	rs := &responseState{id: newID("resp_"), created: start.Unix(), req: &req, tools: ts, model: s.modelName(req.Model), status: "in_progress"}
	g.id = rs.id
	j.slot.name(ctx, g.id)
	if req.Stream {
		rs.sse = newSSE(w)
		if rs.emit("response.created", map[string]any{"response": rs.object(nil)}) != nil {
			return
		}
		if rs.emit("response.in_progress", map[string]any{"response": rs.object(nil)}) != nil {
			return
		}
	}
	finish, res, err := g.drive(ctx, cancel, st, rs.add)
	noteTokens(r.Context(), len(ids), g.ntok)
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() != nil {
			if rs.sse == nil {
				w.WriteHeader(499)
			}
			return
		}
		s.cfg.Logf("response %s failed: %v", rs.id, err)
		ae := engineError(err)
		if rs.sse == nil {
			writeError(w, ae)
			return
		}
		rs.status = "failed"
		rs.emit("error", map[string]any{"code": ae.Code, "message": ae.Message, "param": nil})
		failed := rs.object(nil)
		failed["error"] = map[string]any{"code": "server_error", "message": ae.Message}
		rs.emit("response.failed", map[string]any{"response": failed})
		return
	}
	rs.status = "completed"
	if finish == "length" {
		rs.status, rs.incomplete = "incomplete", "max_output_tokens"
	}
	if rs.finish() != nil {
		return
	}
	reasoningTokens := 0
	if rl := rs.reasoningLen(); rl > 0 {
		// the share of the output that was reasoning, by characters: the
		// parser does not split tokens
		if n := rl + len(rs.text()); n > 0 {
			reasoningTokens = g.ntok * rl / n
		}
	}
	rs.usage = map[string]any{
		"input_tokens": len(ids), "input_tokens_details": map[string]int{"cached_tokens": res.CachedTokens},
		"output_tokens": g.ntok, "output_tokens_details": map[string]int{"reasoning_tokens": reasoningTokens},
		"total_tokens": len(ids) + g.ntok,
	}
	stored := (req.Store == nil || *req.Store) && s.responses().on()
	resp := rs.object(rs.output())
	resp["store"] = stored
	if rs.sse == nil {
		// set before the store holds it: GETs read it from then on
		resp["output_text"] = rs.text()
	}
	if stored {
		s.responses().put(rs.id, append(conv, rs.reply()), resp)
	}
	if rs.sse != nil {
		name := "response.completed"
		if rs.status == "incomplete" {
			name = "response.incomplete"
		}
		rs.emit(name, map[string]any{"response": resp})
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// renderChat renders messages with the model's template, the request's
// extra variables and its tools, as handleChat does.
func (b *Backend) renderChat(msgs []chat.Message, extra map[string]any, ts *toolSetup) (string, *apiError) {
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
	text, err := toolcall.Render(tmpl, msgs, opts)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) && ce.Raised {
			return "", badRequest("input", "the model's chat template refused the input: %s", ce.Message)
		}
		return "", &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("rendering the chat template: %v", err)}
	}
	return text, nil
}
