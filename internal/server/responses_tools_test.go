package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"braid/internal/grammar"
)

// The tools of tools_test.go in the Responses shape.
var (
	weatherToolR = `{"type":"function","name":"get_weather","description":"Weather in a city","parameters":` + toolSchemas["get_weather"] + `}`
	timeToolR    = `{"type":"function","name":"get_time","parameters":` + toolSchemas["get_time"] + `}`
)

// functionCalls are a response's function_call items, checked for their
// shape: ids, call ids, a known tool, arguments valid for its schema.
func functionCalls(t *testing.T, what string, r map[string]any) []map[string]any {
	t.Helper()
	var calls []map[string]any
	for _, it := range r["output"].([]any) {
		im := it.(map[string]any)
		if im["type"] != "function_call" {
			continue
		}
		schema, ok := toolSchemas[fmt.Sprint(im["name"])]
		id, _ := im["id"].(string)
		callID, _ := im["call_id"].(string)
		if !ok || !strings.HasPrefix(id, "fc_") || !strings.HasPrefix(callID, "call_") || im["status"] != "completed" {
			t.Fatalf("%s: function call %v", what, im)
		}
		if err := grammar.ValidateJSON([]byte(schema), []byte(im["arguments"].(string))); err != nil {
			t.Fatalf("%s: arguments %v of %v: %v", what, im["arguments"], im["name"], err)
		}
		calls = append(calls, im)
	}
	return calls
}

// TestResponsesTools: stories260K (the Hermes-style fallback) made to call
// tools through /v1/responses with tool_choice required or a named
// function, whole and streamed: function_call items with arguments valid
// for their schemas, the stream's events in the SDKs' order; then the
// results go back, as input items or by previous_response_id, and the
// prompt is the chat endpoint's for the same conversation.
func TestResponsesTools(t *testing.T) {
	es := startExtra(t, 2, 1024)
	tools := `"tools":[` + weatherToolR + `,` + timeToolR + `]`
	var last map[string]any
	for i := range 6 {
		stream := i%2 == 1
		choice, only := `"required"`, ""
		if i%4 >= 2 {
			choice, only = `{"type":"function","name":"get_time"}`, "get_time"
		}
		parallel := ""
		if i >= 4 {
			parallel = `,"parallel_tool_calls":false`
		}
		body := fmt.Sprintf(`{"model":"stories","input":"What's the weather in Paris?",%s,"tool_choice":%s%s,"max_output_tokens":300,"temperature":1,"seed":%d`, tools, choice, parallel, i)
		what := fmt.Sprintf("request %d (stream %v)", i, stream)
		var r map[string]any
		if stream {
			final, text, _ := checkResponseEvents(t, es.responseStream(t, body+`,"stream":true}`))
			r = final
			if text != "" {
				t.Errorf("%s: text %q beside forced calls", what, text)
			}
		} else {
			var code int
			code, r = es.call(t, "POST", "/v1/responses", body+`}`)
			if code != 200 {
				t.Fatalf("%s: %d %v", what, code, r)
			}
		}
		if r["status"] == "incomplete" {
			continue // cut by max_output_tokens
		}
		calls := functionCalls(t, what, r)
		if len(calls) == 0 || r["status"] != "completed" || len(r["output"].([]any)) != len(calls) {
			t.Fatalf("%s: output %v", what, r["output"])
		}
		for _, c := range calls {
			if only != "" && c["name"] != only {
				t.Errorf("%s: called %v, tool_choice named %s", what, c["name"], only)
			}
		}
		if parallel != "" && len(calls) != 1 {
			t.Errorf("%s: %d calls with parallel_tool_calls false", what, len(calls))
		}
		if r["parallel_tool_calls"] != (parallel == "") || len(r["tools"].([]any)) != 2 {
			t.Errorf("%s: echoed parallel_tool_calls %v, tools %v", what, r["parallel_tool_calls"], r["tools"])
		}
		code, got := es.call(t, "GET", "/v1/responses/"+r["id"].(string), "")
		if code != 200 || len(functionCalls(t, what+" (stored)", got)) != len(calls) {
			t.Errorf("%s: GET stored %d %v", what, code, got)
		}
		last = r
	}
	if last == nil {
		t.Fatal("no request ended in calls")
	}

	// The round trip, three ways: the whole conversation as input items,
	// the results after previous_response_id, and the chat endpoint.
	calls := functionCalls(t, "last", last)
	items := []any{map[string]any{"role": "user", "content": "What's the weather in Paris?"}}
	var results []any
	var chatCalls []any
	msgs := []any{map[string]any{"role": "user", "content": "What's the weather in Paris?"}}
	for _, c := range calls {
		items = append(items, map[string]any{"type": "function_call", "call_id": c["call_id"], "name": c["name"], "arguments": c["arguments"]})
		chatCalls = append(chatCalls, map[string]any{"id": c["call_id"], "type": "function", "function": map[string]any{"name": c["name"], "arguments": c["arguments"]}})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": chatCalls})
	for _, c := range calls {
		results = append(results, map[string]any{"type": "function_call_output", "call_id": c["call_id"], "output": `{"temperature": 15}`})
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c["call_id"], "content": `{"temperature": 15}`})
	}
	itemsJ, _ := json.Marshal(append(items, results...))
	resultsJ, _ := json.Marshal(results)
	msgsJ, _ := json.Marshal(msgs)
	chatTools := `"tools":[` + weatherTool + `,` + timeTool + `]`
	_, whole := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":`+string(itemsJ)+`,`+tools+`,"max_output_tokens":20,"temperature":0}`)
	_, cont := es.call(t, "POST", "/v1/responses", `{"model":"stories","previous_response_id":"`+last["id"].(string)+`","input":`+string(resultsJ)+`,`+tools+`,"max_output_tokens":20,"temperature":0}`)
	_, chatR := es.call(t, "POST", "/v1/chat/completions", `{"model":"stories","messages":`+string(msgsJ)+`,`+chatTools+`,"max_tokens":20,"temperature":0}`)
	cu, _ := chatR["usage"].(map[string]any)
	wu, _ := whole["usage"].(map[string]any)
	ku, _ := cont["usage"].(map[string]any)
	if cu == nil || wu == nil || ku == nil || wu["input_tokens"] != cu["prompt_tokens"] || ku["input_tokens"] != cu["prompt_tokens"] {
		t.Fatalf("round trip prompts differ: items %v, continued %v, chat %v", wu, ku, cu)
	}
	if whole["output_text"] != cont["output_text"] {
		t.Errorf("the same conversation answered %q and %q", whole["output_text"], cont["output_text"])
	}
	// tool_choice none: the tools are not offered, no call is read
	_, none := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":"Hi",`+tools+`,"tool_choice":"none","max_output_tokens":10,"temperature":0}`)
	if calls := functionCalls(t, "none", none); len(calls) != 0 || none["tool_choice"] != "none" {
		t.Errorf("tool_choice none: %v", none)
	}

	multiple := `{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}}`
	for _, c := range []struct{ body, param, want string }{
		{`"tools":[{"type":"web_search"}]`, "tools[0].type", `"web_search" is not supported`},
		{`"tools":[{"name":"f"}]`, "tools[0].type", "is required"},
		{`"tools":[` + weatherTool + `]`, "tools[0].function", "chat completions' shape"},
		{`"tools":[{"type":"function","description":"x"}]`, "tools[0].name", "is required"},
		{`"tools":[{"type":"function","name":"a b"}]`, "tools[0].name", "letters, digits"},
		{`"tools":[{"type":"function","name":"f","parameters":[1]}]`, "tools[0].parameters", "JSON Schema object"},
		{`"tools":[{"type":"function","name":"f","strict":"yes"}]`, "tools[0].strict", "boolean"},
		{`"tools":[` + timeToolR + `,` + timeToolR + `]`, "tools[1].name", "defined twice"},
		{`"tools":[` + timeToolR + `],"tool_choice":"always"`, "tool_choice", `"always" is not one of`},
		{`"tools":[` + timeToolR + `],"tool_choice":{"type":"function","name":"nope"}`, "tool_choice", `"nope", which is not among`},
		{`"tools":[` + timeToolR + `],"tool_choice":{"type":"file_search"}`, "tool_choice", `"file_search" is not supported`},
		{`"tool_choice":"required"`, "tool_choice", "needs tools"},
		// strict is the Responses default: a schema braid cannot enforce
		// is refused under auto, and says how to offer it unenforced
		{`"tools":[` + multiple + `]`, "tools[0].parameters", "strict: false"},
		{`"tools":[` + timeToolR + `],"tool_choice":"required","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"number","multipleOf":2}}}`, "text.format.schema", `"multipleOf"`},
		{`"include":["message.output_text.logprobs"]`, "include", "not supported"},
		{`"include":"reasoning.encrypted_content"`, "include", "list of strings"},
		{`"conversation":"conv_1"`, "conversation", "previous_response_id"},
		{`"max_tool_calls":2`, "max_tool_calls", "parallel_tool_calls"},
	} {
		body := `{"model":"stories","input":"Hi","max_output_tokens":4,` + c.body + `}`
		code, v := es.call(t, "POST", "/v1/responses", body)
		wantError(t, body, code, v, 400, c.param, c.want)
	}
	// a schema braid cannot enforce is fine with strict false under auto
	loose := strings.Replace(multiple, `"name":"f"`, `"name":"f","strict":false`, 1)
	if code, v := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":"Hi","max_output_tokens":4,"tools":[`+loose+`]}`); code != 200 {
		t.Errorf("strict false: %d %v", code, v)
	}
	for _, c := range []struct{ input, param, want string }{
		{`[{"type":"function_call","name":"f","arguments":"{}"}]`, "input[0].call_id", "is required"},
		{`[{"type":"function_call","call_id":"c","arguments":"{}"}]`, "input[0].name", "is required"},
		{`[{"type":"function_call","call_id":"c","name":"f"}]`, "input[0].arguments", "is required"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"{oops"}]`, "input[0].arguments", "must be JSON"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]`, "input[1].call_id", "its own"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c"}]`, "input[1].output", "is required"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"d","output":"x"}]`, "input[1].call_id", `"d" answers no function_call`},
		{`[{"type":"function_call_output","output":"x"}]`, "input[0].call_id", "is required"},
	} {
		body := `{"model":"stories","input":` + c.input + `,"max_output_tokens":4}`
		code, v := es.call(t, "POST", "/v1/responses", body)
		wantError(t, body, code, v, 400, c.param, c.want)
	}
}

// TestResponsesToolsScripted: a model with a real template (Qwen2.5's
// Hermes calls) that writes text and then calls under tool_choice auto
// gets a message item and function_call items in the order written,
// whole and streamed; parallel_tool_calls false keeps the first call;
// a strict tool's call (the Responses default) is held to its schema.
func TestResponsesToolsScripted(t *testing.T) {
	ss := startScriptedLong(t, "Qwen-Qwen2.5-7B-Instruct")
	es := &extraServer{testServer: &testServer{url: ss.url}}
	call := func(zone string) string {
		return "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"" + zone + "\"}}\n</tool_call>"
	}
	loose := strings.Replace(timeToolR, `"name":"get_time"`, `"name":"get_time","strict":false`, 1)
	ss.say("Let me look.\n" + call("UTC") + "\n" + call("CET"))
	for _, stream := range []bool{false, true} {
		for _, parallel := range []bool{true, false} {
			what := fmt.Sprintf("stream %v, parallel %v", stream, parallel)
			body := fmt.Sprintf(`{"model":"m","input":"Time?","tools":[%s],"parallel_tool_calls":%v,"temperature":0`, loose, parallel)
			var r map[string]any
			if stream {
				var text string
				r, text, _ = checkResponseEvents(t, es.responseStream(t, body+`,"stream":true}`))
				if text != "Let me look.\n" {
					t.Errorf("%s: streamed text %q", what, text)
				}
			} else {
				_, r = es.call(t, "POST", "/v1/responses", body+`}`)
				if r["output_text"] != "Let me look.\n" {
					t.Errorf("%s: output_text %q", what, r["output_text"])
				}
			}
			out := r["output"].([]any)
			want := 3
			if !parallel {
				want = 2
			}
			if len(out) != want || out[0].(map[string]any)["type"] != "message" {
				t.Fatalf("%s: output %v", what, out)
			}
			calls := functionCalls(t, what, r)
			if len(calls) != want-1 || calls[0]["arguments"] != `{"zone": "UTC"}` && calls[0]["arguments"] != `{"zone":"UTC"}` {
				t.Errorf("%s: calls %v", what, calls)
			}
			if len(calls) == 2 && calls[0]["call_id"] == calls[1]["call_id"] {
				t.Errorf("%s: two calls share call_id %v", what, calls[0]["call_id"])
			}
			if r["status"] != "completed" {
				t.Errorf("%s: status %v", what, r["status"])
			}
		}
	}
	// the chat endpoint keeps the first call too
	for _, stream := range []bool{false, true} {
		r := toolChat(t, ss.url, `{"model":"m","messages":[{"role":"user","content":"Time?"}],"tools":[`+timeTool+`],"parallel_tool_calls":false,"temperature":0}`, stream)
		if len(r.calls) != 1 || r.finish != "tool_calls" {
			t.Errorf("chat, parallel_tool_calls false (stream %v): %+v", stream, r)
		}
	}
	// strict by default: the call the model begins is held to the schema
	// (PST is not among the zones)
	ss.say(call("PST"))
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","input":"Time?","tools":[` + timeToolR + `],"temperature":0`
		var r map[string]any
		if stream {
			r, _, _ = checkResponseEvents(t, es.responseStream(t, body+`,"stream":true}`))
		} else {
			_, r = es.call(t, "POST", "/v1/responses", body+`}`)
		}
		if calls := functionCalls(t, fmt.Sprintf("strict (stream %v)", stream), r); len(calls) != 1 {
			t.Errorf("strict (stream %v): output %v", stream, r["output"])
		}
	}
	// the call and its result, continued: the template shows both
	ss.say(call("UTC"))
	_, r := es.call(t, "POST", "/v1/responses", `{"model":"m","input":"Time?","tools":[`+loose+`],"temperature":0}`)
	id := r["id"].(string)
	callID := functionCalls(t, "first turn", r)[0]["call_id"].(string)
	ss.say("It is noon.")
	code, r2 := es.call(t, "POST", "/v1/responses", `{"model":"m","previous_response_id":"`+id+`","input":[{"type":"function_call_output","call_id":"`+callID+`","output":"12:00"}],"tools":[`+loose+`],"temperature":0}`)
	if code != 200 || r2["output_text"] != "It is noon." {
		t.Fatalf("second turn: %d %v", code, r2)
	}
	p := ss.prompt()
	if !strings.Contains(p, `"zone": "UTC"`) && !strings.Contains(p, `"zone":"UTC"`) || !strings.Contains(p, "<tool_response>\n12:00\n</tool_response>") {
		t.Errorf("the continued prompt lacks the call or its result:\n%s", p)
	}
}
