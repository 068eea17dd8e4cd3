package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func choiceTexts(t *testing.T, v map[string]any) []string {
	t.Helper()
	cs, _ := v["choices"].([]any)
	out := make([]string, len(cs))
	for i, c := range cs {
		cm := c.(map[string]any)
		if cm["index"] != float64(i) {
			t.Errorf("choice %d has index %v", i, cm["index"])
		}
		out[i] = cm["text"].(string)
	}
	return out
}

// TestCompletionsBatch: a list of prompts and n > 1 in /v1/completions give
// prompts x n choices, prompt by prompt, each what the single request gives.
func TestCompletionsBatch(t *testing.T) {
	es := startExtra(t, 4, 128)
	one := func(prompt string, seed int) (string, map[string]any) {
		_, v := es.call(t, "POST", "/v1/completions", fmt.Sprintf(`{"model":"stories","prompt":%q,"max_tokens":8,"temperature":1,"seed":%d}`, prompt, seed))
		return choiceTexts(t, v)[0], v["usage"].(map[string]any)
	}
	prompts := []string{"Once upon a time", "The cat", "Lily"}
	var want []string
	promptTokens, completionTokens := 0.0, 0.0
	for _, p := range prompts {
		for j := 0; j < 2; j++ {
			s, u := one(p, 40+j)
			want = append(want, s)
			if j == 0 {
				promptTokens += u["prompt_tokens"].(float64)
			}
			completionTokens += u["completion_tokens"].(float64)
		}
	}
	body, _ := json.Marshal(map[string]any{"model": "stories", "prompt": prompts, "n": 2, "max_tokens": 8, "temperature": 1, "seed": 40})
	code, v := es.call(t, "POST", "/v1/completions", string(body))
	if code != 200 {
		t.Fatalf("%d %v", code, v)
	}
	got := choiceTexts(t, v)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("choices\n%q\nwant\n%q", got, want)
	}
	if want[0] == want[1] {
		t.Errorf("the two choices of one seeded prompt are the same: %q", want[0])
	}
	u := v["usage"].(map[string]any)
	if u["prompt_tokens"] != promptTokens || u["completion_tokens"] != completionTokens || u["total_tokens"] != promptTokens+completionTokens {
		t.Errorf("usage %v, want %v prompt + %v completion tokens", u, promptTokens, completionTokens)
	}
	// token-id prompts, and streamed: every choice's chunks carry its index
	resp, err := http.Post(es.url+"/v1/completions", "application/json", strings.NewReader(
		`{"model":"stories","prompt":[[1,403],[1,403,407]],"n":2,"max_tokens":6,"temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	texts := map[int]string{}
	finished := map[int]bool{}
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
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			cm := ch.(map[string]any)
			i := int(cm["index"].(float64))
			texts[i] += cm["text"].(string)
			if cm["finish_reason"] != nil {
				finished[i] = true
			}
		}
	}
	if !done || len(texts) != 4 || len(finished) != 4 || texts[0] != texts[1] || texts[2] != texts[3] || texts[0] == texts[2] {
		t.Errorf("streamed: done %v, texts %v, finished %v", done, texts, finished)
	}
	if usage == nil || usage["completion_tokens"] != 24.0 || usage["prompt_tokens"] != 5.0 {
		t.Errorf("streamed usage %v", usage)
	}
	for _, c := range []struct{ body, param, want string }{
		{`{"model":"stories","prompt":"x","n":0}`, "n", "n = 0"},
		{`{"model":"stories","prompt":"x","n":65}`, "n", "at most 64"},
		{`{"model":"stories","prompt":["a",{"x":1}]}`, "prompt", "prompt[1] must be a string or a list of token ids"},
		{`{"model":"stories","prompt":["a","b"],"max_tokens":-1}`, "max_tokens", "max_tokens = -1"},
		{`{"model":"stories","prompt":"` + strings.Repeat("Once upon a time ", 40) + `","n":2}`, "prompt", "the context holds 128"},
	} {
		code, v := es.call(t, "POST", "/v1/completions", c.body)
		wantError(t, c.body, code, v, 400, c.param, c.want)
	}
	// the chat endpoint names messages for a prompt that does not fit
	long := strings.Repeat("Once upon a time ", 40)
	code, v = es.call(t, "POST", "/v1/chat/completions", `{"model":"stories","messages":[{"role":"user","content":"`+long+`"}]}`)
	wantError(t, "long chat", code, v, 400, "messages", "the context holds 128")
}
