// Package chat renders a model's chat template (Jinja, as found in GGUF
// tokenizer.chat_template) into the prompt text the model was trained on.
//
// The aim is byte-identical output to Hugging Face transformers'
// apply_chat_template (Python jinja2 with trim_blocks and lstrip_blocks, its
// tojson, raise_exception and strftime_now). The engine is
// github.com/ardanlabs/jinja; this package supplies what it lacks for that:
// a Python-exact tojson, a strftime_now on a caller-supplied clock, JSON
// input that keeps object key order, Python str() printing of {{ }} output,
// jinja2's newline handling, errors that name the template and line, a
// bound on macro recursion, and recovery from engine panics. Some of it is
// done by rewriting the template source before the engine compiles it
// (rewrite.go); line numbers are kept.
//
// Known differences from Python jinja2, all inside the engine: '+' is
// lenient (str + Undefined and str + dict concatenate where Python raises),
// there is no Markup type (so "x"|safe + str does not HTML-escape the str as
// jinja2 does), '~' and |string print None as "" and floats with %g, the
// {%+ / +%} whitespace marks are syntax errors, and exponent literals such
// as 1e16 are not parsed.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// NowVar is the Render variable that sets the clock of strftime_now (a
// time.Time); without it strftime_now reads time.Now. It is not visible to
// the template.
const NowVar = "__braid_now"

// Message is one chat message, with the JSON field names of OpenAI's chat
// completions API so a request body decodes straight into it.
type Message struct {
	// Role is "system", "user", "assistant", "tool" or anything else the
	// template knows.
	Role string `json:"role"`
	// Content is a string, nil (JSON null), or the list of parts OpenAI
	// sends ([{"type":"text","text":...}, ...]). Decoding from JSON keeps
	// non-string content as json.RawMessage so key order survives.
	Content any `json:"content"`
	// Name is the optional participant or tool name.
	Name string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a "tool" message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ReasoningContent is the thinking text of an assistant message
	// (DeepSeek/Qwen "reasoning_content").
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// ToolCall is one function call made by the assistant.
type ToolCall struct {
	// ID is the call id that the tool message's ToolCallID refers to.
	ID string `json:"id,omitempty"`
	// Type is "function" for OpenAI-style calls.
	Type string `json:"type,omitempty"`
	// Function names the function and holds its arguments.
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a ToolCall.
type FunctionCall struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is what the template receives as function.arguments:
	// OpenAI sends a JSON string, while most Hugging Face templates expect
	// a dict (a map, or json.RawMessage holding an object, which keeps key
	// order) and fail on a string. Decoding from JSON keeps a string as a
	// string and anything else as json.RawMessage.
	Arguments any `json:"arguments"`
}

// UnmarshalJSON keeps a non-string content as json.RawMessage, so parts
// keep their key order when a template prints them.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message
	var aux struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*m = Message(aux.plain)
	m.Content = rawToAny(aux.Content)
	return nil
}

// UnmarshalJSON keeps object arguments as json.RawMessage (key order
// matters when a template prints them with tojson).
func (f *FunctionCall) UnmarshalJSON(data []byte) error {
	var aux struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	f.Name = aux.Name
	f.Arguments = rawToAny(aux.Arguments)
	return nil
}

func rawToAny(raw json.RawMessage) any {
	s := strings.TrimSpace(string(raw))
	switch {
	case s == "" || s == "null":
		return nil
	case s[0] == '"':
		var str string
		if json.Unmarshal(raw, &str) == nil {
			return str
		}
	}
	return json.RawMessage(s)
}

// value builds the dict a template sees. Optional fields are left out when
// empty because templates test them with "is defined" / "in message".
func (m *Message) value() (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", jinja.NewString(m.Role))
	content, err := toValue(m.Content)
	if err != nil {
		return jinja.Undefined(), err
	}
	dict.Set("content", content)
	if m.Name != "" {
		dict.Set("name", jinja.NewString(m.Name))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i := range m.ToolCalls {
			if calls[i], err = m.ToolCalls[i].value(); err != nil {
				return jinja.Undefined(), err
			}
		}
		dict.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.ReasoningContent != "" {
		dict.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	return d, nil
}

func (c *ToolCall) value() (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	if c.ID != "" {
		dict.Set("id", jinja.NewString(c.ID))
	}
	if c.Type != "" {
		dict.Set("type", jinja.NewString(c.Type))
	}
	fn := jinja.NewDict()
	fn.AsDict().Set("name", jinja.NewString(c.Function.Name))
	args, err := toValue(c.Function.Arguments)
	if err != nil {
		return jinja.Undefined(), err
	}
	fn.AsDict().Set("arguments", args)
	dict.Set("function", fn)
	return d, nil
}

// Options are the variables of a chat render besides the messages.
type Options struct {
	// AddGenerationPrompt ends the prompt with the assistant's turn header.
	AddGenerationPrompt bool
	// Tools is the OpenAI tools list; nil leaves the template variable
	// undefined (as llama.cpp does), which templates treat as "no tools".
	// Pass json.RawMessage elements to keep the schemas' key order.
	Tools []any
	// BOS and EOS are the model's bos_token and eos_token strings.
	BOS, EOS string
	// Extra variables (e.g. enable_thinking); they override the others.
	Extra map[string]any
	// Now is the clock of strftime_now, date_string and datetime; zero
	// means time.Now.
	Now time.Time
}

// Template is a parsed chat template; it is safe for concurrent renders.
type Template struct {
	name string
	src  string
	tmpl *jinja.Template
}

// Error is a template failure: a syntax error, a raise_exception call, or
// an evaluation error.
type Error struct {
	// Template is the name given to Parse.
	Template string
	// Line is the 1-based source line, 0 when unknown.
	Line int
	// Message is the engine's message, or raise_exception's argument.
	Message string
	// Raised is true when the template itself called raise_exception;
	// typically the request was unsuitable (roles out of order, missing
	// tool arguments), not the server.
	Raised bool
}

// Error formats as "chat template NAME:LINE: MESSAGE".
func (e *Error) Error() string {
	loc := e.Template
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Raised {
		return fmt.Sprintf("chat template %s: raise_exception: %s", loc, e.Message)
	}
	return fmt.Sprintf("chat template %s: %s", loc, e.Message)
}

// raised carries raise_exception's message through the engine, which
// returns a callable's error unchanged.
type raised struct{ msg string }

func (r *raised) Error() string { return r.msg }

var lineRe = regexp.MustCompile(`\bline (\d+)`)

// Parse compiles a template. name identifies it in errors (a model or file
// name). A syntax error is an *Error with the line when it can be found.
func Parse(name, source string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &Error{Template: name, Message: fmt.Sprintf("engine panic while parsing: %v", r)}
		}
	}()
	tmpl, err := jinja.Compile(rewriteSource(normalizeNewlines(source)))
	if err != nil {
		return nil, syntaxError(name, source, err)
	}
	return &Template{name: name, src: source, tmpl: tmpl}, nil
}

// normalizeNewlines does what jinja2's lexer does to a source before
// anything else: \r\n and \r become \n, and one trailing newline is dropped
// (keep_trailing_newline=False, as in transformers). The engine does
// neither.
func normalizeNewlines(src string) string {
	if strings.Contains(src, "\r") {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func syntaxError(name, source string, err error) *Error {
	msg := err.Error()
	for _, p := range []string{"jinja scan: ", "jinja parse: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	msg = strings.ReplaceAll(msg, toJSONFilter, "tojson")
	e := &Error{Template: name, Message: msg}
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Message = strings.TrimPrefix(msg, m[0]+": ")
	} else {
		e.Line = unclosedBlockLine(source)
	}
	return e
}

// Name returns the name given to Parse.
func (t *Template) Name() string { return t.name }

// Source returns the template source given to Parse.
func (t *Template) Source() string { return t.src }

// Render renders the template with raw variables: messages,
// add_generation_prompt, tools, bos_token, eos_token and whatever else the
// template reads; NowVar sets the strftime_now clock. Values may be plain Go
// values, json.RawMessage (key order kept), Message and ToolCall. Errors are
// *Error.
func (t *Template) Render(vars map[string]any) (string, error) {
	vals := make(map[string]jinja.Value, len(vars)+3)
	now := time.Now
	for k, v := range vars {
		if k == NowVar {
			tm, ok := v.(time.Time)
			if !ok {
				return "", &Error{Template: t.name, Message: fmt.Sprintf("%s must be a time.Time, not %T", NowVar, v)}
			}
			now = func() time.Time { return tm }
			continue
		}
		jv, err := toValue(v)
		if err != nil {
			return "", &Error{Template: t.name, Message: fmt.Sprintf("variable %s: %v", k, err)}
		}
		vals[k] = jv
	}
	return t.render(vals, now)
}

// RenderChat renders messages the way llama.cpp and Hugging Face do for a
// chat completion request. Besides the Options it sets date_string
// ("26 Nov 2026") and datetime ("Nov 26 2026") from the clock, as llama.cpp
// does; Llama 3.x templates print date_string.
func (t *Template) RenderChat(msgs []Message, opts Options) (string, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars := map[string]any{
		"messages":              msgs,
		"add_generation_prompt": opts.AddGenerationPrompt,
		"bos_token":             opts.BOS,
		"eos_token":             opts.EOS,
		"date_string":           strftime("%d %b %Y", now),
		"datetime":              strftime("%b %d %Y", now),
	}
	if opts.Tools != nil {
		vars["tools"] = opts.Tools
	}
	for k, v := range opts.Extra {
		vars[k] = v
	}
	vars[NowVar] = now
	return t.Render(vars)
}

func (t *Template) render(vals map[string]jinja.Value, now func() time.Time) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Template: t.name, Message: fmt.Sprintf("engine panic while rendering: %v", r)}
		}
	}()
	vals["strftime_now"] = strftimeNow(now)
	vals["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	vals[toJSONFilter] = jinja.NewCallable("tojson", filterToJSON)
	vals[printFunc] = jinja.NewCallable("print", printOutput)
	depth := 0
	vals[enterMacro] = jinja.NewCallable("macro", func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		if depth++; depth > maxMacroDepth {
			return jinja.Undefined(), fmt.Errorf("macro recursion deeper than %d", maxMacroDepth)
		}
		return jinja.None(), nil
	})
	vals[exitMacro] = jinja.NewCallable("macro", func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		depth--
		return jinja.None(), nil
	})
	out, err = t.tmpl.RenderValues(vals)
	if err != nil {
		return "", t.renderError(err)
	}
	return out, nil
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), &raised{msg: "raise_exception called without a message"}
	}
	msg := args[0].String()
	if args[0].IsString() {
		msg = args[0].AsString()
	}
	return jinja.Undefined(), &raised{msg: msg}
}

func (t *Template) renderError(err error) *Error {
	var r *raised
	if errors.As(err, &r) {
		return &Error{Template: t.name, Line: raiseLine(t.src, r.msg), Message: r.msg, Raised: true}
	}
	msg := strings.ReplaceAll(err.Error(), toJSONFilter, "tojson")
	e := &Error{Template: t.name, Message: msg}
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
	}
	return e
}

// raiseLine guesses where a raise_exception came from, since the engine
// keeps no positions at run time: the line holding the message text, or
// the only raise_exception call; 0 when ambiguous.
func raiseLine(src, msg string) int {
	lines := strings.Split(src, "\n")
	find := func(pred func(string) bool) int {
		found := 0
		for i, l := range lines {
			if pred(l) {
				if found != 0 {
					return -1
				}
				found = i + 1
			}
		}
		return found
	}
	if msg != "" {
		if n := find(func(l string) bool { return strings.Contains(l, msg) }); n > 0 {
			return n
		}
	}
	if n := find(func(l string) bool { return strings.Contains(l, "raise_exception(") }); n > 0 {
		return n
	}
	return 0
}

var blockTag = regexp.MustCompile(`\{%[-+]?\s*(\w+)([^%]*)`)

// unclosedBlockLine finds the innermost block still open at the end of the
// source, for the engine's "unclosed ... block" errors that carry no line.
func unclosedBlockLine(src string) int {
	openers := map[string]bool{"if": true, "for": true, "macro": true, "call": true, "filter": true, "generation": true, "raw": true, "set": true}
	type open struct {
		kw   string
		line int
	}
	var stack []open
	for _, m := range blockTag.FindAllStringSubmatchIndex(src, -1) {
		kw := src[m[2]:m[3]]
		rest := src[m[4]:m[5]]
		line := strings.Count(src[:m[0]], "\n") + 1
		switch {
		case kw == "set" && strings.Contains(rest, "="):
			// An inline set has no end tag.
		case openers[kw]:
			stack = append(stack, open{kw, line})
		case strings.HasPrefix(kw, "end"):
			if len(stack) > 0 && stack[len(stack)-1].kw == kw[3:] {
				stack = stack[:len(stack)-1]
			} else {
				return line
			}
		}
	}
	if len(stack) > 0 {
		return stack[len(stack)-1].line
	}
	return 0
}

// chatML is the fallback for models without a template: ChatML as
// llama.cpp's "chatml" writes it, accepting list-of-parts content too.
const chatML = `{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' -}}
{%- if message['content'] is string -%}
{{- message['content'] -}}
{%- elif message['content'] is iterable -%}
{%- for part in message['content'] -%}
{%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}`

var chatMLTemplate = func() *Template {
	t, err := Parse("chatml", chatML)
	if err != nil {
		panic(err)
	}
	return t
}()

// ChatML returns the fallback template for models without one.
func ChatML() *Template { return chatMLTemplate }

// RenderContextFile renders a template file with the variables of a JSON
// object file, as `braid template --template F.jinja --context F.json`
// does: the JSON keeps its key order (tojson of tool schemas prints them as
// written) and ints stay ints, as with Python's json.load; strftime_now
// reads now (zero means time.Now).
func RenderContextFile(templatePath, contextJSONPath string, now time.Time) (string, error) {
	src, err := os.ReadFile(templatePath)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(contextJSONPath)
	if err != nil {
		return "", err
	}
	t, err := Parse(filepath.Base(templatePath), string(src))
	if err != nil {
		return "", err
	}
	vals, err := contextVars(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", contextJSONPath, err)
	}
	if now.IsZero() {
		now = time.Now()
	}
	return t.render(vals, func() time.Time { return now })
}

// contextVars decodes a JSON object into render variables.
func contextVars(data []byte) (map[string]jinja.Value, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	if !v.IsDict() {
		return nil, errors.New("context must be a JSON object")
	}
	d := v.AsDict()
	vals := make(map[string]jinja.Value, d.Len()+3)
	for _, k := range d.OrderedKeys() {
		vals[k], _ = d.Get(k)
	}
	return vals, nil
}
