package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/grammar"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
)

type schemaCase struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

func schemaTable(t *testing.T) []schemaCase {
	data, err := os.ReadFile("../grammar/testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []schemaCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// constrainedReply sends one request and returns the output and finish
// reason, whole or streamed.
func constrainedReply(t *testing.T, ts *testServer, path, body string, stream bool) (string, string) {
	if stream {
		body = strings.TrimSuffix(body, "}") + `,"stream":true}`
		resp := ts.stream(t, context.Background(), path, body)
		defer resp.Body.Close()
		r := readStream(t, resp.Body, nil)
		if !r.done {
			t.Errorf("stream without [DONE]: %s", body)
		}
		return r.text, r.finish
	}
	code, data := ts.post(t, path, testKey, []byte(body))
	if code != 200 {
		t.Fatalf("status %d: %s\nrequest: %s", code, data, body)
	}
	r := decode(t, data)
	if path == "/v1/completions" {
		return r.Choices[0].Text, *r.Choices[0].FinishReason
	}
	return r.Choices[0].Message.Content, *r.Choices[0].FinishReason
}

// TestStructuredOutputs: with stories260K sampled at random (its text is
// noise to JSON), every json_schema reply of the schema table that
// finishes is valid for its schema, and every one cut by max_tokens is a
// valid prefix: chat whole and streamed, and text completions with
// llama-server's json_schema field, four at a time in shared steps.
func TestStructuredOutputs(t *testing.T) {
	structuredTable(t, startServer(t, opts{parallel: 4, ctx: 1024}))
}

// TestStructuredRandomWeights is the table on tiny-llama, a model of
// random weights: its text is noise, and the guarantee does not depend on
// the model.
func TestStructuredRandomWeights(t *testing.T) {
	structuredTable(t, startModelServer(t, "../../../shared/testdata/models/tiny-llama/tiny-llama-F32.gguf", 4, 1024))
}

// startModelServer serves a shared model file (as startServer does
// stories260K).
func startModelServer(t *testing.T, path string, parallel, ctxLen int) *testServer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		sharedtest.Missing(t, "shared test model absent (%v)", err)
	}
	t.Cleanup(func() { f.Close() })
	pool := kernels.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: parallel * ctxLen, Ctx: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := engine.NewScheduler(engine.NewLocal(m, cache), engine.SchedulerConfig{Parallel: parallel, Context: ctxLen, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	srv := New(Config{Model: "stories", APIKeys: []string{testKey}, Logf: t.Logf})
	srv.SetReady(&Backend{Sched: sched, Tok: tok, Vocab: m.Cfg.Vocab})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	ts := &testServer{url: "http://" + ln.Addr().String(), srv: srv, sched: sched, tok: tok, stop: stop, done: done}
	t.Cleanup(func() {
		stop()
		<-done
		stopSched()
		<-schedDone
	})
	return ts
}

func structuredTable(t *testing.T, ts *testServer) {
	cases := schemaTable(t)
	runs := 3
	if testing.Short() {
		runs = 1
	}
	var mu sync.Mutex
	complete, total := 0, 0
	sem := make(chan struct{}, 6)
	var wg sync.WaitGroup
	for ci, c := range cases {
		g, err := grammar.CompileSchema(c.Schema)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for run := range runs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				seed := ci*10 + run
				var path, body string
				switch run % 3 {
				case 0, 1:
					path = "/v1/chat/completions"
					body = fmt.Sprintf(`{"model":"stories","messages":[{"role":"user","content":"Tell me about %s."}],"max_tokens":700,"temperature":1,"seed":%d,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":%s}}}`, c.Name, seed, c.Schema)
				case 2:
					path = "/v1/completions"
					body = fmt.Sprintf(`{"model":"stories","prompt":"Once upon a time","max_tokens":700,"temperature":0.8,"top_k":20,"seed":%d,"json_schema":%s}`, seed, c.Schema)
				}
				text, finish := constrainedReply(t, ts, path, body, run%3 == 1)
				mu.Lock()
				defer mu.Unlock()
				total++
				switch finish {
				case "stop":
					complete++
					if err := grammar.ValidateJSON(c.Schema, []byte(text)); err != nil {
						t.Errorf("%s (run %d): %q is not valid: %v", c.Name, run, text, err)
					}
				case "length":
					if ok, _ := g.Check(text); !ok {
						t.Errorf("%s (run %d): cut at max_tokens, %q is not a valid prefix", c.Name, run, text)
					}
				default:
					t.Errorf("%s: finish_reason %q", c.Name, finish)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d of %d replies complete", complete, total)
	if complete < total/2 {
		t.Errorf("only %d of %d replies completed", complete, total)
	}
}

func TestJSONObjectAndGrammar(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 512})
	for i := range 6 {
		body := fmt.Sprintf(`{"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":300,"temperature":1,"seed":%d,"response_format":{"type":"json_object"}}`, i)
		text, finish := constrainedReply(t, ts, "/v1/chat/completions", body, i%2 == 1)
		if finish != "stop" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Errorf("json_object reply %q: %v", text, err)
		}
	}
	gbnf := `root ::= "The " ("cat" | "dog") " is " [0-9]{1,2} " years old."`
	g, err := grammar.ParseGBNF(gbnf)
	if err != nil {
		t.Fatal(err)
	}
	gq, _ := json.Marshal(gbnf)
	for i := range 4 {
		path, body := "/v1/completions", fmt.Sprintf(`{"model":"stories","prompt":"Once","max_tokens":50,"temperature":1,"seed":%d,"grammar":%s}`, i, gq)
		if i%2 == 1 {
			path, body = "/v1/chat/completions", fmt.Sprintf(`{"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":50,"temperature":1,"seed":%d,"grammar":%s}`, i, gq)
		}
		text, finish := constrainedReply(t, ts, path, body, i >= 2)
		if finish != "stop" || !g.Accepts(text) {
			t.Errorf("grammar reply %q (finish %s) does not follow the grammar", text, finish)
		}
	}
}

// TestStructuredBadInput: what cannot be enforced is a 400 naming the
// field and the reason, and the server keeps serving a stream running
// beside the bad requests.
func TestStructuredBadInput(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 512})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := ts.stream(t, ctx, "/v1/completions", `{"model":"stories","prompt":"Once upon a time","max_tokens":300,"temperature":0,"stream":true,"ignore_eos":true}`)
	defer resp.Body.Close()
	streamDone := make(chan streamResult, 1)
	go func() { streamDone <- readStream(t, resp.Body, nil) }()

	chat := func(extra string) string {
		return `{"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":5` + extra + `}`
	}
	for _, c := range []struct{ body, param, want string }{
		{chat(`,"response_format":{"type":"xml"}`), "response_format.type", `"xml" is not one of`},
		{chat(`,"response_format":{}`), "response_format.type", "is required"},
		{chat(`,"response_format":{"type":"json_schema"}`), "response_format.json_schema", "needs a json_schema"},
		{chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), "response_format.json_schema.schema", "is required"},
		{chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","not":{"const":"a"}}}}`), "response_format.json_schema.schema", `"not": keyword not supported`},
		{chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}}}`), "response_format.json_schema.schema", "/properties/n"},
		{chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"strin"}}}`), "response_format.json_schema.schema", `unknown type "strin"`},
		{chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"(a)\\1"}}}`), "response_format.json_schema.schema", "backreferences"},
		{chat(`,"grammar":"root ::= \"a\" )"`), "grammar", "line 1, column 14"},
		{chat(`,"grammar":"root ::= x"`), "grammar", `rule "x" is used but not defined`},
		{chat(`,"grammar":"root ::= (\"a\"?){5000}"`), "grammar", "too ambiguous"},
		{chat(`,"grammar":"root ::= \"a\"","response_format":{"type":"json_object"}`), "grammar", "both constrain"},
		{`{"model":"stories","prompt":"x","json_schema":{"type":"integer","minimum":3,"maximum":1}}`, "json_schema", "no integer lies between"},
		{chat(`,"response_format":"json"`), "response_format", "must be an object"},
	} {
		path := "/v1/chat/completions"
		if strings.Contains(c.body, `"prompt"`) {
			path = "/v1/completions"
		}
		code, data := ts.post(t, path, testKey, []byte(c.body))
		r := decode(t, data)
		if code != 400 || r.Error == nil {
			t.Errorf("%s: status %d: %s", c.body, code, data)
			continue
		}
		if r.Error.Param == nil || *r.Error.Param != c.param || !strings.Contains(r.Error.Message, c.want) {
			t.Errorf("%s: error %s, want param %q and a message with %q", c.body, data, c.param, c.want)
		}
	}
	r := <-streamDone
	if !r.done || r.finish != "length" {
		t.Errorf("the stream beside the bad requests ended with %q (done %v)", r.finish, r.done)
	}
}

// TestStructuredReasoning: a reasoning model thinks first and then answers
// in the schema: the reasoning goes to reasoning_content, the content is
// the JSON. A model that strays from the schema is held to it.
func TestStructuredReasoning(t *testing.T) {
	const schema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`
	rf := `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, c := range []struct{ template, script, reasoning, stray string }{
		{"Qwen-Qwen3-0.6B", "<think>\nLet me see.\n</think>\n\n{\"a\": 12}", "Let me see.", `{"a": "twelve", "b": [1]}`},
		{"Qwen-Qwen3-0.6B", "{\"a\": 7}", "", `<think>x</think>{"a": 1.5}`},
		{"openai-gpt-oss-120b", "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>{\"a\": 12}", "Think.", `<|channel|>final<|message|>{"a": "twelve"}`},
		{"openai-gpt-oss-120b", "<|channel|>final<|message|>{\"a\": 3}", "", `<|channel|>final<|message|>{"b": 1}`},
	} {
		ss := startScripted(t, c.template)
		ss.say(c.script)
		code, r := ss.chatOnce(t, rf)
		if code != 200 {
			t.Fatalf("%s: status %d", c.template, code)
		}
		m := r.Choices[0].Message
		content, reasoning := deref(m.Content), deref(m.ReasoningContent)
		if reasoning != c.reasoning || grammar.ValidateJSON([]byte(schema), []byte(content)) != nil {
			t.Errorf("%s %q: reasoning %q, content %q", c.template, c.script, reasoning, content)
		}
		// A model that answers outside the schema is held to it.
		ss.say(c.stray)
		code, r = ss.chatOnce(t, rf)
		if code != 200 {
			t.Fatalf("%s: status %d", c.template, code)
		}
		if content := deref(r.Choices[0].Message.Content); grammar.ValidateJSON([]byte(schema), []byte(content)) != nil || *r.Choices[0].FinishReason != "stop" {
			t.Errorf("%s: a stray model gave %q (finish %s)", c.template, content, *r.Choices[0].FinishReason)
		}
	}
}
