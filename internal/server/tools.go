package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"braid/internal/chat"
	"braid/internal/grammar"
	"braid/internal/toolcall"
)

// toolSetup is a chat request's tools, validated.
type toolSetup struct {
	tools []toolcall.Tool
	raw   []any // the tools as sent, for the template (key order kept)
	// choice is "none", "auto", "required" or "function" (only names it).
	choice   string
	only     string
	parallel bool
	// strict is set when a tool asks for strict arguments: with
	// tool_choice auto, a call the model begins is then held to its
	// schema (formats with a call marker). strictDefaulted says a tool
	// was made strict by the Responses API's default, not by asking.
	strict, strictDefaulted bool
	// params name each tool's fields in the request, for errors.
	params []string
}

// active says whether the model is offered tools and its output parsed
// for calls.
func (t *toolSetup) active() bool { return t != nil && len(t.tools) > 0 && t.choice != "none" }

// forced says whether the output must be calls.
func (t *toolSetup) forced() bool {
	return t.active() && (t.choice == "required" || t.choice == "function")
}

var toolNameRe = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// tools validates tools, tool_choice and parallel_tool_calls: a malformed
// tool, an unknown tool_choice or a choice that names no tool is a 400
// naming the field.
func (q *chatRequest) tools() (*toolSetup, *apiError) {
	if !isNull(q.Functions) || !isNull(q.FunctionCall) {
		return nil, badRequest("functions", "functions and function_call are the deprecated form of tools and tool_choice; send tools")
	}
	ts := &toolSetup{choice: "auto", parallel: true}
	if q.ParallelToolCalls != nil {
		ts.parallel = *q.ParallelToolCalls
	}
	names := map[string]bool{}
	for i, raw := range q.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type     *string  `json:"type"`
			Function *funcDef `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badRequest(param, "%s must be an object {\"type\": \"function\", \"function\": {...}}: %v", param, jsonErr(err))
		}
		if t.Type == nil || *t.Type != "function" {
			got := "none"
			if t.Type != nil {
				got = fmt.Sprintf("%q", *t.Type)
			}
			return nil, badRequest(param+".type", "%s.type must be \"function\", not %s", param, got)
		}
		if t.Function == nil {
			return nil, badRequest(param+".function", "%s.function is required", param)
		}
		if e := ts.addFunction(param+".function", t.Function, raw, names, false); e != nil {
			return nil, e
		}
	}
	if !isNull(q.ToolChoice) {
		if word, ok, e := toolChoiceWord(q.ToolChoice, `{"type": "function", "function": {"name": ...}}`); e != nil {
			return nil, e
		} else if ok {
			ts.choice = word
		} else {
			var c struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(q.ToolChoice, &c); err != nil || c.Type != "function" || c.Function.Name == "" {
				return nil, badRequest("tool_choice", "tool_choice must be none, auto, required, or {\"type\": \"function\", \"function\": {\"name\": ...}}")
			}
			if !names[c.Function.Name] {
				return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not among the tools", c.Function.Name)
			}
			ts.choice, ts.only = "function", c.Function.Name
		}
	}
	if (ts.choice == "required") && len(ts.tools) == 0 {
		return nil, badRequest("tool_choice", "tool_choice required needs tools")
	}
	return ts, nil
}

// funcDef is a function tool's fields: under "function" in a chat
// request, on the tool itself in a Responses one.
type funcDef struct {
	Name        *string         `json:"name"`
	Description json.RawMessage `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      json.RawMessage `json:"strict"`
}

// addFunction validates one function (param is the prefix of its fields'
// names) and adds it; raw is the tool in the chat shape, as templates
// read it. Without a strict field the tool is strict when strictDefault
// is (the Responses API's default).
func (ts *toolSetup) addFunction(param string, f *funcDef, raw json.RawMessage, names map[string]bool, strictDefault bool) *apiError {
	if f.Name == nil || *f.Name == "" {
		return badRequest(param+".name", "%s.name is required", param)
	}
	if !toolNameRe.MatchString(*f.Name) {
		return badRequest(param+".name", "%s.name %q must be 1 to 64 letters, digits, '_', '.' or '-'", param, *f.Name)
	}
	if names[*f.Name] {
		return badRequest(param+".name", "%s.name %q is defined twice", param, *f.Name)
	}
	names[*f.Name] = true
	if !isNull(f.Description) {
		var d string
		if json.Unmarshal(f.Description, &d) != nil {
			return badRequest(param+".description", "%s.description must be a string", param)
		}
	}
	if !isNull(f.Parameters) {
		if t := bytes.TrimSpace(f.Parameters); len(t) == 0 || t[0] != '{' {
			return badRequest(param+".parameters", "%s.parameters must be a JSON Schema object, not %s", param, abbrev(string(t)))
		}
	}
	if !isNull(f.Strict) {
		var b bool
		if json.Unmarshal(f.Strict, &b) != nil {
			return badRequest(param+".strict", "%s.strict must be a boolean", param)
		}
		ts.strict = ts.strict || b
	} else if strictDefault {
		ts.strict, ts.strictDefaulted = true, true
	}
	ts.tools = append(ts.tools, toolcall.Tool{Name: *f.Name, Parameters: f.Parameters})
	ts.raw = append(ts.raw, raw)
	ts.params = append(ts.params, param)
	return nil
}

func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s is %s", strings.TrimPrefix(te.Field, "function."), te.Value)
	}
	return err.Error()
}

func abbrev(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// checkToolMessages checks the calls of assistant messages and the tool
// messages: a call needs a function name and arguments that are JSON.
func checkToolMessages(msgs []chat.Message) *apiError {
	for i, m := range msgs {
		for j, c := range m.ToolCalls {
			param := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
			if c.Function.Name == "" {
				return badRequest(param+".name", "%s.name is required", param)
			}
			switch a := c.Function.Arguments.(type) {
			case string:
				if !json.Valid([]byte(a)) {
					return badRequest(param+".arguments", "%s.arguments must be JSON text: %s", param, abbrev(a))
				}
			case nil, json.RawMessage:
			default:
				return badRequest(param+".arguments", "%s.arguments must be a JSON string or object", param)
			}
		}
		if m.Role == "tool" && m.Content == nil {
			return badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d] (a tool result) needs content", i)
		}
	}
	return nil
}

// toolGuide is the guide of a request whose output must be calls, or
// (tool_choice auto with a response format) either calls or the answer.
func (b *Backend) toolGuide(ts *toolSetup, spec *constraintSpec, opened bool) (*grammar.Guide, *apiError) {
	var key strings.Builder
	fmt.Fprintf(&key, "tools\x00%s\x00%s\x00%v\x00%d\x00%v\x00", ts.choice, ts.only, ts.parallel, b.reasoning, opened)
	for _, t := range ts.raw {
		key.Write(t.(json.RawMessage))
		key.WriteByte(0)
	}
	if spec != nil {
		fmt.Fprintf(&key, "%s\x00%s", spec.kind, spec.text)
	}
	return b.guide(key.String(), true, "tools", func() (*grammar.Grammar, *apiError) {
		bl := grammar.NewBuilder()
		calls, err := toolcall.Calls(bl, toolcall.GrammarSpec{Format: b.tools, Template: b.Template.Source(), Tools: ts.tools, Only: ts.only, Parallel: ts.parallel})
		if err != nil {
			return nil, toolError(ts, err)
		}
		answer := calls
		if spec != nil && !ts.forced() {
			g, e := spec.compile()
			if e != nil {
				return nil, e
			}
			answer = grammar.Alt(calls, bl.Embed(g))
		}
		root := answer
		if b.reasoning == chat.ReasoningThink {
			root = wrapReasoning(bl, b.reasoning, opened, answer)
		}
		bl.Define("root", root)
		g, err := bl.Build("root")
		if err != nil {
			return nil, badRequest("tools", "tools: %v", err)
		}
		return g, nil
	})
}

// lazyGuide is the guide of tool_choice auto with strict tools: free text
// until the model writes the format's call marker, then calls held to the
// schemas. nil when the format has no marker.
func (b *Backend) lazyGuide(ts *toolSetup) (*grammar.Guide, *apiError) {
	if b.tools.Marker() == "" {
		return nil, nil
	}
	var key strings.Builder
	fmt.Fprintf(&key, "lazy\x00%v\x00", ts.parallel)
	for _, t := range ts.raw {
		key.Write(t.(json.RawMessage))
		key.WriteByte(0)
	}
	return b.guide(key.String(), true, "tools", func() (*grammar.Grammar, *apiError) {
		bl := grammar.NewBuilder()
		n, _, err := toolcall.Lazy(bl, toolcall.GrammarSpec{Format: b.tools, Template: b.Template.Source(), Tools: ts.tools, Parallel: ts.parallel})
		if err != nil {
			return nil, toolError(ts, err)
		}
		bl.Define("root", n)
		g, err := bl.Build("root")
		if err != nil {
			return nil, badRequest("tools", "tools: %v", err)
		}
		return g, nil
	})
}

// toolError names the tool whose parameters cannot be enforced.
func toolError(ts *toolSetup, err error) *apiError {
	var te *toolcall.ToolError
	if errors.As(err, &te) {
		for i, t := range ts.tools {
			if t.Name == te.Tool {
				param := ts.params[i] + ".parameters"
				why := ""
				if ts.strictDefaulted && !ts.forced() {
					why = " (in the Responses API a tool is strict unless it says strict: false)"
				}
				return badRequest(param, "%s (function %q): %v; braid enforces the arguments of forced and strict calls while sampling and refuses what it cannot enforce%s", param, t.Name, te.Err, why)
			}
		}
	}
	return badRequest("tool_choice", "tool_choice: %v", err)
}

// outputGuide is the guide that a request's tools and output format call
// for (nil when the output is free): forced calls, calls or the formatted
// answer, strict calls under auto once begun, or the format alone.
// formatParam names the request's format field (response_format,
// text.format).
func (b *Backend) outputGuide(ts *toolSetup, spec *constraintSpec, opened bool, formatParam string) (*grammar.Guide, *apiError) {
	switch {
	case ts.forced() && spec != nil:
		// The format shapes the message's text, and a forced call writes
		// none: OpenAI takes both (an agent sends its output schema with
		// every turn, tool_choice required on the first), and so does
		// braid, the format checked all the same, for the turns after.
		if _, e := spec.compile(); e != nil {
			return nil, e
		}
		return b.toolGuide(ts, nil, opened)
	case ts.forced() || spec != nil && ts.active():
		return b.toolGuide(ts, spec, opened)
	case ts.active() && ts.strict:
		return b.lazyGuide(ts)
	case spec != nil:
		return b.specGuide(spec, true, b.reasoning, opened)
	}
	return nil, nil
}

// toolChoiceWord reads a tool_choice given as a word (none, auto,
// required): ok is false when it is not a string (the endpoint's object
// shape, named in the error as shape, is then its to read).
func toolChoiceWord(raw json.RawMessage, shape string) (word string, ok bool, e *apiError) {
	if json.Unmarshal(raw, &word) != nil {
		return "", false, nil
	}
	switch word {
	case "none", "auto", "required":
		return word, true, nil
	}
	return "", false, badRequest("tool_choice", "tool_choice %q is not one of none, auto, required, or %s", word, shape)
}
