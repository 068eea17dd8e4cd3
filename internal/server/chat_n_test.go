package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// chatChoices are the message contents of a chat reply's choices, checked
// to be numbered in order and finished.
func chatChoices(t *testing.T, v map[string]any) []string {
	t.Helper()
	cs, _ := v["choices"].([]any)
	out := make([]string, len(cs))
	for i, c := range cs {
		cm := c.(map[string]any)
		if cm["index"] != float64(i) || cm["finish_reason"] == nil {
			t.Errorf("choice %d: index %v, finish_reason %v", i, cm["index"], cm["finish_reason"])
		}
		out[i], _ = cm["message"].(map[string]any)["content"].(string)
	}
	return out
}

// TestChatN: n > 1 on /v1/chat/completions gives n choices generated
// together, each what the single request with its seed (the request's
// plus its index) gives, so they differ and repeat; usage counts the
// prompt once and the completions of all; streamed, every chunk carries
// its choice's index and the response's one id; n beyond --parallel is
// refused naming both.
func TestChatN(t *testing.T) {
	es := startExtra(t, 4, 1024)
	msgs := `"messages":[{"role":"user","content":"Once upon a time"}]`
	var want []string
	completion := 0.0
	var prompt any
	for j := range 3 {
		_, v := es.call(t, "POST", "/v1/chat/completions", fmt.Sprintf(`{"model":"stories",%s,"max_tokens":10,"temperature":1,"seed":%d}`, msgs, 40+j))
		want = append(want, chatChoices(t, v)[0])
		u := v["usage"].(map[string]any)
		completion += u["completion_tokens"].(float64)
		prompt = u["prompt_tokens"]
	}
	if want[0] == want[1] && want[1] == want[2] {
		t.Fatalf("three seeds gave one text %q: the test cannot tell choices apart", want[0])
	}
	body := `{"model":"stories",` + msgs + `,"n":3,"max_tokens":10,"temperature":1,"seed":40}`
	for rep := range 2 {
		code, v := es.call(t, "POST", "/v1/chat/completions", body)
		if code != 200 {
			t.Fatalf("%d %v", code, v)
		}
		if got := chatChoices(t, v); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("run %d: choices\n%q\nwant\n%q", rep, got, want)
		}
		u := v["usage"].(map[string]any)
		if u["prompt_tokens"] != prompt || u["completion_tokens"] != completion || u["total_tokens"] != prompt.(float64)+completion {
			t.Errorf("usage %v, want %v prompt + %v completion tokens", u, prompt, completion)
		}
		if id, _ := v["id"].(string); !strings.HasPrefix(id, "chatcmpl-") || v["object"] != "chat.completion" {
			t.Errorf("id %v object %v", v["id"], v["object"])
		}
	}
	// streamed: the same texts, put together by index
	resp, err := http.Post(es.url+"/v1/chat/completions", "application/json", strings.NewReader(strings.TrimSuffix(body, "}")+`,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	texts := map[int]string{}
	roles := map[int]bool{}
	finished := map[int]bool{}
	ids := map[string]bool{}
	var usage map[string]any
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			done = true
			break
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		ids[c["id"].(string)] = true
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			cm := ch.(map[string]any)
			i := int(cm["index"].(float64))
			delta := cm["delta"].(map[string]any)
			if delta["role"] == "assistant" {
				roles[i] = true
			}
			if s, ok := delta["content"].(string); ok {
				texts[i] += s
			}
			if cm["finish_reason"] != nil {
				finished[i] = true
			}
		}
	}
	if !done || len(ids) != 1 || len(roles) != 3 || len(finished) != 3 {
		t.Errorf("streamed: done %v, ids %v, roles %v, finished %v", done, ids, roles, finished)
	}
	for i, w := range want {
		if texts[i] != w {
			t.Errorf("streamed choice %d: %q, want %q", i, texts[i], w)
		}
	}
	if usage == nil || usage["completion_tokens"] != completion || usage["prompt_tokens"] != prompt {
		t.Errorf("streamed usage %v", usage)
	}
	// each choice of a forced tool call is a call
	code, v := es.call(t, "POST", "/v1/chat/completions", `{"model":"stories",`+msgs+`,"tools":[`+timeTool+`],"tool_choice":"required","n":2,"max_tokens":200,"temperature":1,"seed":3}`)
	if code != 200 {
		t.Fatalf("tools: %d %v", code, v)
	}
	for i, c := range v["choices"].([]any) {
		cm := c.(map[string]any)
		m := cm["message"].(map[string]any)
		if cm["finish_reason"] == "length" {
			continue
		}
		if cm["finish_reason"] != "tool_calls" || len(m["tool_calls"].([]any)) == 0 || m["content"] != nil {
			t.Errorf("tools, choice %d: %v", i, cm)
		}
	}
	// llama-server's n_cmpl is n
	if code, v := es.call(t, "POST", "/v1/chat/completions", `{"model":"stories",`+msgs+`,"n_cmpl":3,"max_tokens":10,"temperature":1,"seed":40}`); code != 200 || strings.Join(chatChoices(t, v), "|") != strings.Join(want, "|") {
		t.Errorf("n_cmpl 3: %d %v", code, v)
	}
	for _, c := range []struct{ body, param, want string }{
		{`{"model":"stories",` + msgs + `,"n_cmpl":"x"}`, "n_cmpl", "must be an integer"},
		{`{"model":"stories",` + msgs + `,"n":1,"n_cmpl":2}`, "n_cmpl", "n_cmpl = 2"},
		{`{"model":"stories",` + msgs + `,"n":5}`, "n", "n = 5 is more choices than this server generates together: at most 4 (--parallel 4)"},
		{`{"model":"stories",` + msgs + `,"n":0}`, "n", "n = 0"},
		{`{"model":"stories",` + msgs + `,"n":2,"temperature":7}`, "temperature", "temperature = 7"},
		{`{"model":"stories","messages":[],"n":2}`, "messages", "at least one message"},
	} {
		code, v := es.call(t, "POST", "/v1/chat/completions", c.body)
		wantError(t, c.body, code, v, 400, c.param, c.want)
	}
}
