package server

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"braid/internal/engine"
	"braid/internal/kvcache"
	"braid/internal/model"
	"braid/internal/tokenizer"
)

// gatedBackend is the script backend that runs a step only when the test
// lets it (a token on gate; closed, it runs freely).
type gatedBackend struct {
	*scriptBackend
	gate chan struct{}
}

func (b *gatedBackend) Forward(batch *model.Batch, o engine.Output, logits []float32) error {
	<-b.gate
	return b.scriptBackend.Forward(batch, o, logits)
}

// TestSlots: /slots shows each busy slot's request id (one per choice of
// an n > 1 request, with its index), prompt tokens, tokens generated so
// far and speed while the steps run one by one; a request beyond the
// slots waits and takes the first one freed; idle slots say so.
func TestSlots(t *testing.T) {
	tok, err := tokenizer.New(reasoningVocab())
	if err != nil {
		t.Fatal(err)
	}
	cache, err := kvcache.New(kvcache.Config{Layers: 1, KVDim: 1, BlockSize: 16, Blocks: 256, F32: true})
	if err != nil {
		t.Fatal(err)
	}
	sb := &scriptBackend{Cache: cache, vocab: tok.VocabSize(), eos: tok.EOS(), fed: map[kvcache.SeqID][]int32{}, outs: map[kvcache.SeqID]int{}}
	gb := &gatedBackend{scriptBackend: sb, gate: make(chan struct{})}
	sched, err := engine.NewScheduler(gb, engine.SchedulerConfig{Parallel: 2, Context: 512, PrefixCache: -1, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := sched.Start(schedCtx)
	srv := New(Config{Model: "m", Logf: t.Logf})
	srv.SetReady(&Backend{Sched: sched, Tok: tok, Vocab: tok.VocabSize()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	var freed sync.Once
	free := func() { freed.Do(func() { close(gb.gate) }) }
	t.Cleanup(func() {
		free()
		stop()
		<-done
		stopSched()
		<-schedDone
	})
	es := &extraServer{testServer: &testServer{url: "http://" + ln.Addr().String()}}
	sb.setScript(tok.Encode(strings.Repeat("abcdefgh", 8), false, false))
	slots := func() []map[string]any {
		t.Helper()
		code, v := es.call(t, "GET", "/slots", "")
		var out []map[string]any
		if err := json.Unmarshal([]byte(v["raw"].(string)), &out); code != 200 || err != nil || len(out) != 2 {
			t.Fatalf("/slots: %d %v", code, v)
		}
		return out
	}
	for i, s := range slots() {
		if s["id"] != float64(i) || s["is_processing"] != false || s["state"] != "idle" || s["request_id"] != nil {
			t.Errorf("before any request, slot %d: %v", i, s)
		}
	}

	// two choices take both slots; a third request waits
	type answer struct {
		code int
		v    map[string]any
	}
	answers := make(chan answer, 2)
	go func() {
		code, v := es.call(t, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hi"}],"n":2,"max_tokens":40,"temperature":0}`)
		answers <- answer{code, v}
	}()
	waitSlots := func(what string, ok func([]map[string]any) bool) []map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := slots()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /slots still %v", what, s)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	s := waitSlots("the two choices taken", func(s []map[string]any) bool {
		return s[0]["is_processing"] == true && s[1]["is_processing"] == true
	})
	for i, sl := range s {
		if sl["state"] != "prompt" || sl["n_decoded"] != 0.0 || sl["n_prompt_tokens"].(float64) < 1 {
			t.Errorf("before a step, slot %d: %v", i, sl)
		}
	}
	go func() {
		code, v := es.call(t, "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hello there"}],"max_tokens":8,"temperature":0}`)
		answers <- answer{code, v}
	}()
	// six steps: five or six tokens each (a choice whose prompt came
	// after the first step's batch was formed starts a step later)
	for range 6 {
		gb.gate <- struct{}{}
	}
	s = waitSlots("five tokens generated", func(s []map[string]any) bool {
		return s[0]["n_decoded"].(float64)+s[1]["n_decoded"].(float64) >= 11
	})
	id, _ := s[0]["request_id"].(string)
	choices := map[any]bool{}
	for i, sl := range s {
		choices[sl["choice"]] = true
		if sl["request_id"] != id || !strings.HasPrefix(id, "chatcmpl-") || sl["state"] != "generating" || sl["tokens_per_second"].(float64) <= 0 {
			t.Errorf("slot %d: %v", i, sl)
		}
		n := sl["n_decoded"].(float64)
		if nt := sl["next_token"].([]any)[0].(map[string]any); n < 5 || nt["n_remain"] != 40-n || nt["n_decoded"] != n || sl["params"].(map[string]any)["n_predict"] != 40.0 {
			t.Errorf("slot %d next_token %v", i, nt)
		}
	}
	if !choices[0.0] || !choices[1.0] {
		t.Errorf("the slots show choices %v, want 0 and 1", choices)
	}
	// step on until a choice ends: the waiting request takes its slot
	var third map[string]any
	for i := 0; i < 100 && third == nil; i++ {
		gb.gate <- struct{}{}
		for _, sl := range slots() {
			if sl["request_id"] != nil && sl["request_id"] != id {
				third = sl
			}
		}
	}
	if third == nil || !strings.HasPrefix(third["request_id"].(string), "chatcmpl-") || third["choice"] != nil || third["n_prompt_tokens"].(float64) <= 0 {
		t.Errorf("the waiting request on /slots: %v", third)
	}
	free()
	var ids []string
	var prompts []float64
	for range 2 {
		a := <-answers
		if a.code != 200 {
			t.Fatalf("%d %v", a.code, a.v)
		}
		ids = append(ids, a.v["id"].(string))
		prompts = append(prompts, a.v["usage"].(map[string]any)["prompt_tokens"].(float64))
	}
	if ids[0] != id && ids[1] != id {
		t.Errorf("the slots showed %s, the answers are %v", id, ids)
	}
	for i, p := range prompts {
		if ids[i] == id && p != s[0]["n_prompt_tokens"] {
			t.Errorf("the slots showed %v prompt tokens, the answer counts %v", s[0]["n_prompt_tokens"], p)
		}
	}
	waitSlots("all idle again", func(s []map[string]any) bool {
		return s[0]["state"] == "idle" && s[1]["state"] == "idle"
	})
	if code, v := es.call(t, "GET", "/slots?fail_on_no_slot=1", ""); code != 200 {
		t.Errorf("fail_on_no_slot with idle slots: %d %v", code, v)
	}
}
