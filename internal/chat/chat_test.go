package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, src string) *Template {
	t.Helper()
	tmpl, err := Parse("test.jinja", src)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func mustRender(t *testing.T, tmpl *Template, vars map[string]any) string {
	t.Helper()
	out, err := tmpl.Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The expectations are Python 3.11 json.dumps outputs.
func TestToJSONMatchesPython(t *testing.T) {
	x := json.RawMessage(`{"b":1,"a":[1.0,1e16,1e-5,0.1,123456789.0,-0.0,2.5e-7,1e15,12345678901234567890.0],` +
		`"u":"Zürich \u2028 <a&b> \"q\" \\ \u0001 ` + "\x7f" + ` 😀","e":[],"d":{},"n":null,"t":true}`)
	const floats = `[1.0, 1e+16, 1e-05, 0.1, 123456789.0, -0.0, 2.5e-07, 1000000000000000.0, 1.2345678901234567e+19]`
	const u = `"Zürich ` + "\u2028" + ` <a&b> \"q\" \\ \u0001 ` + "\x7f" + ` 😀"`
	cases := []struct{ expr, want string }{
		{`x | tojson`, `{"b": 1, "a": ` + floats + `, "u": ` + u + `, "e": [], "d": {}, "n": null, "t": true}`},
		{`x | tojson(indent=2)`, "{\n  \"b\": 1,\n  \"a\": [\n    1.0,\n    1e+16,\n    1e-05,\n    0.1,\n    123456789.0,\n    -0.0,\n    2.5e-07,\n    1000000000000000.0,\n    1.2345678901234567e+19\n  ],\n  \"u\": " + u + ",\n  \"e\": [],\n  \"d\": {},\n  \"n\": null,\n  \"t\": true\n}"},
		{`x | tojson(ensure_ascii=True, sort_keys=True)`, `{"a": ` + floats + `, "b": 1, "d": {}, "e": [], "n": null, "t": true, "u": "Z\u00fcrich \u2028 <a&b> \"q\" \\ \u0001 \u007f \ud83d\ude00"}`},
		{`x | tojson(separators=(',', ':'))`, `{"b":1,"a":` + strings.ReplaceAll(floats, ", ", ",") + `,"u":` + u + `,"e":[],"d":{},"n":null,"t":true}`},
		{`[1, [2, {}]] | tojson(indent='\t')`, "[\n\t1,\n\t[\n\t\t2,\n\t\t{}\n\t]\n]"},
		{`[1, [2, {}]] | tojson(indent=0)`, "[\n1,\n[\n2,\n{}\n]\n]"},
		{`'a' ~ ("x|tojson" | length)`, `a8`}, // string literals are not rewritten
	}
	for _, c := range cases {
		tmpl := mustParse(t, "{{ "+c.expr+" }}")
		if got := mustRender(t, tmpl, map[string]any{"x": x}); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.expr, got, c.want)
		}
	}
}

func TestRewriteKeepsTextAndStrings(t *testing.T) {
	src := "a|tojson {# |tojson #}{% raw %}{{ x|tojson }}{% endraw %}{{ 'b|tojson' ~ y | tojson }}"
	want := "a|tojson {# |tojson #}{% raw %}{{ x|tojson }}{% endraw %}{{ " + printFunc + "(( 'b|tojson' ~ y | " + toJSONFilter + " )) }}"
	if got := rewriteSource(src); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// The expectations are Python 3.11 time.strftime outputs (glibc, C locale).
func TestStrftime(t *testing.T) {
	tm := time.Date(2026, 11, 26, 9, 5, 7, 0, time.UTC)
	got := strftime("%a %A %b %B %c %d %e %H %I %j %m %M %p %S %U %w %W %x %X %y %Y %% %-d %F %T %D %u %V %G %k %l %h %C %q", tm)
	want := "Thu Thursday Nov November Thu Nov 26 09:05:07 2026 26 26 09 09 330 11 05 AM 07 47 4 47 11/26/26 09:05:07 26 2026 % 26 2026-11-26 09:05:07 11/26/26 4 48 2026  9  9 Nov 20 %q"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	tm = time.Date(2026, 1, 4, 15, 5, 7, 0, time.UTC)
	if got, want := strftime("%U %W %V %G %j %I %p %-m", tm), "01 00 01 2026 004 03 PM 1"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestStrftimeNowUsesClock(t *testing.T) {
	tmpl := mustParse(t, `{{ strftime_now("%d %b %Y") }}`)
	got := mustRender(t, tmpl, map[string]any{NowVar: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)})
	if got != "26 Nov 2026" {
		t.Errorf("got %q", got)
	}
	got, err := tmpl.RenderChat(nil, Options{Now: time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC)})
	if err != nil || got != "26 Jul 2024" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := tmpl.Render(map[string]any{NowVar: "today"}); err == nil {
		t.Error("a non-time clock must be refused")
	}
}

func TestSyntaxErrorNamesTemplateAndLine(t *testing.T) {
	cases := []struct {
		src  string
		line int
	}{
		{"line one\n{{ messages[0 }}\n", 2},
		{"a\nb\n{% if x %}\nunfinished\n", 3},
		{"a\n{% for m in messages %}{% if m %}x{% endfor %}\n", 2},
		{"a\n\n{{ x ", 3},
		{"{% bogus %}", 1},
	}
	for _, c := range cases {
		_, err := Parse("model.jinja", c.src)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: want *Error, got %v", c.src, err)
			continue
		}
		if e.Template != "model.jinja" || e.Line != c.line || e.Raised {
			t.Errorf("%q: got %+v (%v), want line %d", c.src, e, err, c.line)
		}
		if !strings.Contains(err.Error(), "model.jinja") {
			t.Errorf("%q: message does not name the template: %v", c.src, err)
		}
	}
}

func TestRaiseException(t *testing.T) {
	src := "{% for m in messages %}\n{% if m.role == 'bot' %}\n{{ raise_exception('Only user and assistant roles are supported!') }}\n{% endif %}\n{% endfor %}"
	tmpl := mustParse(t, src)
	_, err := tmpl.RenderChat([]Message{{Role: "bot", Content: "hi"}}, Options{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %v", err)
	}
	if !e.Raised || e.Message != "Only user and assistant roles are supported!" || e.Line != 3 {
		t.Errorf("got %+v", e)
	}
	if !strings.Contains(err.Error(), "Only user and assistant roles are supported!") {
		t.Errorf("message lost: %v", err)
	}
	if out, err := tmpl.RenderChat([]Message{{Role: "user", Content: "hi"}}, Options{}); err != nil || out != "" {
		t.Errorf("got %q, %v", out, err)
	}
}

func TestRenderErrorIsError(t *testing.T) {
	tmpl := mustParse(t, "{{ x | nosuchfilter }}")
	_, err := tmpl.Render(map[string]any{"x": 1})
	var e *Error
	if !errors.As(err, &e) || e.Raised || e.Template != "test.jinja" {
		t.Errorf("got %v", err)
	}
}

func TestChatML(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: []any{map[string]any{"type": "text", "text": "Hi"}, map[string]any{"type": "image_url"}, map[string]any{"type": "text", "text": " there"}}},
		{Role: "assistant", Content: "Hello."},
	}
	got, err := ChatML().RenderChat(msgs, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestMessageJSON(t *testing.T) {
	var msgs []Message
	err := json.Unmarshal([]byte(`[
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"z\": 1, \"a\": 2}"}}]},
		{"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"g","arguments":{"z":1,"a":[true]}}}]},
		{"role":"user","content":[{"type":"text","text":"hi"}]},
		{"role":"tool","tool_call_id":"c1","name":"f","content":"7"}]`), &msgs)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Content != nil || msgs[0].ToolCalls[0].Function.Arguments != `{"z": 1, "a": 2}` {
		t.Errorf("message 0: %#v", msgs[0])
	}
	if _, ok := msgs[1].ToolCalls[0].Function.Arguments.(json.RawMessage); !ok {
		t.Errorf("object arguments should stay raw JSON: %#v", msgs[1].ToolCalls[0].Function.Arguments)
	}
	tmpl := mustParse(t, `{% for m in messages %}{{ m.role }}:{{ m.content is none }}:{{ m.content is string }}`+
		`{% for c in m.tool_calls or [] %}[{{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}`+
		`{% if m.tool_call_id is defined %}<{{ m.tool_call_id }} {{ m.name }}>{% endif %};{% endfor %}{{ tools is defined }}`)
	got, err := tmpl.RenderChat(msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `assistant:True:False[c1 f "{\"z\": 1, \"a\": 2}"];assistant:False:True[c2 g {"z": 1, "a": [true]}];user:False:False;tool:False:True<c1 f>;False`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Round trip: the JSON tags are OpenAI's.
	data, _ := json.Marshal(Message{Role: "tool", Content: "x", ToolCallID: "c1"})
	if string(data) != `{"role":"tool","content":"x","tool_call_id":"c1"}` {
		t.Errorf("marshal: %s", data)
	}
}

func TestRenderGoValues(t *testing.T) {
	type param struct {
		Type string `json:"type"`
	}
	tmpl := mustParse(t, `{{ a | tojson }} {{ b | tojson }} {{ c | tojson }} {{ d }} {{ e | tojson }}`)
	got := mustRender(t, tmpl, map[string]any{
		"a": []string{"x", "y"},
		"b": map[string]int{"z": 1, "a": 2},
		"c": param{Type: "object"},
		"d": uint8(7),
		"e": json.Number("2.50"),
	})
	if want := `["x", "y"] {"a": 2, "z": 1} {"type": "object"} 7 2.5`; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if _, err := tmpl.Render(map[string]any{"a": make(chan int)}); err == nil {
		t.Error("a channel must be refused")
	}
}

func TestRenderContextFile(t *testing.T) {
	dir := t.TempDir()
	tp := filepath.Join(dir, "t.jinja")
	cp := filepath.Join(dir, "c.json")
	os.WriteFile(tp, []byte("{{ bos_token }}{% for k, v in tools[0].items() %}{{ k }}={{ v }};{% endfor %}{{ tools | tojson }} {{ strftime_now('%Y-%m-%d') }}"), 0o644)
	os.WriteFile(cp, []byte(`{"bos_token": "<s>", "tools": [{"zeta": 1, "alpha": 2.0}]}`), 0o644)
	got, err := RenderContextFile(tp, cp, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if want := `<s>zeta=1;alpha=2.0;[{"zeta": 1, "alpha": 2.0}] 2026-11-26`; got != want {
		// The engine prints floats with %g; only tojson is Python-exact.
		if want2 := `<s>zeta=1;alpha=2;[{"zeta": 1, "alpha": 2.0}] 2026-11-26`; got != want2 {
			t.Errorf("got %q want %q", got, want)
		}
	}
	os.WriteFile(cp, []byte(`[1]`), 0o644)
	if _, err := RenderContextFile(tp, cp, time.Time{}); err == nil {
		t.Error("a non-object context must be refused")
	}
}

func TestConcurrentRenders(t *testing.T) {
	tmpl := mustParse(t, `{{ strftime_now('%Y') }}{{ messages | length }}`)
	done := make(chan string)
	for i := range 8 {
		go func() {
			out, _ := tmpl.RenderChat(make([]Message, i), Options{Now: time.Date(2000+i, 1, 1, 0, 0, 0, 0, time.UTC)})
			done <- out
		}()
	}
	seen := map[string]bool{}
	for range 8 {
		seen[<-done] = true
	}
	for i := range 8 {
		if s := time.Date(2000+i, 1, 1, 0, 0, 0, 0, time.UTC).Format("2006") + itoa(i); !seen[s] {
			t.Errorf("missing %q in %v", s, seen)
		}
	}
}

// The macro depth guard must not change whitespace handling; expectations
// are Python jinja2 3.1 (trim_blocks, lstrip_blocks) renders.
func TestMacroGuardKeepsWhitespace(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{% macro f(x) %}\n  [{{ x }}]\n  {% endmacro %}\n{{ f(1) }}|{{ f(2) }}\n", "  [1]\n|  [2]\n"},
		{"{%- macro f(x) -%}\n  [{{ x }}]\n  {%- endmacro -%}\n{{ f(1) }}|{{ f(2) }}\n", "[1]|[2]"},
		{"{% macro f(x) -%}\n  [{{ x }}]\n{%- endmacro %}\n{{ f(1) }}|\r\n", "[1]|"},
		{"{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(5) }}", "5,4,3,2,1,"},
		{"a\n  {% macro f() %}\n  x\n  {% endmacro %}\n  b{{ f() }}\n", "a\n  b  x\n"},
	}
	for _, c := range cases {
		if got := mustRender(t, mustParse(t, c.src), nil); got != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.src, got, c.want)
		}
	}
}

func TestRunawayMacroRecursionIsAnError(t *testing.T) {
	tmpl := mustParse(t, "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
	_, err := tmpl.Render(nil)
	if err == nil || !strings.Contains(err.Error(), "recursion") {
		t.Fatalf("want a recursion error, got %v", err)
	}
	// Deep but bounded recursion still works.
	tmpl = mustParse(t, "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}done{% endif %}{% endmacro %}{{ f(400) }}")
	if got := mustRender(t, tmpl, nil); got != "done" {
		t.Errorf("got %q", got)
	}
}

// The engine panics on some inputs (strings.Repeat with a negative count in
// indent); Render turns that into an error instead of crashing the server.
func TestEnginePanicBecomesError(t *testing.T) {
	_, err := mustParse(t, "{{ 'x' | indent(-1) }}").Render(nil)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "panic") {
		t.Fatalf("want a recovered panic as *Error, got %v", err)
	}
}

// Output prints like Python's str(); the expectation is a jinja2 render.
func TestPrintLikePython(t *testing.T) {
	tmpl := mustParse(t, `{{ none }}|{{ 2.0 }}|{{ x }}|{{- y -}}|{{ [1.0, "it's", 'a\\b', none, true, {'k': [1.5]}] }}|{{ z }}|{{ [z] }}|{{ u }}|{{ 3 }}`)
	got := mustRender(t, tmpl, map[string]any{"x": nil, "y": 0.1, "z": "tab\there \u00a0é😀\x01'\"", "u": nil})
	want := "None|2.0|None|0.1|[1.0, \"it's\", 'a\\\\b', None, True, {'k': [1.5]}]|tab\there \u00a0é😀\u0001'\"|['tab\\there \\xa0é😀\\x01\\'\"']|None|3"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
