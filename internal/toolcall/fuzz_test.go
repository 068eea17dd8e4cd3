package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"braid/internal/chat"
)

type flat struct {
	Content string
	Calls   [][2]string
}

func flatten(ev []Event) flat {
	var f flat
	for _, e := range ev {
		if e.Call != nil {
			f.Calls = append(f.Calls, [2]string{e.Call.Name, e.Call.Arguments})
		} else {
			f.Content += e.Content
		}
	}
	return f
}

// FuzzParsers: for every format, any text parses without a panic; cut in
// random pieces it gives what it gives whole; every call's arguments are a
// JSON object; and text without calls comes back whole as content.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
		"{\"name\": \"f\", \"parameters\": {\"a\": [1]}}", "<|python_tag|>f.call(q=\"x\", n=2)",
		"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"abcdefghi\"}]", "[TOOL_CALLS]f[CALL_ID]x[ARGS]{\"a\": 1}",
		"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>",
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{'a': True}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"plain text < with [brackets] and {braces}",
	} {
		f.Add(s, uint64(1))
	}
	tools := []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"q":{"type":"string"}}}`)}}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if len(text) > 4096 {
			return
		}
		for fm := Hermes; fm <= DeepSeek; fm++ {
			whole := NewParser(fm, tools)
			w := flatten(append(whole.Add(text), whole.Flush()...))
			rng := rand.New(rand.NewPCG(seed, uint64(fm)))
			pieces := NewParser(fm, tools)
			var ev []Event
			for rest := text; rest != ""; {
				n := 1 + rng.IntN(min(6, len(rest)))
				ev = append(ev, pieces.Add(rest[:n])...)
				rest = rest[n:]
			}
			s := flatten(append(ev, pieces.Flush()...))
			if !reflect.DeepEqual(w, s) {
				t.Fatalf("%v: whole %+v, in pieces %+v", fm, w, s)
			}
			if len(w.Calls) == 0 && w.Content != text {
				t.Fatalf("%v: no calls, but content %q is not the text", fm, w.Content)
			}
			for _, c := range w.Calls {
				var obj map[string]any
				if json.Unmarshal([]byte(c[1]), &obj) != nil {
					t.Fatalf("%v: call %s with arguments %q, not a JSON object", fm, c[0], c[1])
				}
			}
		}
		_ = chat.ReasoningNone
	})
}
