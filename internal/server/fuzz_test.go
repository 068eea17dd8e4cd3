package server

import (
	"slices"
	"testing"
	"unicode/utf8"

	"braid/internal/toolcall"
)

// FuzzParseRequest drives the request parsing and validation of both
// completion endpoints (with the chat template variables and the reasoning
// switch): any body must give a request or a 400-class error,
// never a panic.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stop":["a","b"],"temperature":0.5}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"logprobs":true,"top_logprobs":2}`,
		`{"model":"m","prompt":[1,2,3],"stop":"x","n":1,"seed":-4}`,
		`{"model":"m","prompt":["one"],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","prompt":[[1,2]],"top_p":0}`,
		`{"messages":[{"role":"tool","content":null}],"max_completion_tokens":-3}`,
		`{"model":"m","messages":[],"reasoning_effort":"high","reasoning_format":"none","chat_template_kwargs":{"enable_thinking":false}}`,
		`{"reasoning_effort":"max","chat_template_kwargs":{"reasoning_effort":1,"messages":null}}`,
		`[1]`, `{"max_tokens":"x"}`, "{\"prompt\":\"\xff\"}", `{"temperature":1e400}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"a":{"type":"integer","maximum":3}},"required":["a"]}}}}`,
		`{"model":"m","prompt":"x","grammar":"root ::= [a-z]+ \"!\"","response_format":{"type":"json_object"}}`,
		`{"model":"m","prompt":"x","json_schema":{"enum":[1,"a"]},"response_format":{"type":"text"}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
		`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}},{"type":"x"}],"tool_choice":"required","functions":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c chatRequest
		if e := parseJSON(body, &c); e == nil {
			if _, _, e := c.params(nil, func() uint64 { return 1 }); e != nil && e.Status != 400 {
				t.Fatalf("params: status %d", e.Status)
			}
			if vars, e := c.templateVars(); e != nil && e.Status != 400 {
				t.Fatalf("templateVars: status %d", e.Status)
			} else if e == nil && c.ReasoningEffort != nil && vars["reasoning_effort"] != *c.ReasoningEffort {
				t.Fatalf("reasoning_effort %q not passed on: %v", *c.ReasoningEffort, vars["reasoning_effort"])
			}
			if _, e := c.splitReasoning(); e != nil && e.Status != 400 {
				t.Fatalf("splitReasoning: status %d", e.Status)
			}
			if spec, e := c.outputConstraint(); e != nil && e.Status != 400 {
				t.Fatalf("outputConstraint: status %d", e.Status)
			} else if spec != nil && len(spec.text) < 2000 {
				if _, e := spec.compile(); e != nil && (e.Status != 400 || e.Param == "") {
					t.Fatalf("compile: status %d, param %q", e.Status, e.Param)
				}
			}
			if ts, e := c.tools(); e != nil && (e.Status != 400 || e.Param == "") {
				t.Fatalf("tools: status %d, param %q", e.Status, e.Param)
			} else if e == nil && ts.choice == "function" && !slices.ContainsFunc(ts.tools, func(t toolcall.Tool) bool { return t.Name == ts.only }) {
				t.Fatalf("tool_choice names %q, not among the tools", ts.only)
			}
			if e := checkToolMessages(c.Messages); e != nil && (e.Status != 400 || e.Param == "") {
				t.Fatalf("checkToolMessages: status %d, param %q", e.Status, e.Param)
			}
			if e := checkMessages(c.Messages); e == nil {
				for _, m := range c.Messages {
					if _, ok := m.Content.(string); !ok && m.Content != nil {
						t.Fatalf("content left as %T after checkMessages", m.Content)
					}
				}
			}
		} else if e.Status != 400 || e.Message == "" {
			t.Fatalf("parse error without a 400 and a message: %+v", e)
		} else if !utf8.ValidString(e.Message) {
			t.Fatalf("error message is not UTF-8: %q", e.Message)
		}
		var p completionRequest
		if e := parseJSON(body, &p); e == nil {
			p.params(nil, func() uint64 { return 1 })
			text, ids, e := parsePrompt(p.Prompt)
			if e == nil && text == "" && ids == nil && len(p.Prompt) == 0 {
				t.Fatal("empty prompt accepted")
			}
		}
	})
}
