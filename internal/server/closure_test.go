package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"braid/internal/grammar"
)

// minFromRefusal sends body with max_tokens 1 and reads the shortest
// reply's length from the 400 that comes back (the message must name both
// numbers); 1 where the request is answered.
func minFromRefusal(t *testing.T, url, path, body string) int {
	t.Helper()
	ts := &testServer{url: url}
	body = strings.Replace(strings.Replace(body, `"max_tokens":MAX`, `"max_tokens":1`, 1), "SEED", "1", 1)
	code, data := ts.post(t, path, testKey, []byte(body))
	var e struct {
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if code == 200 {
		return 1 // a one-token reply exists (a number, for schema {})
	}
	if code != 400 || json.Unmarshal(data, &e) != nil || e.Error.Param != "max_tokens" || e.Error.Code != "max_tokens_below_structure" {
		t.Fatalf("max_tokens 1: status %d: %s", code, data)
	}
	m := regexp.MustCompile(`max_tokens is 1 but the shortest reply .* takes (\d+) tokens`).FindStringSubmatch(e.Error.Message)
	if m == nil {
		t.Fatalf("the refusal does not name both numbers: %s", e.Error.Message)
	}
	n, _ := strconv.Atoi(m[1])
	if n < 2 {
		t.Fatalf("shortest reply %d tokens, yet max_tokens 1 was refused", n)
	}
	return n
}

// TestClosureSchemas: stories260K sampled hot (noise to JSON) under
// budgets from each schema's minimum up: every reply parses and is valid
// for its schema, finish_reason "length" or "stop", whole and streamed;
// a budget under the minimum is refused up front naming both numbers.
func TestClosureSchemas(t *testing.T) {
	ts := startServer(t, opts{parallel: 4, ctx: 1024})
	forced := 0
	for ci, c := range schemaTable(t) {
		if testing.Short() && ci%3 != 0 {
			continue
		}
		body := fmt.Sprintf(`{"model":"stories","messages":[{"role":"user","content":"Tell me about %s."}],"max_tokens":MAX,"temperature":1.5,"seed":SEED,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":%s}}}`, c.Name, c.Schema)
		min := minFromRefusal(t, ts.url, "/v1/chat/completions", body)
		for i, extra := range []int{0, 1, 4, 15} {
			stream := i%2 == 1
			b := strings.Replace(strings.Replace(body, "MAX", strconv.Itoa(min+extra), 1), "SEED", strconv.Itoa(ci*7+i), 1)
			if !stream {
				code, data := ts.post(t, "/v1/chat/completions", testKey, []byte(b))
				if code != 200 {
					t.Fatalf("%s: status %d: %s", c.Name, code, data)
				}
				var r struct {
					Choices []struct {
						Message      struct{ Content string }
						FinishReason string `json:"finish_reason"`
					}
					Usage struct {
						CompletionTokens int `json:"completion_tokens"`
					}
					Braid *struct {
						ClosureForced bool `json:"closure_forced"`
					}
				}
				if err := json.Unmarshal(data, &r); err != nil {
					t.Fatal(err)
				}
				text, finish := r.Choices[0].Message.Content, r.Choices[0].FinishReason
				if err := grammar.ValidateJSON(c.Schema, []byte(text)); err != nil {
					t.Errorf("%s: max_tokens %d (min %d), finish %s: %q is not valid: %v", c.Name, min+extra, min, finish, text, err)
				}
				if r.Braid != nil && r.Braid.ClosureForced {
					forced++
					if finish != "length" {
						t.Errorf("%s: closure forced, finish_reason %q", c.Name, finish)
					}
				}
				if r.Usage.CompletionTokens > min+extra {
					t.Errorf("%s: %d tokens for max_tokens %d", c.Name, r.Usage.CompletionTokens, min+extra)
				}
				continue
			}
			text, finish := constrainedReply(t, ts, "/v1/chat/completions", b, true)
			if err := grammar.ValidateJSON(c.Schema, []byte(text)); err != nil {
				t.Errorf("%s (streamed): max_tokens %d (min %d), finish %s: %q is not valid: %v", c.Name, min+extra, min, finish, text, err)
			}
		}
	}
	t.Logf("%d whole replies had their closure forced", forced)
	if forced == 0 {
		t.Error("no closure was forced: the budgets test nothing")
	}
}

// TestClosureToolFormats: every tool-call format, a "model" that writes
// uniform noise among the tokens the grammar allows (the script backend
// with nothing to say, sampled at temperature 1), tool_choice required or
// named, whole and streamed, budgets from the minimum up: every reply is
// a parsed call with valid arguments and no content text, finish_reason
// tool_calls or length.
func TestClosureToolFormats(t *testing.T) {
	for _, template := range []string{
		"Qwen-Qwen2.5-7B-Instruct", "Qwen3-Coder", "GLM-4.6", "meta-llama-Llama-3.1-8B-Instruct",
		"Mistral-Small-3.2-24B-Instruct-2506", "mistralai-Mistral-Nemo-Instruct-2407",
		"openai-gpt-oss-120b", "deepseek-ai-DeepSeek-V3.1", "llama-cpp-deepseek-r1",
	} {
		ss := startScriptedLong(t, template)
		cut := 0
		tools := `"tools":[` + weatherTool + `,` + timeTool + `]`
		for ci, choice := range []string{`"required"`, `{"type":"function","function":{"name":"get_weather"}}`} {
			only := ""
			if ci == 1 {
				only = "get_weather"
			}
			body := `{"model":"m","messages":[{"role":"user","content":"Weather?"}],` + tools + `,"tool_choice":` + choice + `,"max_tokens":MAX,"temperature":1,"seed":SEED}`
			min := minFromRefusal(t, ss.url, "/v1/chat/completions", body)
			for i, extra := range []int{0, 2, 9, 30} {
				stream := i%2 == 1
				b := strings.Replace(strings.Replace(body, "MAX", strconv.Itoa(min+extra), 1), "SEED", strconv.Itoa(i+10*ci), 1)
				r := toolChat(t, ss.url, b, stream)
				what := fmt.Sprintf("%s (tool_choice %s, max_tokens %d, min %d, stream %v)", template, choice, min+extra, min, stream)
				if r.finish != "tool_calls" && r.finish != "length" || len(r.calls) == 0 || strings.TrimSpace(r.content) != "" {
					t.Errorf("%s: finish %q, %d calls, content %q", what, r.finish, len(r.calls), r.content)
					continue
				}
				if r.finish == "length" {
					cut++
				}
				if i == 0 && ci == 0 {
					t.Logf("%s: %d calls, first %s %s", what, len(r.calls), r.calls[0].Function.Name, *r.calls[0].Function.Arguments)
				}
				for _, c := range r.calls {
					schema, ok := toolSchemas[c.Function.Name]
					if !ok || only != "" && c.Function.Name != only {
						t.Errorf("%s: call %+v", what, c)
						continue
					}
					if err := grammar.ValidateJSON([]byte(schema), []byte(*c.Function.Arguments)); err != nil {
						t.Errorf("%s: arguments %s: %v", what, *c.Function.Arguments, err)
					}
				}
			}
		}
		// The noise fills strings and arrays until the budget closes
		// them: most replies are cut.
		if cut == 0 {
			t.Errorf("%s: no reply was cut by its budget; the test tests nothing", template)
		}
	}
}
