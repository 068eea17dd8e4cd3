package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/model"
	"braid/internal/sample"
	"braid/internal/sharedtest"
	"braid/internal/tokenizer"
)

const storiesPath = "../../../shared/testdata/models/stories260K/stories260K-F32.gguf"

const testKey = "sk-test-123"

type testServer struct {
	url   string
	srv   *Server
	sched *engine.Scheduler
	tok   *tokenizer.Tokenizer
	stop  context.CancelFunc
	done  chan error
}

type opts struct {
	parallel, ctx, queue int
	maxBody              int64
	grace                time.Duration
}

// openModel loads stories260K (a real trained model) or skips.
func openModel(t *testing.T) (*gguf.Model, *model.Model) {
	t.Helper()
	f, err := gguf.Open(storiesPath)
	if err != nil {
		sharedtest.Missing(t, "shared test model absent (%v): skipping the server tests", err)
	}
	t.Cleanup(func() { f.Close() })
	pool := kernels.NewPool(2)
	t.Cleanup(pool.Close)
	m, err := model.New(f, pool, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

// startServer starts the real server on 127.0.0.1:0 and stops it when the
// test ends.
func startServer(t *testing.T, o opts) *testServer {
	t.Helper()
	f, m := openModel(t)
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: o.parallel * o.ctx, Ctx: o.ctx})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := engine.NewScheduler(engine.NewLocal(m, cache), engine.SchedulerConfig{Parallel: o.parallel, Context: o.ctx, MaxQueue: o.queue, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	srv := New(Config{Model: "stories", APIKeys: []string{testKey}, MaxBodyBytes: o.maxBody, Logf: t.Logf})
	srv.SetReady(&Backend{Sched: sched, Tok: tok, Vocab: m.Cfg.Vocab})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if o.grace == 0 {
		o.grace = 5 * time.Second
	}
	go func() { done <- srv.Serve(ctx, ln, o.grace) }()
	ts := &testServer{url: "http://" + ln.Addr().String(), srv: srv, sched: sched, tok: tok, stop: stop, done: done}
	t.Cleanup(func() {
		stop()
		<-done
		stopSched()
		<-schedDone
	})
	return ts
}

func (ts *testServer) post(t *testing.T, path, key string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.url+path, bytes.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (ts *testServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("metric %s absent from:\n%s", name, data)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

type fullResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         string          `json:"text"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
	} `json:"error"`
	Timings *struct {
		CacheN             int     `json:"cache_n"`
		PromptN            int     `json:"prompt_n"`
		PromptMS           float64 `json:"prompt_ms"`
		PredictedN         int     `json:"predicted_n"`
		PredictedMS        float64 `json:"predicted_ms"`
		PredictedPerSecond float64 `json:"predicted_per_second"`
	} `json:"timings"`
}

func decode(t *testing.T, data []byte) fullResponse {
	t.Helper()
	var r fullResponse
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("response is not JSON (%v): %s", err, data)
	}
	return r
}

// streamResult is what an SSE stream carried.
type streamResult struct {
	text   string
	finish string
	chunks []fullResponse
	done   bool // saw data: [DONE]
}

// readStream reads SSE events until [DONE] or EOF; onChunk may stop early
// by returning false.
func readStream(t *testing.T, body io.Reader, onChunk func(fullResponse) bool) streamResult {
	var r streamResult
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			r.done = true
			break
		}
		var c fullResponse
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Errorf("bad SSE event %q: %v", line, err)
			break
		}
		r.chunks = append(r.chunks, c)
		for _, ch := range c.Choices {
			if ch.Delta != nil && ch.Delta.Content != nil {
				r.text += *ch.Delta.Content
			}
			r.text += ch.Text
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
		if onChunk != nil && !onChunk(c) {
			break
		}
	}
	return r
}

func (ts *testServer) stream(t *testing.T, ctx context.Context, path string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: status %d: %s", resp.StatusCode, data)
	}
	return resp
}

func TestChatWholeAndStreamed(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 256})
	body := `{"model":"stories","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Once upon a time"}]}],"max_tokens":24,"temperature":0,"logprobs":true,"top_logprobs":3}`
	code, data := ts.post(t, "/v1/chat/completions", testKey, []byte(body))
	if code != 200 {
		t.Fatalf("status %d: %s", code, data)
	}
	r := decode(t, data)
	if r.Object != "chat.completion" || !strings.HasPrefix(r.ID, "chatcmpl-") || r.Model != "stories" || len(r.Choices) != 1 {
		t.Fatalf("bad envelope: %s", data)
	}
	c := r.Choices[0]
	if c.Message == nil || c.Message.Role != "assistant" || c.Message.Content == "" || c.FinishReason == nil {
		t.Fatalf("bad choice: %s", data)
	}
	if r.Usage == nil || r.Usage.PromptTokens == 0 || r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens {
		t.Fatalf("bad usage: %s", data)
	}
	if *c.FinishReason == "length" && r.Usage.CompletionTokens != 24 {
		t.Errorf("finish length after %d tokens, max_tokens 24", r.Usage.CompletionTokens)
	}
	var lp struct {
		Content []struct {
			Token       string     `json:"token"`
			Logprob     float64    `json:"logprob"`
			TopLogprobs []struct{} `json:"top_logprobs"`
		} `json:"content"`
	}
	if err := json.Unmarshal(c.Logprobs, &lp); err != nil || len(lp.Content) != r.Usage.CompletionTokens {
		t.Fatalf("logprobs: %v, %d entries for %d tokens: %s", err, len(lp.Content), r.Usage.CompletionTokens, c.Logprobs)
	}
	for _, e := range lp.Content {
		if e.Logprob > 0 || len(e.TopLogprobs) != 3 {
			t.Fatalf("bad logprob entry %+v", e)
		}
	}

	// The same request streamed gives the same text (greedy), a role chunk
	// first, usage in the include_usage chunk only (not beside the
	// finish_reason as well: LangChain adds every chunk's usage up).
	sbody := strings.Replace(body, `"max_tokens"`, `"stream":true,"stream_options":{"include_usage":true},"max_tokens"`, 1)
	resp := ts.stream(t, context.Background(), "/v1/chat/completions", sbody)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	s := readStream(t, resp.Body, nil)
	if !s.done || s.text != c.Message.Content || s.finish != *c.FinishReason {
		t.Fatalf("stream: done %v, text %q finish %q; whole: %q %q", s.done, s.text, s.finish, c.Message.Content, *c.FinishReason)
	}
	if d := s.chunks[0].Choices[0].Delta; d == nil || d.Role != "assistant" {
		t.Errorf("first chunk has no assistant role: %+v", s.chunks[0])
	}
	last := s.chunks[len(s.chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != r.Usage.CompletionTokens {
		t.Errorf("include_usage chunk wrong: %+v", last)
	}
	fin := s.chunks[len(s.chunks)-2]
	if fin.Usage != nil || fin.Choices[0].FinishReason == nil {
		t.Errorf("final chunk has usage (counted twice with the include_usage chunk) or lacks finish_reason: %+v", fin)
	}
	for i, c := range s.chunks[:len(s.chunks)-1] {
		if c.Usage != nil {
			t.Errorf("chunk %d of %d carries usage beside the include_usage chunk", i, len(s.chunks))
		}
	}

	// Models and health.
	req, _ := http.NewRequest("GET", ts.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	mr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	if !strings.Contains(string(md), `"id":"stories"`) || !strings.Contains(string(md), `"object":"list"`) {
		t.Errorf("models: %s", md)
	}
	hr, err := http.Get(ts.url + "/health")
	if err != nil || hr.StatusCode != 200 {
		t.Errorf("health: %v %v", err, hr.StatusCode)
	}
}

// TestGreedyMatchesGenerator: a request through the server gives the tokens
// engine.Generator gives for the same prompt.
func TestGreedyMatchesGenerator(t *testing.T) {
	ts := startServer(t, opts{parallel: 4, ctx: 256})
	prompt := []int32{1, 403, 407, 261, 378, 302, 270}
	// The reference runs on its own model instance: the server's is owned
	// by its scheduler.
	_, m := openModel(t)
	cache, _ := m.NewCache(model.CacheSize{Positions: 256})
	p := sample.DefaultParams()
	p.Temperature = 0
	smp, _ := sample.New(p, m.Cfg.Vocab)
	dec := ts.tok.NewDecoder()
	var want string
	var n int
	_, err := engine.NewGenerator(engine.NewLocal(m, cache)).Generate(context.Background(), engine.Request{
		Prompt: prompt, MaxTokens: 60, Sampler: smp, Stop: ts.tok.IsEOG,
		Emit: func(id int32) error { want += dec.Add(id); n++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	want += dec.Flush()
	ids, _ := json.Marshal(prompt)
	code, data := ts.post(t, "/v1/completions", testKey, []byte(`{"model":"stories","prompt":`+string(ids)+`,"max_tokens":60,"temperature":0}`))
	if code != 200 {
		t.Fatalf("status %d: %s", code, data)
	}
	r := decode(t, data)
	if r.Choices[0].Text != want || r.Usage.CompletionTokens != n || r.Usage.PromptTokens != len(prompt) {
		t.Fatalf("server: %q (%d tokens)\ngenerator: %q (%d tokens)", r.Choices[0].Text, r.Usage.CompletionTokens, want, n)
	}
}

// TestBadInput sends every kind of bad request while two streams run; each
// gets its status and a clear message, and the streams finish untouched.
func TestBadInput(t *testing.T) {
	ts := startServer(t, opts{parallel: 4, ctx: 512, maxBody: 64 << 10})
	const long = 400
	streamBody := fmt.Sprintf(`{"model":"stories","prompt":"Once upon a time","max_tokens":%d,"temperature":0,"stream":true}`, long)
	// Reference: the same stream alone.
	code, data := ts.post(t, "/v1/completions", testKey, []byte(strings.Replace(streamBody, `,"stream":true`, "", 1)))
	if code != 200 {
		t.Fatalf("reference: %d %s", code, data)
	}
	ref := decode(t, data)

	var wg sync.WaitGroup
	results := make([]streamResult, 2)
	started := make(chan struct{}, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := ts.stream(t, context.Background(), "/v1/completions", streamBody)
			defer resp.Body.Close()
			first := true
			results[i] = readStream(t, resp.Body, func(fullResponse) bool {
				if first {
					started <- struct{}{}
					first = false
				}
				return true
			})
		}()
	}
	<-started
	<-started

	// A client that disconnects mid-stream.
	dctx, disconnect := context.WithCancel(context.Background())
	resp := ts.stream(t, dctx, "/v1/completions", strings.Replace(streamBody, fmt.Sprint(long), "500", 1))
	readStream(t, resp.Body, func(fullResponse) bool { return false })
	disconnect()
	resp.Body.Close()

	overlong := strings.Repeat("Once upon a time there was a cat. ", 80)
	bigBody := `{"model":"stories","prompt":"` + strings.Repeat("a", 70<<10) + `"}`
	cases := []struct {
		name, path, key, body string
		status                int
		msg                   string // must appear in the message
	}{
		{"malformed JSON", "/v1/chat/completions", testKey, `{"model":"stories","messages":[`, 400, "malformed JSON"},
		{"not an object", "/v1/chat/completions", testKey, `[1,2]`, 400, "JSON object"},
		{"wrong type", "/v1/chat/completions", testKey, `{"model":"stories","messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}`, 400, `"max_tokens" must be an integer`},
		{"wrong type temperature", "/v1/completions", testKey, `{"model":"stories","prompt":"hi","temperature":"hot"}`, 400, `"temperature" must be a number`},
		{"wrong type messages", "/v1/chat/completions", testKey, `{"model":"stories","messages":"hi"}`, 400, `"messages" must be an array`},
		{"unknown role", "/v1/chat/completions", testKey, `{"model":"stories","messages":[{"role":"wizard","content":"hi"}]}`, 400, `"wizard"`},
		{"negative max_tokens", "/v1/chat/completions", testKey, `{"model":"stories","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`, 400, "max_tokens = -1"},
		{"n above --parallel", "/v1/chat/completions", testKey, `{"model":"stories","messages":[{"role":"user","content":"hi"}],"n":99}`, 400, "n = 99 is more choices"},
		{"bad token id", "/v1/completions", testKey, `{"model":"stories","prompt":[1,99999]}`, 400, "outside the vocabulary"},
		{"invalid UTF-8", "/v1/completions", testKey, "{\"model\":\"stories\",\"prompt\":\"caf\xc3\x28\"}", 400, "not valid UTF-8"},
		{"body too large", "/v1/completions", testKey, bigBody, 413, "over the limit of 65536 bytes"},
		{"over-long prompt", "/v1/completions", testKey, `{"model":"stories","prompt":"` + overlong + `"}`, 400, "but the context holds 512"},
		{"unknown model", "/v1/chat/completions", testKey, `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, `"gpt-9" does not exist`},
		{"no key", "/v1/chat/completions", "", `{"model":"stories","messages":[{"role":"user","content":"hi"}]}`, 401, "missing API key"},
		{"bad key", "/v1/chat/completions", "sk-wrong", `{"model":"stories","messages":[{"role":"user","content":"hi"}]}`, 401, "invalid API key"},
		{"no endpoint", "/v1/images/generations", testKey, `{}`, 404, "no endpoint"},
	}
	for _, tc := range cases {
		code, data := ts.post(t, tc.path, tc.key, []byte(tc.body))
		if code != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, code, tc.status, data)
			continue
		}
		r := decode(t, data)
		if r.Error == nil || r.Error.Type == "" || !strings.Contains(r.Error.Message, tc.msg) {
			t.Errorf("%s: error %s lacks %q", tc.name, data, tc.msg)
		}
	}
	// The over-long prompt's message carries both numbers.
	_, data = ts.post(t, "/v1/completions", testKey, []byte(`{"model":"stories","prompt":"`+overlong+`"}`))
	if !regexp.MustCompile(`prompt has \d+ tokens but the context holds 512`).Match(data) {
		t.Errorf("over-long prompt message lacks the numbers: %s", data)
	}

	wg.Wait()
	for i, r := range results {
		if !r.done || r.finish != "length" || r.text != ref.Choices[0].Text {
			t.Errorf("stream %d disturbed: done %v finish %q\n got %q\nwant %q", i, r.done, r.finish, r.text, ref.Choices[0].Text)
		}
	}
	// The disconnected sequence left its slot.
	deadline := time.Now().Add(5 * time.Second)
	for ts.metric(t, "braid_busy_slots") != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if b := ts.metric(t, "braid_busy_slots"); b != 0 {
		t.Errorf("%v slots still busy after every client finished or left", b)
	}
	if code, _ := ts.post(t, "/v1/completions", testKey, []byte(`{"model":"stories","prompt":"hi","max_tokens":2}`)); code != 200 {
		t.Errorf("server unhealthy after bad input: %d", code)
	}
}

// TestBatchingAndPrefixReuse: concurrent streams share steps (seen in the
// metrics), and a second chat turn reuses the first turn's cached tokens.
func TestBatchingAndPrefixReuse(t *testing.T) {
	ts := startServer(t, opts{parallel: 8, ctx: 512})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":"stories","prompt":"Once upon a time %d","max_tokens":300,"temperature":0.8,"seed":%d,"stream":true}`, i, i)
			resp := ts.stream(t, context.Background(), "/v1/completions", body)
			defer resp.Body.Close()
			if r := readStream(t, resp.Body, nil); !r.done {
				t.Errorf("stream %d did not end with [DONE]", i)
			}
		}()
	}
	wg.Wait()
	if m := ts.metric(t, "braid_step_decode_sequences_max"); m < 2 {
		t.Errorf("8 concurrent streams never decoded together: max %v sequences per step", m)
	}
	// One node has one stage: its steps never overlap.
	if m, o := ts.metric(t, "braid_steps_in_flight_max"), ts.metric(t, "braid_steps_overlapped_total"); m != 0 || o != 0 {
		t.Errorf("one node: %v steps in flight at most, %v overlapped", m, o)
	}
	if g := ts.metric(t, "braid_generated_tokens_total"); g == 0 {
		t.Error("no generated tokens counted")
	}

	turn := `{"model":"stories","messages":[{"role":"user","content":"Tell me a story about a cat."}%s],"max_tokens":30,"temperature":0}`
	code, data := ts.post(t, "/v1/chat/completions", testKey, []byte(fmt.Sprintf(turn, "")))
	if code != 200 {
		t.Fatalf("turn 1: %d %s", code, data)
	}
	r1 := decode(t, data)
	answer, _ := json.Marshal(r1.Choices[0].Message.Content)
	before := ts.metric(t, "braid_prefix_reused_tokens_total")
	code, data = ts.post(t, "/v1/chat/completions", testKey, []byte(fmt.Sprintf(turn, `,{"role":"assistant","content":`+string(answer)+`},{"role":"user","content":"And then?"}`)))
	if code != 200 {
		t.Fatalf("turn 2: %d %s", code, data)
	}
	r2 := decode(t, data)
	if r2.Usage.PromptTokensDetails.CachedTokens < r1.Usage.PromptTokens {
		t.Errorf("turn 2 reused %d tokens; turn 1's prompt alone had %d", r2.Usage.PromptTokensDetails.CachedTokens, r1.Usage.PromptTokens)
	}
	if after := ts.metric(t, "braid_prefix_reused_tokens_total"); after-before != float64(r2.Usage.PromptTokensDetails.CachedTokens) {
		t.Errorf("metric grew by %v, usage says %d cached", after-before, r2.Usage.PromptTokensDetails.CachedTokens)
	}
}

// TestStopStrings: a stop string spanning tokens ends the text before it,
// with finish_reason stop, whole and streamed.
func TestStopStrings(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 256})
	base := `{"model":"stories","prompt":"Once upon a time","max_tokens":60,"temperature":0%s}`
	_, data := ts.post(t, "/v1/completions", testKey, []byte(fmt.Sprintf(base, "")))
	full := decode(t, data).Choices[0].Text
	if len(full) < 40 {
		t.Fatalf("reference too short: %q", full)
	}
	// A stop string from the middle, crossing word (token) boundaries.
	stop := full[20:27]
	want := full[:strings.Index(full, stop)]
	for _, stream := range []bool{false, true} {
		extra := `,"stop":["zzzz",` + strconv.Quote(stop) + `]`
		if stream {
			extra += `,"stream":true`
			resp := ts.stream(t, context.Background(), "/v1/completions", fmt.Sprintf(base, extra))
			r := readStream(t, resp.Body, nil)
			resp.Body.Close()
			if r.text != want || r.finish != "stop" || !r.done {
				t.Errorf("streamed with stop %q: %q finish %q, want %q", stop, r.text, r.finish, want)
			}
			continue
		}
		_, data := ts.post(t, "/v1/completions", testKey, []byte(fmt.Sprintf(base, extra)))
		r := decode(t, data)
		if r.Choices[0].Text != want || *r.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: %q finish %q, want %q", stop, r.Choices[0].Text, *r.Choices[0].FinishReason, want)
		}
	}
}

// TestQueueFull: beyond --parallel and the queue bound the server answers 429.
func TestQueueFull(t *testing.T) {
	ts := startServer(t, opts{parallel: 1, ctx: 4096, queue: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// stories260K at a 4096 context: thousands of tokens, seconds of work,
	// cancelled as soon as the check is done.
	resp := ts.stream(t, ctx, "/v1/completions", `{"model":"stories","prompt":"Once","max_tokens":4000,"stream":true,"temperature":1}`)
	defer resp.Body.Close()
	readStream(t, resp.Body, func(fullResponse) bool { return false })
	code, data := ts.post(t, "/v1/completions", testKey, []byte(`{"model":"stories","prompt":"hi","max_tokens":2}`))
	if code != 429 || !strings.Contains(string(data), "queue") {
		t.Errorf("second request with the slot taken and no queue: %d %s", code, data)
	}
}

// TestHealthLoading: before the model is ready, liveness says the server
// lives and loads (200: a probe must not kill a server loading a large
// model), readiness and requests say why not (503).
func TestHealthLoading(t *testing.T) {
	srv := New(Config{Model: "m"})
	h := srv.Handler()
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/health", 200, `{"status":"loading","ready":false,"reason":"loading model"}`},
		{"GET", "/ready", 503, `"reason":"loading model"`},
		{"POST", "/v1/chat/completions", 503, "loading model"},
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequest(c.method, c.path, strings.NewReader(body))
		rec := &recorder{header: http.Header{}}
		h.ServeHTTP(rec, req)
		if rec.status != c.status || !strings.Contains(rec.body.String(), c.want) {
			t.Errorf("%s while loading: %d %s, want %d and %s", c.path, rec.status, rec.body.String(), c.status, c.want)
		}
	}
}

// TestDrain: on shutdown /ready turns 503 (draining) while /health stays
// 200, a new request is refused with 503 and a reason (the listener is
// still open), the running stream goes on, and Serve returns as soon as it
// ends, before the grace period.
func TestDrain(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 4096, grace: time.Hour})
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/ready"); code != 200 || !strings.Contains(body, `"ready"`) {
		t.Fatalf("/ready before the drain: %d %s", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := ts.stream(t, ctx, "/v1/completions", `{"model":"stories","prompt":"Once","max_tokens":4000,"stream":true,"temperature":1,"ignore_eos":true}`)
	defer long.Body.Close()
	readStream(t, long.Body, func(fullResponse) bool { return false })
	ts.stop()
	for {
		code, body := get("/ready")
		if code == 503 {
			if !strings.Contains(body, "draining") {
				t.Errorf("/ready while draining: %s, want the reason", body)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, body := get("/health"); code != 200 || !strings.Contains(body, `"status":"ok","ready":false,"reason":"draining`) {
		t.Errorf("/health while draining: %d %s", code, body)
	}
	code, data := ts.post(t, "/v1/completions", testKey, []byte(`{"model":"stories","prompt":"hi","max_tokens":2}`))
	if code != 503 || !strings.Contains(string(data), "draining") {
		t.Errorf("a new request while draining: %d %s", code, data)
	}
	select {
	case err := <-ts.done:
		ts.done <- err
		t.Fatalf("Serve returned with a stream running, an hour before the grace ends: %v", err)
	default:
	}
	// The stream still runs: another chunk comes.
	if r := readStream(t, long.Body, func(fullResponse) bool { return false }); r.done {
		t.Fatalf("the stream ended at the drain")
	}
	cancel()
	select {
	case err := <-ts.done:
		ts.done <- err
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return once the last request ended")
	}
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(s int) { r.status = s }

// TestShutdown: a running stream finishes within the grace period; one that
// outlives it is cut, and Serve returns either way.
func TestShutdown(t *testing.T) {
	ts := startServer(t, opts{parallel: 2, ctx: 4096, grace: 300 * time.Millisecond})
	short := ts.stream(t, context.Background(), "/v1/completions", `{"model":"stories","prompt":"Once","max_tokens":20,"stream":true,"temperature":0}`)
	long := ts.stream(t, context.Background(), "/v1/completions", `{"model":"stories","prompt":"Once","max_tokens":4000,"stream":true,"temperature":1}`)
	readStream(t, long.Body, func(fullResponse) bool { return false })
	start := time.Now()
	ts.stop()
	var shortRes, longRes streamResult
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); shortRes = readStream(t, short.Body, nil) }()
	go func() { defer wg.Done(); longRes = readStream(t, long.Body, nil) }()
	select {
	case err := <-ts.done:
		ts.done <- err // for Cleanup
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return 10 s after shutdown began")
	}
	wg.Wait()
	short.Body.Close()
	long.Body.Close()
	if !shortRes.done || shortRes.finish != "length" {
		t.Errorf("short stream did not finish during the grace period: %+v", shortRes.finish)
	}
	if longRes.done {
		t.Errorf("a 4000-token stream finished within the grace period (%v)", time.Since(start))
	}
	if _, err := http.Get(ts.url + "/health"); err == nil {
		t.Error("server still accepting after shutdown")
	}
}

// TestTimings: the OpenAI-compatible replies carry llama-server's timings
// (whole, and on a stream's last chunk) that agree with the usage, for the
// chat UIs written for llama-server.
func TestTimings(t *testing.T) {
	ts := startServer(t, opts{parallel: 1, ctx: 256})
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"stories","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":12,"temperature":0}`},
		{"/v1/completions", `{"model":"stories","prompt":"Once upon a time","max_tokens":12,"temperature":0}`},
	} {
		check := func(what string, r fullResponse) {
			tm, u := r.Timings, r.Usage
			if tm == nil || u == nil {
				t.Fatalf("%s %s: timings %v, usage %v", c.path, what, tm, u)
			}
			if tm.PredictedN != u.CompletionTokens || tm.PromptN+tm.CacheN != u.PromptTokens || tm.CacheN != u.PromptTokensDetails.CachedTokens {
				t.Errorf("%s %s: timings %+v disagree with usage %+v", c.path, what, *tm, *u)
			}
			if tm.PromptMS <= 0 || tm.PredictedMS <= 0 || tm.PredictedPerSecond <= 0 {
				t.Errorf("%s %s: timings %+v: times and rates must be positive", c.path, what, *tm)
			}
		}
		code, data := ts.post(t, c.path, testKey, []byte(c.body))
		if code != 200 {
			t.Fatalf("%s: %d %s", c.path, code, data)
		}
		check("whole", decode(t, data))
		resp := ts.stream(t, context.Background(), c.path, strings.Replace(c.body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
		st := readStream(t, resp.Body, nil)
		resp.Body.Close()
		last := st.chunks[len(st.chunks)-1]
		check("streamed", last)
		for i, ch := range st.chunks[:len(st.chunks)-1] {
			if ch.Timings != nil {
				t.Errorf("%s: chunk %d of %d carries timings; the last one only", c.path, i, len(st.chunks))
			}
		}
	}
}
