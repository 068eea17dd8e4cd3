package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/model"
	"braid/internal/tokenizer"
)

// extraServer is stories260K served with embeddings, an access log and a
// cluster description, without an API key.
type extraServer struct {
	*testServer
	m      *model.Model
	embed  *LocalEmbedder
	logMu  sync.Mutex
	access []AccessEntry
}

func startExtra(t *testing.T, parallel, ctx int) *extraServer {
	t.Helper()
	f, m := openModel(t)
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := m.NewCache(model.CacheSize{Positions: parallel * ctx, Ctx: ctx})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := engine.NewScheduler(engine.NewLocal(m, cache), engine.SchedulerConfig{Parallel: parallel, Context: ctx, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	es := &extraServer{m: m, embed: NewLocalEmbedder(f, 2, ctx, 7, false)} // batch 7: inputs span several chunks
	t.Cleanup(es.embed.Close)
	srv := New(Config{Model: "stories", Logf: t.Logf, ModelPath: storiesPath, AccessLog: func(e AccessEntry) {
		es.logMu.Lock()
		es.access = append(es.access, e)
		es.logMu.Unlock()
	}})
	srv.SetReady(&Backend{Sched: sched, Tok: tok, Vocab: m.Cfg.Vocab, Embed: es.embed, LoadMode: "read", LoadReason: "--load-mode read",
		Cluster: &ClusterInfo{Split: "none", SplitBy: "one node", Ranks: []RankInfo{{Addr: "local", Layers: [2]int{0, m.Cfg.Layers}, TPSize: 1, Weights: 1000}}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, 5*time.Second) }()
	es.testServer = &testServer{url: "http://" + ln.Addr().String(), srv: srv, sched: sched, tok: tok, stop: stop, done: done}
	t.Cleanup(func() {
		stop()
		<-done
		stopSched()
		<-schedDone
	})
	return es
}

// call posts body (or GETs when body is "") and decodes the JSON answer.
func (es *extraServer) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, es.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if len(data) > 0 && data[0] == '{' {
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s %s: not JSON (%v): %s", method, path, err, data)
		}
	} else {
		v = map[string]any{"raw": string(data)}
	}
	return resp.StatusCode, v
}

// wantError checks a 4xx answer that names param and says want.
func wantError(t *testing.T, what string, code int, v map[string]any, status int, param, want string) {
	t.Helper()
	e, _ := v["error"].(map[string]any)
	if code != status || e == nil {
		t.Errorf("%s: status %d, want %d: %v", what, code, status, v)
		return
	}
	if param != "" && e["param"] != param {
		t.Errorf("%s: param %v, want %q (%v)", what, e["param"], param, e["message"])
	}
	if msg, _ := e["message"].(string); !strings.Contains(msg, want) {
		t.Errorf("%s: message %q lacks %q", what, msg, want)
	}
}

func ints(v any) []int32 {
	var out []int32
	for _, x := range v.([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

func TestTokenizeDetokenize(t *testing.T) {
	es := startExtra(t, 2, 128)
	for _, text := range []string{"Once upon a time", "Hello, world! 123", "", "  two  spaces", "é ü 日本"} {
		body, _ := json.Marshal(map[string]any{"content": text})
		code, v := es.call(t, "POST", "/tokenize", string(body))
		if code != 200 {
			t.Fatalf("tokenize %q: %d %v", text, code, v)
		}
		got := append([]int32{}, ints(v["tokens"])...)
		if want := es.tok.Encode(text, false, true); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("tokenize %q: %v, want %v", text, got, want)
		}
		body, _ = json.Marshal(map[string]any{"tokens": got})
		code, v = es.call(t, "POST", "/detokenize", string(body))
		if code != 200 || v["content"] != text {
			t.Errorf("detokenize(tokenize(%q)) = %d %q", text, code, v["content"])
		}
		// pieces: each a string (or bytes) whose concatenation is the text
		body, _ = json.Marshal(map[string]any{"content": text, "with_pieces": true})
		_, v = es.call(t, "POST", "/tokenize", string(body))
		var joined []byte
		for i, p := range v["tokens"].([]any) {
			pm := p.(map[string]any)
			if int32(pm["id"].(float64)) != got[i] {
				t.Errorf("%q: piece %d has id %v, want %d", text, i, pm["id"], got[i])
			}
			switch s := pm["piece"].(type) {
			case string:
				joined = append(joined, s...)
			case []any:
				for _, b := range s {
					joined = append(joined, byte(b.(float64)))
				}
			}
		}
		if strings.TrimPrefix(string(joined), " ") != text {
			t.Errorf("%q: pieces join to %q", text, joined)
		}
	}
	_, v := es.call(t, "POST", "/tokenize", `{"content":"Hi","add_special":true}`)
	if ids := ints(v["tokens"]); len(ids) == 0 || ids[0] != es.tok.BOS() {
		t.Errorf("add_special: %v does not start with BOS %d", ids, es.tok.BOS())
	}
	code, v := es.call(t, "POST", "/tokenize", `{}`)
	wantError(t, "tokenize without content", code, v, 400, "content", "content")
	code, v = es.call(t, "POST", "/tokenize", `{"content":5}`)
	wantError(t, "tokenize content 5", code, v, 400, "content", "must be a string")
	code, v = es.call(t, "POST", "/detokenize", `{"tokens":[1,-3]}`)
	wantError(t, "detokenize -3", code, v, 400, "tokens", "tokens[1] = -3 is outside the vocabulary [0, 512)")
	code, v = es.call(t, "POST", "/detokenize", `{"tokens":"x"}`)
	wantError(t, "detokenize string", code, v, 400, "tokens", "must be an array")
	code, v = es.call(t, "GET", "/tokenize", "")
	wantError(t, "GET /tokenize", code, v, 405, "", "GET is not allowed")
}

func TestPropsAndSlots(t *testing.T) {
	es := startExtra(t, 3, 128)
	code, v := es.call(t, "GET", "/props", "")
	if code != 200 || v["total_slots"] != 3.0 || v["bos_token"] != "<s>" || v["model_path"] != storiesPath || v["embeddings"] != true {
		t.Errorf("/props: %d %v", code, v)
	}
	if v["load_mode"] != "read" || v["load_mode_reason"] != "--load-mode read" {
		t.Errorf("/props says the weights are held %v (%v), want the backend's read (--load-mode read)", v["load_mode"], v["load_mode_reason"])
	}
	if s := v["default_generation_settings"].(map[string]any); s["n_ctx"] != 128.0 {
		t.Errorf("/props n_ctx: %v", s)
	} else if p := s["params"].(map[string]any); fmt.Sprint(p["min_p"]) != "0.05" {
		t.Errorf("/props min_p %v: want 0.05 as written", p["min_p"])
	}
	code, v = es.call(t, "GET", "/slots", "")
	var slots []map[string]any
	json.Unmarshal([]byte(v["raw"].(string)), &slots)
	if code != 200 || len(slots) != 3 || slots[2]["id"] != 2.0 || slots[0]["n_ctx"] != 128.0 {
		t.Errorf("/slots: %d %v", code, v)
	}
}

// nativeStream reads /completion's data-only events.
func nativeStream(t *testing.T, es *extraServer, body string) (string, []int32, map[string]any) {
	t.Helper()
	resp, err := http.Post(es.url+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, data)
	}
	var text string
	var toks []int32
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if ev["stop"] == true {
			return text, toks, ev
		}
		text += ev["content"].(string)
		toks = append(toks, ints(ev["tokens"])...)
	}
	t.Fatal("the stream ended without a stop event")
	return "", nil, nil
}

func TestNativeCompletion(t *testing.T) {
	es := startExtra(t, 2, 128)
	code, whole := es.call(t, "POST", "/completion", `{"prompt":"Once upon a time","n_predict":16,"temperature":0}`)
	if code != 200 {
		t.Fatalf("/completion: %d %v", code, whole)
	}
	content := whole["content"].(string)
	toks := ints(whole["tokens"])
	if whole["stop"] != true || whole["stop_type"] != "limit" || whole["tokens_predicted"] != 16.0 || len(toks) != 16 || content == "" {
		t.Errorf("/completion: %v", whole)
	}
	if got := es.tok.NewDecoder(); true {
		var s string
		for _, id := range toks {
			s += got.Add(id)
		}
		if s+got.Flush() != content {
			t.Errorf("tokens decode to %q, content %q", s, content)
		}
	}
	tm := whole["timings"].(map[string]any)
	if tm["predicted_n"] != 16.0 || tm["prompt_n"].(float64) < 1 || tm["predicted_per_second"].(float64) <= 0 {
		t.Errorf("timings %v", tm)
	}
	// streamed: the same text and tokens
	text, stoks, final := nativeStream(t, es, `{"prompt":"Once upon a time","n_predict":16,"temperature":0,"stream":true}`)
	if text != content || !slices.Equal(stoks, toks) || final["tokens_predicted"] != 16.0 {
		t.Errorf("streamed %q %v (%v), whole %q %v", text, stoks, final, content, toks)
	}
	// a stop word ends it, and is not in the text
	word := strings.Fields(content)[2]
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 16, "temperature": 0, "stop": []string{word}})
	_, v := es.call(t, "POST", "/completion", string(body))
	if v["stop_type"] != "word" || v["stopping_word"] != word || strings.Contains(v["content"].(string), word) || !strings.HasPrefix(content, v["content"].(string)) {
		t.Errorf("stop %q: %v", word, v)
	}
	// token prompt, n_predict -1 runs to the end of generation or the context
	_, v = es.call(t, "POST", "/completion", `{"prompt":[1,403,407],"n_predict":-1,"temperature":0}`)
	if st := v["stop_type"]; st != "eos" && !(st == "limit" && v["tokens_predicted"] == 125.0) {
		t.Errorf("n_predict -1: %v", v)
	}
	for _, c := range []struct{ body, param, want string }{
		{`{"prompt":"x","n_predict":-2}`, "n_predict", "n_predict = -2"},
		{`{"prompt":"x","temperature":-1}`, "temperature", "temperature = -1 is out of range [0, 2]"},
		{`{"n_predict":3}`, "prompt", "prompt is required"},
		{`{"prompt":[1,9999]}`, "prompt", "prompt token 1 is 9999, outside the vocabulary [0, 512)"},
		{`{"prompt":"` + strings.Repeat("Once upon a time ", 40) + `"}`, "prompt", "the context holds 128"},
		{`{"prompt":"x","model":"other"}`, "model", `model "other" does not exist`},
		{`{"prompt":"x","n_probs":3}`, "n_probs", "n_probs"},
		{`{"prompt":"x","top_k":"many"}`, "top_k", `"top_k" must be an integer`},
	} {
		code, v := es.call(t, "POST", "/completion", c.body)
		status := 400
		if c.param == "model" {
			status = 404
		}
		wantError(t, c.body, code, v, status, c.param, c.want)
	}
}

// oracleEmbedding is the mean-pooled, normalised final hidden state of ids,
// computed one token per step on a fresh cache: another path than the
// embedder's batches.
func oracleEmbedding(t *testing.T, m *model.Model, ids []int32) []float32 {
	t.Helper()
	cache, err := m.NewCache(model.CacheSize{Positions: 256, Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	E := m.Cfg.Embd
	sum := make([]float64, E)
	logits, hidden := make([]float32, m.Cfg.Vocab), make([]float32, E)
	for p, id := range ids {
		var b model.Batch
		b.Add(id, int32(p), 0, true)
		if err := m.ForwardHidden(cache, &b, logits, hidden); err != nil {
			t.Fatal(err)
		}
		for k, v := range hidden {
			sum[k] += float64(v)
		}
	}
	var norm float64
	for k := range sum {
		sum[k] /= float64(len(ids))
		norm += sum[k] * sum[k]
	}
	out := make([]float32, E)
	for k := range sum {
		out[k] = float32(sum[k] / math.Sqrt(norm))
	}
	return out
}

func vec(v any) []float32 {
	var out []float32
	for _, x := range v.([]any) {
		out = append(out, float32(x.(float64)))
	}
	return out
}

func closeVec(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol {
			return false
		}
	}
	return true
}

func TestEmbeddings(t *testing.T) {
	es := startExtra(t, 2, 128)
	texts := []string{"Once upon a time there was a little dog named Max.", "Hi", "The cat sat on the mat and looked at the big red ball."}
	body, _ := json.Marshal(map[string]any{"model": "stories", "input": texts})
	code, v := es.call(t, "POST", "/v1/embeddings", string(body))
	if code != 200 {
		t.Fatalf("%d %v", code, v)
	}
	data := v["data"].([]any)
	if len(data) != 3 || v["object"] != "list" {
		t.Fatalf("%v", v)
	}
	total := 0
	for i, d := range data {
		dm := d.(map[string]any)
		e := vec(dm["embedding"])
		if dm["index"] != float64(i) || len(e) != es.m.Cfg.Embd {
			t.Errorf("item %d: index %v, %d values", i, dm["index"], len(e))
		}
		var n float64
		for _, x := range e {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-4 {
			t.Errorf("item %d: norm² %g", i, n)
		}
		ids := es.tok.Encode(texts[i], true, false)
		total += len(ids)
		if want := oracleEmbedding(t, es.m, ids); !closeVec(e, want, 2e-4) {
			t.Errorf("item %d (%q) differs from the one-token-at-a-time mean of the hidden states", i, texts[i])
		}
		// alone, as token ids: the same vector
		one, _ := json.Marshal(map[string]any{"model": "stories", "input": ids})
		_, v1 := es.call(t, "POST", "/v1/embeddings", string(one))
		if alone := vec(v1["data"].([]any)[0].(map[string]any)["embedding"]); !closeVec(alone, e, 1e-6) {
			t.Errorf("item %d alone as tokens differs from in the batch", i)
		}
	}
	if u := v["usage"].(map[string]any); u["prompt_tokens"] != float64(total) {
		t.Errorf("usage %v, want %d prompt tokens", u, total)
	}
	if closeVec(vec(data[0].(map[string]any)["embedding"]), vec(data[2].(map[string]any)["embedding"]), 1e-3) {
		t.Error("different texts, the same embedding")
	}
	// base64: the same floats, little-endian
	_, b64 := es.call(t, "POST", "/v1/embeddings", `{"model":"stories","input":"Hi","encoding_format":"base64"}`)
	raw, err := base64.StdEncoding.DecodeString(b64["data"].([]any)[0].(map[string]any)["embedding"].(string))
	if err != nil {
		t.Fatal(err)
	}
	fl := make([]float32, len(raw)/4)
	for i := range fl {
		fl[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if !closeVec(fl, vec(data[1].(map[string]any)["embedding"]), 1e-6) {
		t.Error("base64 embedding differs from the float one")
	}
	for _, c := range []struct{ body, param, want string }{
		{`{"model":"stories"}`, "input", "input is required"},
		{`{"model":"stories","input":[]}`, "input", "empty list"},
		{`{"model":"stories","input":{"a":1}}`, "input", "input must be a string"},
		{`{"model":"stories","input":[[1,2],[]]}`, "input", "input[1] is empty"},
		{`{"model":"stories","input":[5,600]}`, "input", "input[0] token 1 is 600, outside the vocabulary [0, 512)"},
		{`{"model":"stories","input":"x","dimensions":8}`, "dimensions", "dimensions = 8: this model's embeddings have 64"},
		{`{"model":"stories","input":"x","encoding_format":"hex"}`, "encoding_format", `"hex"`},
		{`{"model":"stories","input":"` + strings.Repeat("dog ", 200) + `"}`, "input", "at most 128 fit"},
	} {
		code, v := es.call(t, "POST", "/v1/embeddings", c.body)
		wantError(t, c.body, code, v, 400, c.param, c.want)
	}
}

func TestEmbeddingsUnavailable(t *testing.T) {
	ts := startServer(t, opts{parallel: 1, ctx: 64})
	code, data := ts.post(t, "/v1/embeddings", testKey, []byte(`{"model":"stories","input":"x"}`))
	if code != 501 || !bytes.Contains(data, []byte("does not compute embeddings")) {
		t.Errorf("no embedder: %d %s", code, data)
	}
}

// responseEvent is one event of a streamed response.
type responseEvent struct {
	name string
	data map[string]any
}

func (es *extraServer) responseStream(t *testing.T, body string) []responseEvent {
	t.Helper()
	resp, err := http.Post(es.url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return readResponseEvents(t, resp)
}

func readResponseEvents(t *testing.T, resp *http.Response) []responseEvent {
	t.Helper()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var evs []responseEvent
	var name string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event %s: %v: %s", name, err, d)
			}
			if m["type"] != name {
				t.Errorf("event %q carries type %v", name, m["type"])
			}
			evs = append(evs, responseEvent{name, m})
		}
	}
	return evs
}

// checkResponseEvents checks the order and the bookkeeping of a stream and
// returns the final response and the text and reasoning the deltas carry.
func checkResponseEvents(t *testing.T, evs []responseEvent) (final map[string]any, text, reasoning string) {
	t.Helper()
	if len(evs) < 4 || evs[0].name != "response.created" || evs[1].name != "response.in_progress" {
		t.Fatalf("stream starts %v", evs)
	}
	for i, e := range evs {
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v", i, e.name, e.data["sequence_number"])
		}
	}
	open := map[float64]string{} // output index -> item type
	args := map[float64]string{} // a function call's arguments from its deltas
	next := 0.0                  // the output index the next item takes
	for _, e := range evs {
		switch e.name {
		case "response.output_item.added":
			item := e.data["item"].(map[string]any)
			if e.data["output_index"] != next {
				t.Errorf("item %v added at output_index %v, want %v", item["type"], e.data["output_index"], next)
			}
			next++
			if len(open) != 0 {
				t.Errorf("item %v added while %v is open", item["type"], open)
			}
			open[e.data["output_index"].(float64)] = item["type"].(string)
		case "response.function_call_arguments.delta":
			i := e.data["output_index"].(float64)
			if open[i] != "function_call" {
				t.Errorf("arguments delta for output %v, which is %q", i, open[i])
			}
			args[i] += e.data["delta"].(string)
		case "response.function_call_arguments.done":
			if i := e.data["output_index"].(float64); e.data["arguments"] != args[i] {
				t.Errorf("function_call_arguments.done %q, deltas %q", e.data["arguments"], args[i])
			}
		case "response.output_text.delta":
			if open[e.data["output_index"].(float64)] != "message" {
				t.Errorf("text delta for output %v, which is %q", e.data["output_index"], open[e.data["output_index"].(float64)])
			}
			text += e.data["delta"].(string)
		case "response.reasoning_text.delta":
			if open[e.data["output_index"].(float64)] != "reasoning" {
				t.Errorf("reasoning delta for output %v", e.data["output_index"])
			}
			reasoning += e.data["delta"].(string)
		case "response.output_text.done":
			if e.data["text"] != text {
				t.Errorf("output_text.done %q, deltas %q", e.data["text"], text)
			}
		case "response.reasoning_text.done":
			if e.data["text"] != reasoning {
				t.Errorf("reasoning_text.done %q, deltas %q", e.data["text"], reasoning)
			}
		case "response.output_item.done":
			i := e.data["output_index"].(float64)
			if item := e.data["item"].(map[string]any); item["type"] == "function_call" && (item["arguments"] != args[i] || item["status"] != "completed") {
				t.Errorf("function call done as %v, deltas %q", item, args[i])
			}
			delete(open, i)
		}
	}
	if len(open) != 0 {
		t.Errorf("items left open: %v", open)
	}
	last := evs[len(evs)-1]
	if last.name != "response.completed" && last.name != "response.incomplete" {
		t.Fatalf("stream ends with %s", last.name)
	}
	return last.data["response"].(map[string]any), text, reasoning
}

// outputText is the text of a response's message items.
func responseText(r map[string]any) string {
	var s string
	for _, it := range r["output"].([]any) {
		im := it.(map[string]any)
		if im["type"] != "message" {
			continue
		}
		for _, c := range im["content"].([]any) {
			s += c.(map[string]any)["text"].(string)
		}
	}
	return s
}

func TestResponses(t *testing.T) {
	es := startExtra(t, 2, 256)
	// the same request as a chat completion gives the same text
	code, chatR := es.call(t, "POST", "/v1/chat/completions", `{"model":"stories","messages":[{"role":"system","content":"Tell a story."},{"role":"user","content":"Once upon a time"}],"max_tokens":12,"temperature":0}`)
	if code != 200 {
		t.Fatal(chatR)
	}
	want := chatR["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	code, r := es.call(t, "POST", "/v1/responses", `{"model":"stories","instructions":"Tell a story.","input":"Once upon a time","max_output_tokens":12,"temperature":0}`)
	if code != 200 || r["object"] != "response" || r["output_text"] != want || responseText(r) != want {
		t.Fatalf("response %d %v, want text %q", code, r, want)
	}
	if r["status"] != "incomplete" || r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Errorf("status %v %v", r["status"], r["incomplete_details"])
	}
	u := r["usage"].(map[string]any)
	cu := chatR["usage"].(map[string]any)
	if u["input_tokens"] != cu["prompt_tokens"] || u["output_tokens"] != 12.0 || u["total_tokens"] != u["input_tokens"].(float64)+12 {
		t.Errorf("usage %v, chat's %v", u, cu)
	}
	// input as items with content parts: the same prompt
	_, r2 := es.call(t, "POST", "/v1/responses", `{"model":"stories","instructions":"Tell a story.","input":[{"role":"user","content":[{"type":"input_text","text":"Once upon "},{"type":"input_text","text":"a time"}]}],"max_output_tokens":12,"temperature":0}`)
	if r2["output_text"] != want {
		t.Errorf("items input: %q, want %q", r2["output_text"], want)
	}
	// streamed: the same text, the events in order
	evs := es.responseStream(t, `{"model":"stories","instructions":"Tell a story.","input":"Once upon a time","max_output_tokens":12,"temperature":0,"stream":true}`)
	final, text, _ := checkResponseEvents(t, evs)
	if text != want || responseText(final) != want || final["status"] != "incomplete" {
		t.Errorf("streamed %q (final %v), want %q", text, final, want)
	}

	// previous_response_id continues the conversation: the prompt is the
	// chat of both turns
	id := r["id"].(string)
	code, r3 := es.call(t, "POST", "/v1/responses", `{"model":"stories","previous_response_id":"`+id+`","input":"And then?","max_output_tokens":8,"temperature":0}`)
	if code != 200 {
		t.Fatalf("%d %v", code, r3)
	}
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": "Once upon a time"}, {"role": "assistant", "content": want}, {"role": "user", "content": "And then?"}})
	_, chat2 := es.call(t, "POST", "/v1/chat/completions", `{"model":"stories","messages":`+string(msgs)+`,"max_tokens":8,"temperature":0}`)
	if got, w := r3["usage"].(map[string]any)["input_tokens"], chat2["usage"].(map[string]any)["prompt_tokens"]; got != w {
		t.Errorf("second turn: %v input tokens, the two-turn chat has %v", got, w)
	}
	if r3["output_text"] != chat2["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] || r3["previous_response_id"] != id {
		t.Errorf("second turn %v vs chat %v", r3["output_text"], chat2["choices"])
	}
	// stored responses can be read and deleted; store false is not kept
	code, got := es.call(t, "GET", "/v1/responses/"+id, "")
	if code != 200 || got["id"] != id || responseText(got) != want {
		t.Errorf("GET stored: %d %v", code, got)
	}
	code, _ = es.call(t, "DELETE", "/v1/responses/"+id, "")
	if code != 200 {
		t.Errorf("DELETE: %d", code)
	}
	code, v := es.call(t, "GET", "/v1/responses/"+id, "")
	wantError(t, "GET deleted", code, v, 404, "", "no stored response")
	code, v = es.call(t, "POST", "/v1/responses", `{"model":"stories","previous_response_id":"`+id+`","input":"x"}`)
	wantError(t, "deleted previous_response_id", code, v, 404, "previous_response_id", id)
	_, r4 := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":"x","store":false,"max_output_tokens":2}`)
	code, _ = es.call(t, "GET", "/v1/responses/"+r4["id"].(string), "")
	if code != 404 || r4["store"] != false {
		t.Errorf("store false: GET %d, store %v", code, r4["store"])
	}

	for _, c := range []struct{ body, param, want string }{
		{`{"model":"stories"}`, "input", "input is required"},
		{`{"model":"stories","input":[]}`, "input", "empty list"},
		{`{"model":"stories","input":[{"role":"robot","content":"x"}]}`, "input[0].role", `"robot"`},
		{`{"model":"stories","input":[{"type":"function_call_output","call_id":"a","output":"x"}]}`, "input[0].call_id", `"a" answers no function_call`},
		{`{"model":"stories","input":[{"type":"item_reference","id":"x"}]}`, "input[0].type", `"item_reference" is not supported`},
		{`{"model":"stories","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content", "input_image"},
		{`{"model":"stories","input":"x","max_output_tokens":0}`, "max_output_tokens", "max_output_tokens = 0"},
		{`{"model":"stories","input":"x","temperature":3}`, "temperature", "temperature = 3 is out of range"},
		{`{"model":"stories","input":"x","background":true}`, "background", "background: true is not supported"},
		{`{"model":"stories","input":"x","truncation":"auto"}`, "truncation", `"auto" is not supported`},
		{`{"model":"stories","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type", `"yaml"`},
		{`{"model":"stories","input":"x","reasoning":{"effort":"extreme"}}`, "reasoning.effort", "extreme"},
		{`{"model":"stories","input":"` + strings.Repeat("Once upon a time ", 80) + `"}`, "input", "the context holds 256"},
	} {
		code, v := es.call(t, "POST", "/v1/responses", c.body)
		wantError(t, c.body, code, v, 400, c.param, c.want)
	}
}

// TestResponsesJSONSchema: text.format constrains the output as
// response_format does.
func TestResponsesJSONSchema(t *testing.T) {
	es := startExtra(t, 1, 256)
	_, r := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":"x","temperature":1,"seed":3,"max_output_tokens":100,
		"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}}`)
	var obj map[string]int
	if err := json.Unmarshal([]byte(r["output_text"].(string)), &obj); r["status"] == "completed" && err != nil {
		t.Errorf("output %q is not the schema's JSON: %v", r["output_text"], err)
	}
	if f := r["text"].(map[string]any)["format"].(map[string]any); f["type"] != "json_schema" || f["name"] != "n" {
		t.Errorf("text.format echoed as %v", f)
	}
}

// TestResponsesReasoning: a reasoning model's thinking is a reasoning item
// before the message, whole and streamed.
func TestResponsesReasoning(t *testing.T) {
	for _, c := range []struct{ template, output string }{
		{"Qwen-Qwen3-0.6B", "<think>\nThe user says hi.\n</think>\n\nHello!"},
		{"openai-gpt-oss-120b", "<|channel|>analysis<|message|>The user says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!"},
	} {
		t.Run(c.template, func(t *testing.T) {
			ss := startScripted(t, c.template)
			ss.say(c.output)
			es := &extraServer{testServer: &testServer{url: ss.url}}
			code, r := es.call(t, "POST", "/v1/responses", `{"model":"m","input":"Hi","reasoning":{"effort":"low"}}`)
			if code != 200 {
				t.Fatalf("%d %v", code, r)
			}
			out := r["output"].([]any)
			if len(out) != 2 || out[0].(map[string]any)["type"] != "reasoning" || out[1].(map[string]any)["type"] != "message" {
				t.Fatalf("output %v", out)
			}
			rt := out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
			if strings.TrimSpace(rt) != "The user says hi." || r["output_text"] != "Hello!" {
				t.Errorf("reasoning %q, text %q", rt, r["output_text"])
			}
			if rtok := r["usage"].(map[string]any)["output_tokens_details"].(map[string]any)["reasoning_tokens"].(float64); rtok < 1 {
				t.Errorf("reasoning_tokens %v", rtok)
			}
			if c.template == "openai-gpt-oss-120b" && !strings.Contains(ss.prompt(), "Reasoning: low") {
				t.Errorf("reasoning.effort did not reach the template: %q", ss.prompt())
			}
			if _, ok := out[0].(map[string]any)["encrypted_content"]; ok {
				t.Errorf("encrypted_content without include: %v", out[0])
			}
			evs := es.responseStream(t, `{"model":"m","input":"Hi","stream":true}`)
			final, text, reasoning := checkResponseEvents(t, evs)
			if text != "Hello!" || strings.TrimSpace(reasoning) != "The user says hi." || len(final["output"].([]any)) != 2 {
				t.Errorf("streamed text %q reasoning %q final %v", text, reasoning, final["output"])
			}
			// A stateless client's turn (the Codex CLI's): store false,
			// the reasoning asked back as encrypted_content, then the
			// whole output sent again as the next turn's input.
			ss.say(c.output)
			code, r = es.call(t, "POST", "/v1/responses", `{"model":"m","input":"Hi","store":false,"include":["reasoning.encrypted_content"]}`)
			if code != 200 {
				t.Fatalf("include reasoning.encrypted_content: %d %v", code, r)
			}
			item := r["output"].([]any)[0].(map[string]any)
			enc, _ := item["encrypted_content"].(string)
			raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(enc, "braid-r1:"))
			if !strings.HasPrefix(enc, "braid-r1:") || err != nil || strings.TrimSpace(string(raw)) != "The user says hi." {
				t.Errorf("encrypted_content %q: want the reasoning, opaque", enc)
			}
			ss.say(c.output)
			evs = es.responseStream(t, `{"model":"m","input":"Hi","stream":true,"store":false,"include":["reasoning.encrypted_content"]}`)
			final, _, _ = checkResponseEvents(t, evs)
			if fi := final["output"].([]any)[0].(map[string]any); fi["encrypted_content"] != enc {
				t.Errorf("streamed: encrypted_content %v, whole %q", fi["encrypted_content"], enc)
			}
			next, _ := json.Marshal(append(append([]any{map[string]any{"role": "user", "content": "Hi"}}, r["output"].([]any)...),
				map[string]any{"role": "user", "content": "And then?"}))
			ss.say(c.output)
			if code, r := es.call(t, "POST", "/v1/responses", `{"model":"m","store":false,"include":["reasoning.encrypted_content"],"input":`+string(next)+`}`); code != 200 {
				t.Errorf("the output sent back as input: %d %v", code, r)
			}
		})
	}
}

// TestAccessLog: one entry per request with its tokens; polled GETs are
// not logged.
func TestAccessLog(t *testing.T) {
	es := startExtra(t, 1, 128)
	es.call(t, "POST", "/v1/completions", `{"model":"stories","prompt":"Once","max_tokens":5,"temperature":0}`)
	resp, err := http.Post(es.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	es.call(t, "POST", "/completion", `{"prompt":"Once","n_predict":3}`)
	es.call(t, "POST", "/v1/completions", `{"model":"nope","prompt":"x"}`)
	es.call(t, "GET", "/health", "")
	es.call(t, "GET", "/metrics", "")
	es.logMu.Lock()
	defer es.logMu.Unlock()
	if len(es.access) != 4 {
		t.Fatalf("%d entries: %+v", len(es.access), es.access)
	}
	for i, w := range []struct {
		path           string
		status, pt, ct int
	}{{"/v1/completions", 200, 2, 5}, {"/v1/chat/completions", 200, -2, 4}, {"/completion", 200, 2, 3}, {"/v1/completions", 404, -1, -1}} {
		e := es.access[i]
		if e.Path != w.path || e.Status != w.status || e.CompletionTokens != w.ct || (w.pt != -2 && e.PromptTokens != w.pt) || e.Method != "POST" || e.Duration <= 0 {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(es.access[0].JSON()), &j); err != nil || j["completion_tokens"] != 5.0 || j["path"] != "/v1/completions" {
		t.Errorf("JSON line %s: %v", es.access[0].JSON(), err)
	}
	if txt := es.access[3].Text(); !regexp.MustCompile(`^POST /v1/completions 404 - [\d.]+ ms `).MatchString(txt) {
		t.Errorf("text line %q", txt)
	}
}

// TestWebPage: the page and its files are served from the binary and load
// nothing from elsewhere; /cluster describes the ranks.
func TestWebPage(t *testing.T) {
	es := startExtra(t, 1, 128)
	for _, p := range []string{"/", "/web/app.js", "/web/style.css"} {
		resp, err := http.Get(es.url + p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(data) < 500 {
			t.Errorf("%s: %d, %d bytes", p, resp.StatusCode, len(data))
		}
		if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`).Find(data); m != nil {
			t.Errorf("%s refers to another site: %s", p, m)
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: CSP %q", p, resp.Header.Get("Content-Security-Policy"))
		}
	}
	code, v := es.call(t, "GET", "/web/nope.js", "")
	wantError(t, "missing file", code, v, 404, "", "no file")
	code, v = es.call(t, "GET", "/web/..%2fweb.go", "")
	if code != 404 {
		t.Errorf("path escape: %d", code)
	}
	code, v = es.call(t, "GET", "/cluster", "")
	ranks, _ := v["ranks"].([]any)
	if code != 200 || len(ranks) != 1 || v["split"] != "none" || v["ctx"] != 128.0 {
		t.Fatalf("/cluster: %d %v", code, v)
	}
	if r := ranks[0].(map[string]any); r["addr"] != "local" || r["mem_available_bytes"].(float64) <= 0 {
		t.Errorf("rank 0: %v", r)
	}
	code, v = es.call(t, "GET", "/nothing", "")
	wantError(t, "unknown path", code, v, 404, "", "no endpoint GET /nothing")
}
