package server

import (
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// TestResponsesStore: the store keeps the last N responses made with
// store true, each for the TTL; store false is never kept; a continued
// conversation is the stored input and output (its developer messages
// too), and an unknown, deleted, unstored or expired id is a 404 naming
// it.
func TestResponsesStore(t *testing.T) {
	es := startExtra(t, 2, 256)
	st := es.srv.responses()
	var clockMu sync.Mutex
	now := time.Unix(1e9, 0)
	st.mu.Lock()
	st.max, st.ttl = 3, time.Minute
	st.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	st.mu.Unlock()
	advance := func(d time.Duration) { clockMu.Lock(); now = now.Add(d); clockMu.Unlock() }
	create := func(extra string) map[string]any {
		t.Helper()
		code, r := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":"Once upon a time","max_output_tokens":4,"temperature":0`+extra+`}`)
		if code != 200 {
			t.Fatalf("%d %v", code, r)
		}
		return r
	}
	continued := func(id string) (int, map[string]any) {
		return es.call(t, "POST", "/v1/responses", `{"model":"stories","previous_response_id":"`+id+`","input":"And then?","max_output_tokens":4}`)
	}
	var ids []string
	for range 4 {
		ids = append(ids, create("")["id"].(string))
	}
	// the count: the oldest of four is gone, the other three are kept
	code, v := es.call(t, "GET", "/v1/responses/"+ids[0], "")
	wantError(t, "GET the oldest", code, v, 404, "", ids[0])
	code, v = continued(ids[0])
	wantError(t, "continue the oldest", code, v, 404, "previous_response_id", ids[0])
	for _, id := range ids[1:] {
		if code, v := es.call(t, "GET", "/v1/responses/"+id, ""); code != 200 || v["id"] != id {
			t.Errorf("GET %s: %d %v", id, code, v)
		}
	}
	// the age: past the TTL every one is gone
	advance(59 * time.Second)
	if code, _ := es.call(t, "GET", "/v1/responses/"+ids[3], ""); code != 200 {
		t.Errorf("GET before the TTL: %d", code)
	}
	advance(2 * time.Second)
	code, v = continued(ids[3])
	wantError(t, "continue an expired one", code, v, 404, "previous_response_id", "--responses-ttl")
	if n := st.len(); n != 0 {
		t.Errorf("%d responses kept past their TTL", n)
	}
	// store false: answered, never kept, cannot be continued
	r := create(`,"store":false`)
	code, v = continued(r["id"].(string))
	wantError(t, "continue store false", code, v, 404, "previous_response_id", r["id"].(string))
	if r["store"] != false {
		t.Errorf("store false answered store %v", r["store"])
	}
	code, v = es.call(t, "DELETE", "/v1/responses/"+r["id"].(string), "")
	wantError(t, "DELETE store false", code, v, 404, "", r["id"].(string))
	code, v = es.call(t, "DELETE", "/v1/responses/resp_nope", "")
	wantError(t, "DELETE unknown", code, v, 404, "", "resp_nope")

	// the continued prompt is the whole stored conversation: a developer
	// message of the input too, but not the instructions
	code, first := es.call(t, "POST", "/v1/responses", `{"model":"stories","instructions":"Tell a story.","input":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Once upon a time"}],"max_output_tokens":6,"temperature":0}`)
	if code != 200 {
		t.Fatal(first)
	}
	_, second := continued(first["id"].(string))
	msgs, _ := json.Marshal([]map[string]string{{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Once upon a time"},
		{"role": "assistant", "content": first["output_text"].(string)}, {"role": "user", "content": "And then?"}})
	_, chatR := es.call(t, "POST", "/v1/chat/completions", `{"model":"stories","messages":`+string(msgs)+`,"max_tokens":4}`)
	if got, want := second["usage"].(map[string]any)["input_tokens"], chatR["usage"].(map[string]any)["prompt_tokens"]; got != want {
		t.Errorf("continued: %v input tokens, the chat of the whole conversation %v", got, want)
	}
}

// TestResponsesStoreOff: --responses-store 0 (a negative ResponsesStore)
// keeps nothing and says so.
func TestResponsesStoreOff(t *testing.T) {
	es := startExtra(t, 1, 128)
	// as responses() makes it for ResponsesStore -1 (set before the
	// server's first use, which the once orders after this)
	es.srv.extra.once.Do(func() { es.srv.extra.store = newResponseStore(0, DefaultResponsesTTL) })
	code, r := es.call(t, "POST", "/v1/responses", `{"model":"stories","input":"Hi","max_output_tokens":2}`)
	if code != 200 || r["store"] != false {
		t.Fatalf("%d %v", code, r)
	}
	code, v := es.call(t, "GET", "/v1/responses/"+r["id"].(string), "")
	wantError(t, "GET with no store", code, v, 404, "", "--responses-store 0")
}
