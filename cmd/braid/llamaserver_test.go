package main

// llama-server parity, tried as its users would: the real braid serve
// binary on stories260K, started with llama-server's flags and
// environment, asked with llama-server's requests.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// llamaServe starts braid serve with args (and env added to the test's,
// LLAMA_ARG_* variables removed), on a free loopback port unless args
// hold --host or --listen, and waits for "ready:". It returns the base
// URL and the log lines seen until then.
func llamaServe(t *testing.T, env []string, args ...string) (string, []string) {
	t.Helper()
	needShared(t, stories)
	all := append([]string{"serve", "-m", stories, "--ctx-size", "512", "--parallel", "2"}, args...)
	if !slices.Contains(args, "--host") && !slices.Contains(args, "--listen") {
		all = append(all, "--listen", "127.0.0.1:0")
	}
	cmd := exec.Command(braidBin, all...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LLAMA_ARG_") && !strings.HasPrefix(e, "LLAMA_API_KEY=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	re := regexp.MustCompile(`listening on (https?)://(\S+)`)
	var seen []string
	url := ""
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve %v exited before ready:\n%s", args, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if m := re.FindStringSubmatch(l); m != nil && url == "" {
				url = m[1] + "://" + m[2]
			}
			if strings.Contains(l, "ready:") {
				go func() {
					for range lines {
					}
				}()
				return url, seen
			}
		case <-deadline:
			t.Fatalf("serve %v not ready:\n%s", args, strings.Join(seen, "\n"))
		}
	}
}

// call sends a request (a POST when body is not empty) and returns the
// status, the headers and the JSON body (nil when it is not JSON).
func call(t *testing.T, method, url, key, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, r)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var v map[string]any
	json.Unmarshal(data, &v)
	if v == nil {
		v = map[string]any{"_raw": string(data)}
	}
	return resp.StatusCode, resp.Header, v
}

// dig walks a JSON value by keys and indexes ("a.b.0.c").
func dig(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// TestLlamaSamplingDefaults: --temp, --top-k, --seed and -n set what a
// request that does not set them gets (and /props shows them, with each
// slot's n_ctx); a request's own fields win.
func TestLlamaSamplingDefaults(t *testing.T) {
	url, _ := llamaServe(t, nil, "--temp", "0", "--top-k", "5", "--seed", "42", "-n", "7", "--repeat-penalty", "1.1")
	_, _, props := call(t, "GET", url+"/props", "", "")
	for path, want := range map[string]any{
		"default_generation_settings.n_ctx":                 512.0,
		"default_generation_settings.params.temperature":    0.0,
		"default_generation_settings.params.top_k":          5.0,
		"default_generation_settings.params.seed":           42.0,
		"default_generation_settings.params.n_predict":      7.0,
		"default_generation_settings.params.repeat_penalty": 1.1,
		"total_slots": 2.0,
	} {
		if got := dig(props, path); got != want {
			t.Errorf("/props %s = %v, want %v", path, got, want)
		}
	}
	var first string
	for i := range 2 {
		code, _, r := call(t, "POST", url+"/completion", "", `{"prompt":"Once upon a time"}`)
		if code != 200 || num(r["tokens_predicted"]) != 7 {
			t.Fatalf("/completion without n_predict: %d, %v tokens, want 7: %v", code, r["tokens_predicted"], r)
		}
		if got := dig(r, "generation_settings.seed"); got != 42.0 {
			t.Errorf("generation_settings.seed %v, want the server's 42", got)
		}
		if i == 0 {
			first = r["content"].(string)
		} else if r["content"] != first {
			t.Errorf("greedy by default: %q then %q", first, r["content"])
		}
	}
	code, _, r := call(t, "POST", url+"/v1/completions", "", `{"prompt":"Once upon a time"}`)
	if code != 200 || num(dig(r, "usage.completion_tokens")) != 7 {
		t.Errorf("/v1/completions without max_tokens: %d %v", code, r)
	}
	// The request's own fields win.
	for _, c := range []struct{ path, body, field string }{
		{"/completion", `{"prompt":"Once","n_predict":3,"temperature":1.0,"seed":5}`, "tokens_predicted"},
		{"/v1/completions", `{"prompt":"Once","max_tokens":3,"temperature":1.0,"seed":5}`, "usage.completion_tokens"},
	} {
		code, _, r := call(t, "POST", url+c.path, "", c.body)
		if code != 200 || num(dig(r, c.field)) != 3 {
			t.Errorf("%s %s: %d %v", c.path, c.body, code, r)
		}
		if c.path == "/completion" && (dig(r, "generation_settings.temperature") != 1.0 || dig(r, "generation_settings.seed") != 5.0) {
			t.Errorf("generation_settings %v, want the request's temperature 1 and seed 5", r["generation_settings"])
		}
	}
	// Bad defaults are refused before loading.
	for _, args := range [][]string{{"--temp", "-1"}, {"--top-p", "0"}, {"-n", "-5"}, {"--keep", "-3"}} {
		_, e, code := braid(t, "", append([]string{"serve", "-m", stories, "--listen", "127.0.0.1:0"}, args...)...)
		if code != 2 || !strings.Contains(e, strings.TrimLeft(args[0], "-")) {
			t.Errorf("serve %v: exit %d: %s", args, code, e)
		}
	}
}

// TestLlamaEnvironment: LLAMA_ARG_* variables set the flags the command
// line does not give; the command line wins (either name of a switch);
// a variable braid does not read is refused, not ignored.
func TestLlamaEnvironment(t *testing.T) {
	url, _ := llamaServe(t, []string{"LLAMA_ARG_N_PREDICT=4", "LLAMA_ARG_CTX_SIZE=256", "LLAMA_ARG_ENDPOINT_SLOTS=false", "LLAMA_ARG_TEMPERATURE=0"})
	_, _, props := call(t, "GET", url+"/props", "", "")
	if n := dig(props, "default_generation_settings.n_ctx"); n != 512.0 {
		t.Errorf("n_ctx %v: --ctx-size 512 on the command line must win over LLAMA_ARG_CTX_SIZE=256", n)
	}
	if n := dig(props, "default_generation_settings.params.n_predict"); n != 4.0 {
		t.Errorf("n_predict %v, want LLAMA_ARG_N_PREDICT's 4", n)
	}
	if code, _, _ := call(t, "GET", url+"/slots", "", ""); code != 501 {
		t.Errorf("/slots with LLAMA_ARG_ENDPOINT_SLOTS=false: %d, want 501", code)
	}
	url, _ = llamaServe(t, []string{"LLAMA_ARG_ENDPOINT_SLOTS=false", "LLAMA_API_KEY=k9"}, "--slots")
	if code, _, _ := call(t, "GET", url+"/slots", "k9", ""); code != 200 {
		t.Errorf("/slots with --slots over LLAMA_ARG_ENDPOINT_SLOTS=false: %d, want 200", code)
	}
	if code, _, _ := call(t, "GET", url+"/v1/models", "", ""); code != 401 {
		t.Errorf("LLAMA_API_KEY: /v1/models without a key: %d, want 401", code)
	}
	for _, c := range []struct{ env, want string }{
		{"LLAMA_ARG_NO_SUCH_THING=1", "LLAMA_ARG_NO_SUCH_THING is set, but braid serve reads no such llama-server variable"},
		{"LLAMA_ARG_RPC=h:1", "LLAMA_ARG_RPC (--rpc) is llama-server's and braid serve does not implement it"},
		{"LLAMA_ARG_N_PARALLEL=many", `LLAMA_ARG_N_PARALLEL="many" (--parallel)`},
	} {
		cmd := exec.Command(braidBin, "serve", "-m", stories, "--listen", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), c.env)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v:\n%s", c.env, err, out)
		}
	}
}

// TestLlamaEndpointSwitches: --metrics, --slots, --no-ui and their
// opposites; braid serves /metrics by default (llama-server needs
// --metrics), and --no-metrics gives llama-server's 501.
func TestLlamaEndpointSwitches(t *testing.T) {
	for _, c := range []struct {
		args        []string
		path        string
		status      int
		wantMessage string
	}{
		{nil, "/metrics", 200, ""},
		{[]string{"--metrics"}, "/metrics", 200, ""},
		{[]string{"--no-metrics"}, "/metrics", 501, "--no-metrics"},
		{[]string{"--no-slots"}, "/slots", 501, "--no-slots"},
		{[]string{"--no-slots", "--slots"}, "/slots", 200, ""},
		{nil, "/", 200, ""},
		{[]string{"--no-ui"}, "/", 404, "--no-ui"},
		{[]string{"--no-webui"}, "/", 404, "--no-ui"},
	} {
		url, _ := llamaServe(t, nil, c.args...)
		code, _, v := call(t, "GET", url+c.path, "", "")
		msg, _ := dig(v, "error.message").(string)
		if code != c.status || !strings.Contains(msg, c.wantMessage) {
			t.Errorf("%v: GET %s: %d %q, want %d %q", c.args, c.path, code, msg, c.status, c.wantMessage)
		}
		if c.path != "/" {
			_, _, props := call(t, "GET", url+"/props", "", "")
			key := map[string]string{"/metrics": "endpoint_metrics", "/slots": "endpoint_slots"}[c.path]
			if props[key] != (c.status == 200) {
				t.Errorf("%v: /props %s = %v", c.args, key, props[key])
			}
		}
	}
}

// TestServeResponsesStore: --responses-store 0 keeps no response and a
// 404 says so; the default keeps them.
func TestServeResponsesStore(t *testing.T) {
	for _, c := range []struct {
		args  []string
		store bool
	}{{nil, true}, {[]string{"--responses-store", "0"}, false}, {[]string{"--responses-store", "2", "--responses-ttl", "10m"}, true}} {
		url, _ := llamaServe(t, nil, c.args...)
		code, _, r := call(t, "POST", url+"/v1/responses", "", `{"input":"Hi","max_output_tokens":2}`)
		if code != 200 || r["store"] != c.store {
			t.Fatalf("%v: %d %v", c.args, code, r)
		}
		code, _, v := call(t, "GET", url+"/v1/responses/"+r["id"].(string), "", "")
		msg, _ := dig(v, "error.message").(string)
		if c.store && code != 200 || !c.store && (code != 404 || !strings.Contains(msg, "--responses-store 0")) {
			t.Errorf("%v: GET %d %v", c.args, code, v)
		}
	}
}

// TestLlamaOnlyFlags: llama-server's flags that braid does not implement
// are refused naming them and why; the harmless ones are accepted with a
// note in the log; --mlock and --no-mmap become --load-mode.
func TestLlamaOnlyFlags(t *testing.T) {
	needShared(t, stories)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lora", "x.gguf"}, "--lora is llama-server's and braid serve does not implement it: LoRA adapters are not supported"},
		{[]string{"--rpc", "h:50052"}, "--rpc is llama-server's"},
		{[]string{"--props"}, "POST /props"},
		{[]string{"-ctk", "q8_0"}, "-ctk is llama-server's"},
		{[]string{"--hf-repo", "a/b"}, "-m ORG/NAME"},
		{[]string{"--chat-template", "llama3"}, `--chat-template "llama3": braid's only built-in template is chatml`},
		{[]string{"--chat-template", "x", "--chat-template-file", "y"}, "not both"},
		{[]string{"--context-shift", "--spec", "ngram"}, "--context-shift with --spec ngram is not supported"},
		{[]string{"--host", ""}, "give at least one address"},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		_, e, code := braid(t, "", append([]string{"serve", "-m", stories, "--listen", "127.0.0.1:0"}, c.args...)...)
		if c.args[0] == "--host" {
			_, e, code = braid(t, "", "serve", "-m", stories, "--host", "")
		}
		if code != 2 || !strings.Contains(e, c.want) || strings.Contains(e, "listening") {
			t.Errorf("serve %v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, e)
		}
	}
	_, log := llamaServe(t, nil, "-fa", "on", "-ngl", "99", "--cont-batching", "--threads-http", "4", "--mlock", "--no-jinja")
	text := strings.Join(log, "\n")
	for _, want := range []string{
		"note: -fa on: llama-server's, accepted and has no effect",
		"note: -ngl 99: llama-server's, accepted and has no effect: braid runs on CPUs",
		"note: --cont-batching: llama-server's, accepted and has no effect",
		"note: --threads-http 4:",
		"note: --mlock: llama-server's, taken as --load-mode mlock",
		"note: --no-jinja:",
		"weights: mlock",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q:\n%s", want, text)
		}
	}
}

// TestLlamaModelOptional: a request without a model gets the one served
// (its name in the reply); an alias of --alias is accepted; a wrong name
// is still refused.
func TestLlamaModelOptional(t *testing.T) {
	url, _ := llamaServe(t, nil, "--alias", "tiny,stories", "-n", "3")
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`, "tiny"},
		{"/v1/completions", `{"prompt":"Once"}`, "tiny"},
		{"/completion", `{"prompt":"Once"}`, "tiny"},
		{"/v1/responses", `{"input":"Once","max_output_tokens":3}`, "tiny"},
		{"/v1/completions", `{"prompt":"Once","model":"stories"}`, "stories"},
		{"/v1/completions", `{"prompt":"Once","model":"stories260K-F32"}`, "stories260K-F32"},
	} {
		code, _, r := call(t, "POST", url+c.path, "", c.body)
		if code != 200 || r["model"] != c.want {
			t.Errorf("%s %s: %d, model %v, want 200 and %q: %v", c.path, c.body, code, r["model"], c.want, r)
		}
	}
	code, _, r := call(t, "POST", url+"/v1/completions", "", `{"prompt":"Once","model":"gpt-4o"}`)
	if msg, _ := dig(r, "error.message").(string); code != 404 || !strings.Contains(msg, `"gpt-4o" does not exist`) {
		t.Errorf("a wrong model: %d %v", code, r)
	}
}

// TestLlamaModels: /models answers as /v1/models, with the aliases and
// tags given, and llama-server's meta.
func TestLlamaModels(t *testing.T) {
	url, _ := llamaServe(t, nil, "--alias", "tiny, stories", "--tags", "story,small")
	var bodies []map[string]any
	for _, path := range []string{"/models", "/v1/models"} {
		code, _, r := call(t, "GET", url+path, "", "")
		if code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		delete(dig(r, "data.0").(map[string]any), "created")
		bodies = append(bodies, r)
		for p, want := range map[string]any{"data.0.id": "tiny", "data.0.aliases.0": "stories", "data.0.aliases.1": "stories260K-F32",
			"data.0.tags.0": "story", "data.0.tags.1": "small", "data.0.meta.n_ctx": 512.0, "data.0.meta.n_vocab": 512.0,
			"data.0.meta.n_ctx_train": 128.0, "data.0.meta.n_embd": 64.0, "models.0.name": "tiny"} {
			if got := dig(r, p); got != want {
				t.Errorf("%s: %s = %v, want %v", path, p, got, want)
			}
		}
	}
	a, _ := json.Marshal(bodies[0])
	b, _ := json.Marshal(bodies[1])
	if !bytes.Equal(a, b) {
		t.Errorf("/models and /v1/models differ:\n%s\n%s", a, b)
	}
}

// TestLlamaAPIKey: --api-key takes a comma-separated list, beside
// --api-key-file.
func TestLlamaAPIKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(file, []byte("# keys\nfile-key\n"), 0o600)
	url, _ := llamaServe(t, nil, "--api-key", "k1,k2", "--api-key-file", file)
	for _, c := range []struct {
		key  string
		want int
	}{{"", 401}, {"k1", 200}, {"k2", 200}, {"file-key", 200}, {"k3", 401}} {
		if code, _, _ := call(t, "GET", url+"/v1/models", c.key, ""); code != c.want {
			t.Errorf("key %q: %d, want %d", c.key, code, c.want)
		}
	}
}

// TestLlamaHosts: --host with several comma-separated addresses listens
// on each, IPv4 and IPv6 at once.
func TestLlamaHosts(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, log := llamaServe(t, nil, "--host", "127.0.0.1,::1", "--port", strconv.Itoa(port))
	for _, base := range []string{fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://[::1]:%d", port)} {
		if code, _, v := call(t, "GET", base+"/health", "", ""); code != 200 || v["ready"] != true {
			t.Errorf("%s/health: %d %v", base, code, v)
		}
		if !strings.Contains(strings.Join(log, "\n"), strings.TrimPrefix(base, "http://")) {
			t.Errorf("the log does not name %s:\n%s", base, strings.Join(log, "\n"))
		}
	}
}

// TestLlamaCompletionFields: /completion's truncated, tokens_cached,
// timings.cache_n and generation_settings (ignore_eos as a -Inf bias on
// each end-of-generation token, null in JSON as llama-server writes it).
func TestLlamaCompletionFields(t *testing.T) {
	url, _ := llamaServe(t, nil, "--temp", "0")
	body := `{"prompt":"Once upon a time, there was","n_predict":20,"ignore_eos":true}`
	code, _, r := call(t, "POST", url+"/completion", "", body)
	if code != 200 {
		t.Fatalf("%d %v", code, r)
	}
	prompt := num(r["tokens_evaluated"])
	if r["truncated"] != false || num(r["tokens_predicted"]) != 20 || num(r["tokens_cached"]) != prompt+19 {
		t.Errorf("truncated %v, predicted %v, cached %v (prompt %v): want false, 20, prompt+19 (the last token is not fed)", r["truncated"], r["tokens_predicted"], r["tokens_cached"], prompt)
	}
	if dig(r, "timings.cache_n") != 0.0 || dig(r, "generation_settings.ignore_eos") != true {
		t.Errorf("timings %v, ignore_eos %v", r["timings"], dig(r, "generation_settings.ignore_eos"))
	}
	bias, _ := dig(r, "generation_settings.logit_bias").([]any)
	if len(bias) != 1 || dig(bias[0], "token") != 2.0 {
		t.Errorf("logit_bias %v, want [{bias: null, token: 2}] (stories260K's </s>)", bias)
	} else if b, ok := bias[0].(map[string]any)["bias"]; !ok || b != nil {
		t.Errorf("logit_bias bias %v, want null (-Inf)", b)
	}
	// The same prompt again reuses the cached prefix.
	_, _, r2 := call(t, "POST", url+"/completion", "", body)
	if n := num(dig(r2, "timings.cache_n")); n != prompt-1 || num(dig(r2, "timings.prompt_n")) != 1 || r2["content"] != r["content"] {
		t.Errorf("again: cache_n %v prompt_n %v (prompt %v), content %q vs %q", n, dig(r2, "timings.prompt_n"), prompt, r2["content"], r["content"])
	}
	// Without ignore_eos the bias is empty.
	_, _, r3 := call(t, "POST", url+"/completion", "", `{"prompt":"Once","n_predict":2}`)
	if b, _ := dig(r3, "generation_settings.logit_bias").([]any); b == nil || len(b) != 0 {
		t.Errorf("logit_bias without ignore_eos: %v", dig(r3, "generation_settings.logit_bias"))
	}
	// logit_bias itself is refused, not ignored.
	code, _, r4 := call(t, "POST", url+"/completion", "", `{"prompt":"Once","logit_bias":{"2":5}}`)
	if msg, _ := dig(r4, "error.message").(string); code != 400 || !strings.Contains(msg, "logit_bias is not supported") {
		t.Errorf("logit_bias: %d %v", code, r4)
	}
}

// TestLlamaMetrics: /metrics carries llama-server's Process-Start-Time-Unix
// header and its llamacpp: series beside braid's own, from the same counts.
func TestLlamaMetrics(t *testing.T) {
	before := time.Now().Unix()
	url, _ := llamaServe(t, nil)
	call(t, "POST", url+"/completion", "", `{"prompt":"Once upon a time","n_predict":9,"ignore_eos":true}`)
	code, h, v := call(t, "GET", url+"/metrics", "", "")
	if code != 200 {
		t.Fatal(code)
	}
	start, err := strconv.ParseInt(h.Get("Process-Start-Time-Unix"), 10, 64)
	if err != nil || start < before-1 || start > time.Now().Unix() {
		t.Errorf("Process-Start-Time-Unix %q (%v), want between %d and now", h.Get("Process-Start-Time-Unix"), err, before)
	}
	text := v["_raw"].(string)
	value := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("no %s in /metrics", name)
			return -1
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		return f
	}
	if p, b := value("llamacpp:tokens_predicted_total"), value("braid_generated_tokens_total"); p != 9 || b != 9 {
		t.Errorf("tokens predicted: llamacpp %v, braid %v, want 9", p, b)
	}
	if p, b := value("llamacpp:prompt_tokens_total"), value("braid_prompt_tokens_total"); p != b || p <= 0 {
		t.Errorf("prompt tokens: llamacpp %v, braid %v", p, b)
	}
	if n := value("llamacpp:n_tokens_max"); n != value("llamacpp:prompt_tokens_total")+9 {
		t.Errorf("n_tokens_max %v", n)
	}
	for _, name := range []string{"llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_seconds_total", "llamacpp:n_decode_total"} {
		if value(name) <= 0 {
			t.Errorf("%s is not positive", name)
		}
	}
	for _, name := range []string{"llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:prompt_tokens_seconds", "llamacpp:predicted_tokens_seconds", "llamacpp:n_busy_slots_per_decode"} {
		if !strings.Contains(text, "# TYPE "+name+" gauge\n") {
			t.Errorf("no gauge %s", name)
		}
	}
}

// TestLlamaChatTemplate: --chat-template-file and --chat-template replace
// the model's template (what /props shows and what chat renders).
func TestLlamaChatTemplate(t *testing.T) {
	src := "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
	file := filepath.Join(t.TempDir(), "t.jinja")
	os.WriteFile(file, []byte(src), 0o644)
	for _, args := range [][]string{{"--chat-template-file", file}, {"--chat-template", src}} {
		url, _ := llamaServe(t, nil, args...)
		_, _, props := call(t, "GET", url+"/props", "", "")
		if props["chat_template"] != src {
			t.Errorf("%s: /props chat_template %q", args[0], props["chat_template"])
		}
		code, _, r := call(t, "POST", url+"/v1/chat/completions", "", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`)
		// [user] Hi\n[assistant]: far fewer tokens than ChatML's.
		if n := num(dig(r, "usage.prompt_tokens")); code != 200 || n == 0 || n > 20 {
			t.Errorf("%s: chat %d, prompt tokens %v", args[0], code, n)
		}
	}
}

// TestLlamaContextShift: with --context-shift a generation longer than the
// context goes on (truncated: true), the same tokens on one node and over
// a layer or tensor split; without it a full context ends with "length"
// (truncated: true) and a prompt longer than the context is a 400 naming
// both lengths.
func TestLlamaContextShift(t *testing.T) {
	needShared(t, stories)
	const ctxLen = 128
	var ref string
	for _, c := range []struct {
		name  string
		split string
	}{{"one node", ""}, {"layer split", "layer"}, {"tensor split", "tensor"}} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"--ctx-size", strconv.Itoa(ctxLen), "--context-shift", "--temp", "0", "--keep", "4"}
			if c.split != "" {
				w := startWorker(t, nil)
				args = append(args, "--workers", w, "--split", c.split, "-t", "1")
			}
			url, _ := llamaServe(t, nil, args...)
			code, _, r := call(t, "POST", url+"/completion", "", `{"prompt":"Once upon a time","n_predict":300,"ignore_eos":true}`)
			if code != 200 || num(r["tokens_predicted"]) != 300 || r["truncated"] != true || r["stop_type"] != "limit" {
				t.Fatalf("%d: predicted %v, truncated %v, stop %v: %v", code, r["tokens_predicted"], r["truncated"], r["stop_type"], r["timings"])
			}
			if n := num(r["tokens_cached"]); n >= ctxLen || n < 5 {
				t.Errorf("tokens_cached %v, want within the context of %d", n, ctxLen)
			}
			if c.split == "" {
				ref = r["content"].(string)
			} else if ref != "" && r["content"] != ref {
				t.Errorf("over a %s split the text differs from one node's:\n%q\n%q", c.split, r["content"], ref)
			}
			_, _, m := call(t, "GET", url+"/metrics", "", "")
			if !regexp.MustCompile(`(?m)^llamacpp:context_shifts_total [1-9]`).MatchString(m["_raw"].(string)) {
				t.Errorf("no context shift counted in /metrics")
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		url, _ := llamaServe(t, nil, "--ctx-size", strconv.Itoa(ctxLen), "--temp", "0")
		code, _, r := call(t, "POST", url+"/completion", "", `{"prompt":"Once upon a time","n_predict":300,"ignore_eos":true}`)
		if code != 200 || r["truncated"] != true || num(r["tokens_evaluated"])+num(r["tokens_predicted"]) != ctxLen {
			t.Errorf("full context on /completion: %d, truncated %v, %v+%v tokens", code, r["truncated"], r["tokens_evaluated"], r["tokens_predicted"])
		}
		code, _, r = call(t, "POST", url+"/v1/completions", "", `{"prompt":"Once upon a time","max_tokens":300,"ignore_eos":true}`)
		if code != 200 || dig(r, "choices.0.finish_reason") != "length" {
			t.Errorf("full context on /v1/completions: %d %v", code, dig(r, "choices.0.finish_reason"))
		}
		long := strings.Repeat("Once upon a time ", 40)
		code, _, r = call(t, "POST", url+"/completion", "", `{"prompt":"`+long+`"}`)
		msg, _ := dig(r, "error.message").(string)
		if code != 400 || !regexp.MustCompile(`the prompt has \d+ tokens but the context holds 128`).MatchString(msg) {
			t.Errorf("a prompt longer than the context: %d %q", code, msg)
		}
	})
}
