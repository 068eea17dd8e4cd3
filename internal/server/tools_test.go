package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"braid/internal/chat"
	"braid/internal/engine"
	"braid/internal/grammar"
	"braid/internal/kvcache"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
	"braid/internal/toolcall"
)

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":20},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit"],"additionalProperties":false}}}`
const timeTool = `{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string","enum":["UTC","CET"]}},"required":["zone"],"additionalProperties":false}}}`

var toolSchemas = map[string]string{
	"get_weather": `{"type":"object","properties":{"city":{"type":"string","maxLength":20},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit"],"additionalProperties":false}`,
	"get_time":    `{"type":"object","properties":{"zone":{"type":"string","enum":["UTC","CET"]}},"required":["zone"],"additionalProperties":false}`,
}

type toolReply struct {
	Choices []struct {
		Message *struct {
			Content   *string        `json:"content"`
			ToolCalls []toolCallJSON `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content   *string        `json:"content"`
			ToolCalls []toolCallJSON `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

type toolCallJSON struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

type toolResult struct {
	content string
	null    bool // content was null (whole replies)
	calls   []toolCallJSON
	finish  string
}

// toolChat sends a chat request whole or streamed and gathers the reply;
// streamed tool calls are put together from their deltas as a client
// does, checking that each starts with its id, type and name.
func toolChat(t *testing.T, url, body string, stream bool) toolResult {
	t.Helper()
	ts := &testServer{url: url}
	if !stream {
		code, data := ts.post(t, "/v1/chat/completions", testKey, []byte(body))
		if code != 200 {
			t.Fatalf("status %d: %s", code, data)
		}
		var r toolReply
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		m := r.Choices[0].Message
		res := toolResult{calls: m.ToolCalls, finish: *r.Choices[0].FinishReason, null: m.Content == nil}
		if m.Content != nil {
			res.content = *m.Content
		}
		return res
	}
	resp := ts.stream(t, context.Background(), "/v1/chat/completions", strings.TrimSuffix(body, "}")+`,"stream":true}`)
	defer resp.Body.Close()
	var res toolResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var r toolReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		for _, ch := range r.Choices {
			if ch.FinishReason != nil {
				res.finish = *ch.FinishReason
			}
			if ch.Delta == nil {
				continue
			}
			if ch.Delta.Content != nil {
				res.content += *ch.Delta.Content
			}
			for _, d := range ch.Delta.ToolCalls {
				if d.Index == nil {
					t.Fatalf("tool call delta without an index: %s", line)
				}
				i := *d.Index
				switch {
				case i == len(res.calls):
					if d.ID == "" || d.Type != "function" || d.Function.Name == "" {
						t.Fatalf("the first delta of call %d lacks its id, type or name: %s", i, line)
					}
					empty := ""
					d.Function.Arguments = &empty
					res.calls = append(res.calls, d)
				case i < len(res.calls):
					if d.ID != "" || d.Function.Name != "" {
						t.Fatalf("a later delta of call %d repeats its id or name: %s", i, line)
					}
					if d.Function.Arguments != nil {
						a := *res.calls[i].Function.Arguments + *d.Function.Arguments
						res.calls[i].Function.Arguments = &a
					}
				default:
					t.Fatalf("call index %d skips %d: %s", i, len(res.calls), line)
				}
			}
		}
	}
	if !done {
		t.Fatal("stream without [DONE]")
	}
	return res
}

// checkCalls checks a reply of forced calls: finish_reason tool_calls, no
// content, each call of an allowed tool with a call id and arguments
// valid for its schema.
func checkCalls(t *testing.T, what string, r toolResult, only string, max int) {
	t.Helper()
	if r.finish == "length" {
		return // cut by max_tokens: nothing to check but the prefix
	}
	if r.finish != "tool_calls" || len(r.calls) == 0 || len(r.calls) > max || strings.TrimSpace(r.content) != "" {
		t.Fatalf("%s: finish %q, %d calls, content %q", what, r.finish, len(r.calls), r.content)
	}
	for _, c := range r.calls {
		schema, ok := toolSchemas[c.Function.Name]
		if !ok || only != "" && c.Function.Name != only || c.Type != "function" || !strings.HasPrefix(c.ID, "call_") {
			t.Fatalf("%s: call %+v", what, c)
		}
		if err := grammar.ValidateJSON([]byte(schema), []byte(*c.Function.Arguments)); err != nil {
			t.Fatalf("%s: arguments %s of %s: %v", what, *c.Function.Arguments, c.Function.Name, err)
		}
	}
}

// TestToolRoundTrip: stories260K (no template: the Hermes-style fallback)
// is made to call tools with tool_choice required or a named function,
// whole and streamed, one call or several; the calls' arguments are valid
// for their schemas. Then the calls and their results go back into the
// conversation and the model answers.
func TestToolRoundTrip(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 1024})
	tools := `"tools":[` + weatherTool + `,` + timeTool + `]`
	for i := range 8 {
		stream := i%2 == 1
		choice, only, max := `"required"`, "", 8
		if i%4 >= 2 {
			choice, only = `{"type":"function","function":{"name":"get_time"}}`, "get_time"
		}
		parallel := ""
		if i >= 4 {
			parallel, max = `,"parallel_tool_calls":false`, 1
		}
		body := fmt.Sprintf(`{"model":"stories","messages":[{"role":"user","content":"What's the weather in Paris?"}],%s,"tool_choice":%s%s,"max_tokens":300,"temperature":1,"seed":%d}`, tools, choice, parallel, i)
		r := toolChat(t, ts.url, body, stream)
		checkCalls(t, fmt.Sprintf("request %d (stream %v)", i, stream), r, only, max)
		if !stream && r.finish == "tool_calls" && !r.null {
			t.Errorf("request %d: content %q beside the calls, want null", i, r.content)
		}
		if r.finish != "tool_calls" {
			continue
		}
		// The round trip: the calls (arguments as the strings the API
		// gave) and their results, then an answer without tools forced.
		msgs := []any{map[string]any{"role": "user", "content": "What's the weather in Paris?"}}
		var calls []any
		for _, c := range r.calls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Function.Name, "arguments": *c.Function.Arguments}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
		for _, c := range r.calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": `{"temperature": 15}`})
		}
		mj, _ := json.Marshal(msgs)
		body = fmt.Sprintf(`{"model":"stories","messages":%s,%s,"max_tokens":20,"temperature":0}`, mj, tools)
		a := toolChat(t, ts.url, body, stream)
		if a.finish != "stop" && a.finish != "length" && a.finish != "tool_calls" {
			t.Errorf("answer after the tool results: finish %q", a.finish)
		}
	}
	// A forced call beside a response format (an agent's output schema,
	// sent with every turn): the call is made, as OpenAI does; the format
	// is for the text of a later turn.
	withFormat := `{"model":"stories","messages":[{"role":"user","content":"What's the weather in Paris?"}],` + tools +
		`,"tool_choice":"required","parallel_tool_calls":false,"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"summary":{"type":"string","maxLength":20}},"required":["summary"]}}},"max_tokens":300,"seed":3}`
	for _, stream := range []bool{false, true} {
		r := toolChat(t, ts.url, withFormat, stream)
		checkCalls(t, fmt.Sprintf("forced call with a response format (stream %v)", stream), r, "", 1)
		if r.finish != "tool_calls" {
			t.Errorf("forced call with a response format (stream %v): finish %q, want tool_calls", stream, r.finish)
		}
	}
	// tool_choice none: no calls read, whatever the text.
	r := toolChat(t, ts.url, `{"model":"stories","messages":[{"role":"user","content":"Hi"}],"tools":[`+timeTool+`],"tool_choice":"none","max_tokens":10,"temperature":0}`, false)
	if len(r.calls) != 0 || r.finish == "tool_calls" {
		t.Errorf("tool_choice none: %+v", r)
	}
}

func TestToolsBadInput(t *testing.T) {
	ts := startServer(t, opts{parallel: 1, ctx: 256})
	chat := func(extra string) string {
		return `{"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":4` + extra + `}`
	}
	for _, c := range []struct{ body, param, want string }{
		{chat(`,"tools":[{"type":"function","function":{"description":"x"}}]`), "tools[0].function.name", "is required"},
		{chat(`,"tools":[{"type":"function","function":{"name":"a b"}}]`), "tools[0].function.name", "letters, digits"},
		{chat(`,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]`), "tools[0].function.parameters", "must be a JSON Schema object"},
		{chat(`,"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]`), "tools[0].function.parameters", "must be a JSON Schema object"},
		{chat(`,"tools":[{"type":"retrieval"}]`), "tools[0].type", `must be "function", not "retrieval"`},
		{chat(`,"tools":[{"function":{"name":"f"}}]`), "tools[0].type", "not none"},
		{chat(`,"tools":[{"type":"function"}]`), "tools[0].function", "is required"},
		{chat(`,"tools":[` + timeTool + `,` + timeTool + `]`), "tools[1].function.name", "defined twice"},
		{chat(`,"tools":"x"`), "tools", "must be an array"},
		{chat(`,"tools":[` + timeTool + `],"tool_choice":"always"`), "tool_choice", `"always" is not one of`},
		{chat(`,"tools":[` + timeTool + `],"tool_choice":{"type":"function","function":{"name":"nope"}}`), "tool_choice", `"nope", which is not among the tools`},
		{chat(`,"tool_choice":"required"`), "tool_choice", "needs tools"},
		{chat(`,"functions":[{"name":"f"}]`), "functions", "deprecated"},
		{chat(`,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}}}],"tool_choice":"required"`), "tools[0].function.parameters", `"multipleOf"`},
		// A forced call with a format: the format is still checked.
		{chat(`,"tools":[` + timeTool + `],"tool_choice":"required","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"number","multipleOf":2}}}`), "response_format.json_schema.schema", `"multipleOf"`},
		{`{"model":"stories","max_tokens":4,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, "messages[1].tool_calls[0].function.name", "is required"},
		{`{"model":"stories","max_tokens":4,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "must be JSON"},
		{`{"model":"stories","max_tokens":4,"messages":[{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"c"}]}`, "messages[1].content", "needs content"},
	} {
		code, data := ts.post(t, "/v1/chat/completions", testKey, []byte(c.body))
		var r toolReply
		json.Unmarshal(data, &r)
		if code != 400 || r.Error == nil || r.Error.Param == nil || *r.Error.Param != c.param || !strings.Contains(r.Error.Message, c.want) {
			t.Errorf("%s:\nstatus %d %s\nwant 400 param %q with %q", c.body, code, data, c.param, c.want)
		}
	}
}

// TestToolCallsScripted: models of each family (their real templates, a
// scripted model writing a call in the family's syntax) get their calls
// read into tool_calls, whole and streamed, with tool_choice auto and
// required; /v1/models says which format was chosen.
func TestToolCallsScripted(t *testing.T) {
	const call = `{"zone": "UTC"}`
	for _, c := range []struct{ template, format, script string }{
		{"Qwen-Qwen2.5-7B-Instruct", "hermes", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": " + call + "}\n</tool_call>"},
		{"Qwen3-Coder", "qwen-xml", "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>"},
		{"GLM-4.6", "glm", "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>"},
		{"meta-llama-Llama-3.1-8B-Instruct", "llama3", "{\"name\": \"get_time\", \"parameters\": " + call + "}"},
		{"Mistral-Small-3.2-24B-Instruct-2506", "mistral", "[TOOL_CALLS]get_time[ARGS]" + call},
		{"mistralai-Mistral-Nemo-Instruct-2407", "mistral", "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": " + call + ", \"id\": \"abcdefghi\"}]"},
		{"openai-gpt-oss-120b", "harmony", "<|channel|>analysis<|message|>Need the time.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>" + call + "<|call|>"},
		{"deepseek-ai-DeepSeek-V3.1", "deepseek", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>" + call + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
		{"llama-cpp-deepseek-r1", "deepseek", "The user wants the time.</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n" + call + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
	} {
		ss := startScriptedLong(t, c.template)
		ss.say(c.script)
		ts := &testServer{url: ss.url}
		req, _ := newGet(ss.url + "/v1/models")
		var models struct {
			Data []struct {
				Meta map[string]any `json:"meta"`
			} `json:"data"`
		}
		if err := json.Unmarshal(req, &models); err != nil || models.Data[0].Meta["tool_call_format"] != c.format {
			t.Errorf("%s: /v1/models says %s, want tool_call_format %s", c.template, req, c.format)
		}
		_ = ts
		for _, choice := range []string{`"auto"`, `"required"`, `{"type":"function","function":{"name":"get_time"}}`} {
			for _, stream := range []bool{false, true} {
				body := `{"model":"m","messages":[{"role":"user","content":"Time?"}],"tools":[` + timeTool + `],"tool_choice":` + choice + `,"temperature":0}`
				r := toolChat(t, ss.url, body, stream)
				what := fmt.Sprintf("%s (tool_choice %s, stream %v)", c.template, choice, stream)
				if len(r.calls) != 1 || r.calls[0].Function.Name != "get_time" || r.finish != "tool_calls" {
					t.Errorf("%s: %+v", what, r)
					continue
				}
				var args map[string]any
				if json.Unmarshal([]byte(*r.calls[0].Function.Arguments), &args) != nil || args["zone"] != "UTC" {
					t.Errorf("%s: arguments %s", what, *r.calls[0].Function.Arguments)
				}
				if strings.TrimSpace(r.content) != "" {
					t.Errorf("%s: content %q beside the call", what, r.content)
				}
			}
		}
	}
}

func newGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// byteLevelVocab is a byte-level BPE vocabulary without merges (every
// byte its own token, as GPT-2 writes bytes) with the reasoning and
// tool-call tags of every format as control tokens, so that any text a
// script says comes out unchanged.
func byteLevelVocab() *tokenizer.Vocab {
	var toks []string
	var types []int32
	n := 0
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		toks = append(toks, string(r))
		types = append(types, tokenizer.TypeNormal)
	}
	tags := append(chat.ReasoningHarmony.Tags(), chat.ReasoningThink.Tags()...)
	for f := toolcall.Hermes; f <= toolcall.DeepSeek; f++ {
		for _, tag := range f.Tags() {
			if !slices.Contains(tags, tag) {
				tags = append(tags, tag)
			}
		}
	}
	eos := int32(len(toks))
	toks = append(toks, "</s>")
	types = append(types, tokenizer.TypeControl)
	for _, tag := range tags {
		toks = append(toks, tag)
		types = append(types, tokenizer.TypeControl)
	}
	return &tokenizer.Vocab{Model: "gpt2", Tokens: toks, Types: types, BOS: -1, EOS: eos, EOT: -1, EOM: -1, UNK: -1, PAD: -1}
}

// startScriptedLong is startScripted with room for the long tool prompts
// of some templates (one slot of 8192 positions) and a byte-level
// vocabulary.
func startScriptedLong(t *testing.T, name string) *scriptServer {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(templateDir, name+".jinja"))
	if err != nil {
		sharedtest.Missing(t, "shared chat templates absent (%v)", err)
	}
	tmpl, err := chat.Parse(name, string(src))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(byteLevelVocab())
	if err != nil {
		t.Fatal(err)
	}
	cache, err := kvcache.New(kvcache.Config{Layers: 1, KVDim: 1, BlockSize: 16, Blocks: 512, F32: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &scriptBackend{Cache: cache, vocab: tok.VocabSize(), eos: tok.EOS(), fed: map[kvcache.SeqID][]int32{}, outs: map[kvcache.SeqID]int{}}
	sched, err := engine.NewScheduler(b, engine.SchedulerConfig{Parallel: 1, Context: 8192, PrefixCache: -1, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	ss := &scriptServer{backend: b, tok: tok}
	srv := New(Config{Model: "m", Logf: func(string, ...any) {}})
	srv.SetReady(&Backend{Sched: sched, Tok: tok, Template: tmpl, Vocab: tok.VocabSize()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	ss.url = "http://" + ln.Addr().String()
	t.Cleanup(func() {
		stop()
		<-done
		stopSched()
		<-schedDone
	})
	return ss
}

// TestStrictToolsAuto: with tool_choice auto and a strict tool, a model
// that answers in text is left alone, and one that begins a call is held
// to the tool's schema from the call's marker on.
func TestStrictToolsAuto(t *testing.T) {
	strict := strings.Replace(timeTool, `"name":"get_time",`, `"name":"get_time","strict":true,`, 1)
	body := `{"model":"m","messages":[{"role":"user","content":"Time?"}],"tools":[` + strict + `],"temperature":0}`
	for _, c := range []struct{ template, call string }{
		{"Qwen-Qwen2.5-7B-Instruct", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"PST\"}}\n</tool_call>"},
		{"Mistral-Small-3.2-24B-Instruct-2506", "[TOOL_CALLS]get_time[ARGS]{\"zone\": \"PST\"}"},
	} {
		ss := startScriptedLong(t, c.template)
		ss.say("It is noon <somewhere> [really].")
		r := toolChat(t, ss.url, body, false)
		if r.content != "It is noon <somewhere> [really]." || len(r.calls) != 0 || r.finish != "stop" {
			t.Errorf("%s: a text answer came back as %+v", c.template, r)
		}
		ss.say(c.call)
		for _, stream := range []bool{false, true} {
			r = toolChat(t, ss.url, body, stream)
			if len(r.calls) != 1 || r.finish != "tool_calls" {
				t.Errorf("%s (stream %v): %+v", c.template, stream, r)
				continue
			}
			if err := grammar.ValidateJSON([]byte(toolSchemas["get_time"]), []byte(*r.calls[0].Function.Arguments)); err != nil {
				t.Errorf("%s (stream %v): arguments %s not held to the schema: %v", c.template, stream, *r.calls[0].Function.Arguments, err)
			}
		}
	}
}
