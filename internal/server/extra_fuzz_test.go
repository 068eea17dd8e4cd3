package server

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzExtraRequests drives the parsing of the native, embeddings and
// Responses endpoints' bodies: any body gives a request or a 400 with a
// message (naming its field where it has one), never a panic.
func FuzzExtraRequests(f *testing.F) {
	for _, s := range []string{
		`{"content":"Hello","add_special":true,"parse_special":false,"with_pieces":true}`,
		`{"tokens":[1,2,3],"with_pieces":true}`,
		`{"prompt":"x","n_predict":-1,"stop":["a"],"stream":true,"n_probs":0,"cache_prompt":true}`,
		`{"prompt":[1,2],"n_predict":-5,"grammar":"root ::= \"a\""}`,
		`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":64}`,
		`{"model":"m","input":[[1,2],[3]]}`, `{"input":[1,2,3]}`, `{"input":{"x":1}}`, `{"input":[]}`,
		`{"model":"m","input":"hi","instructions":"be brief","max_output_tokens":5,"stream":true,"store":false}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"message","role":"assistant","content":"b"}]}`,
		`{"model":"m","input":[{"type":"reasoning","id":"rs_1"},{"role":"developer","content":[{"type":"input_image"}]}]}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}},"reasoning":{"effort":"low"}}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema"}},"truncation":"auto","tools":[{}],"background":true}`,
		`{"model":"m","input":"x","max_output_tokens":0,"temperature":9,"previous_response_id":"resp_x"}`,
		`{"model":"m","prompt":["a",[1,2]],"n":3,"seed":4,"stream":true}`,
		`{"model":"m","input":[{"role":"user","content":"t?"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"3"},{"type":"function_call_output","call_id":"call_known","output":[{"type":"input_text","text":"x"}]}]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{oops"},{"type":"function_call_output","call_id":"zz","output":null}]}`,
		`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false},{"type":"web_search"}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false}`,
		`{"model":"m","input":"x","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","include":["reasoning.encrypted_content"],"conversation":"c"}`, `{"prompt":[[1],{"a":1}]}`,
		`[]`, `null`, "{\"input\":\"\xff\"}", `{"input":[{"role":"user","content":5}]}`,
	} {
		f.Add([]byte(s))
	}
	check := func(t *testing.T, what string, e *apiError) {
		if e == nil {
			return
		}
		if e.Status != 400 || e.Message == "" || !utf8.ValidString(e.Message) {
			t.Fatalf("%s: %+v", what, e)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var tr tokenizeRequest
		check(t, "tokenize", parseJSON(body, &tr))
		var dr detokenizeRequest
		check(t, "detokenize", parseJSON(body, &dr))

		var nr nativeRequest
		if e := parseJSON(body, &nr); e == nil {
			_, _, e := nr.params(nil, func() uint64 { return 1 })
			check(t, "native params", e)
			_, _, e = parsePrompt(nr.Prompt)
			check(t, "native prompt", e)
			_, e = nr.outputConstraint()
			check(t, "native constraint", e)
		} else {
			check(t, "native", e)
		}

		var fo fanOut
		if json.Unmarshal(body, &fo) == nil {
			list, e := splitPrompts(fo.Prompt)
			check(t, "prompt list", e)
			if e == nil && list != nil && len(list) < 2 {
				t.Fatalf("a list of %d prompts", len(list))
			}
		}

		var er embeddingsRequest
		if e := parseJSON(body, &er); e == nil {
			texts, ids, e := parseEmbedInput(er.Input)
			check(t, "embed input", e)
			if e == nil && len(texts) == 0 && len(ids) == 0 {
				t.Fatal("embeddings input accepted with nothing in it")
			}
			if e != nil && e.Param != "input" {
				t.Fatalf("embed input error names %q", e.Param)
			}
		} else {
			check(t, "embeddings", e)
		}

		var rr responsesRequest
		if e := parseJSON(body, &rr); e == nil {
			sr, e := rr.toSampling()
			check(t, "responses fields", e)
			if e == nil {
				_, _, e = sr.params(nil, func() uint64 { return 1 })
				check(t, "responses params", e)
				_, e = sr.outputConstraint()
				check(t, "responses format", e)
			}
			_, e = rr.toolSetup()
			check(t, "responses tools", e)
			if e != nil && e.Param == "" {
				t.Fatalf("responses tools error names no field: %s", e.Message)
			}
			var fields map[string]json.RawMessage
			if json.Unmarshal(body, &fields) == nil {
				check(t, "responses fields", refuseUnsupported(fields))
			}
			msgs, e := inputMessages(rr.Input, map[string]bool{"call_known": true})
			check(t, "responses input", e)
			if e == nil && len(msgs) == 0 && string(rr.Input) != "" {
				// only reasoning items: nothing to answer
				for _, m := range msgs {
					if m.Role == "" {
						t.Fatal("a message without a role")
					}
				}
			}
			if e != nil && e.Param == "" {
				t.Fatalf("responses input error names no field: %s", e.Message)
			}
		} else {
			check(t, "responses", e)
		}
	})
}
