package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"braid/internal/chat"
	"braid/internal/sharedtest"
)

const templateDir = "../../../shared/testdata/templates"

var weatherTool = json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City name, e.g. Paris"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}, "hourly": {"type": "boolean"}}, "required": ["location"]}}}`)

var timeTool = json.RawMessage(`{"type": "function", "function": {"name": "get_time", "description": "The time in a zone", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}`)

func testTools() []Tool {
	var out []Tool
	for _, raw := range []json.RawMessage{weatherTool, timeTool} {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		json.Unmarshal(raw, &t)
		out = append(out, Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	return out
}

// wantFormat is the format each template of a family in the issue must be
// detected as.
var wantFormat = map[string]Format{
	"Qwen-Qwen2.5-7B-Instruct": Hermes, "Qwen-Qwen3-0.6B": Hermes, "Qwen-QwQ-32B": Hermes,
	"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": Hermes, "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": Hermes,
	"Qwen3-Coder": QwenXML, "Qwen3.5-4B": QwenXML, "GLM-4.6": GLM,
	"meta-llama-Llama-3.1-8B-Instruct": Llama3, "meta-llama-Llama-3.2-3B-Instruct": Llama3, "meta-llama-Llama-3.3-70B-Instruct": Llama3,
	"Mistral-Small-3.2-24B-Instruct-2506": Mistral, "mistralai-Mistral-Nemo-Instruct-2407": Mistral,
	"mistralai-Ministral-3-14B-Reasoning-2512": Mistral, "unsloth-mistral-Devstral-Small-2507": Mistral,
	"openai-gpt-oss-120b": Harmony, "deepseek-ai-DeepSeek-V3.1": DeepSeek, "llama-cpp-deepseek-r1": DeepSeek,
	"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": DeepSeek, "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": DeepSeek,
}

// endsOfTurn are where a model stops: its end-of-generation tokens, or the
// next turn's header.
var endsOfTurn = []string{"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<｜end▁of▁sentence｜>", "<|call|>", "<|return|>",
	"<|user|>", "<|observation|>", "<|endoftext|>", "<|start|>functions."}

type parsedCall struct {
	Name string
	Args map[string]any
}

// assistantPart renders the conversation up to the assistant's turn and
// with it, and returns what the model would have written: the difference,
// up to its end of turn.
func assistantPart(t *testing.T, tmpl *chat.Template, calls []chat.ToolCall, content string) (prompt, reply string, ok bool) {
	tools := []any{weatherTool, timeTool}
	user := chat.Message{Role: "user", Content: "What's the weather in Paris?"}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	opts := chat.Options{AddGenerationPrompt: true, Tools: tools, BOS: "<s>", EOS: "</s>", Now: now}
	p, err := tmpl.RenderChat([]chat.Message{user}, opts)
	if err != nil {
		t.Logf("%s: prompt: %v", tmpl.Name(), err)
		return "", "", false
	}
	opts.AddGenerationPrompt = false
	// An assistant message with calls has null content, as OpenAI sends
	// it; Render (as the server) finds what the template wants.
	var c any
	if content != "" {
		c = content
	}
	full, err := Render(tmpl, []chat.Message{user, {Role: "assistant", Content: c, ToolCalls: calls}}, opts)
	if err != nil {
		t.Logf("%s: transcript: %v", tmpl.Name(), err)
		return "", "", false
	}
	if !strings.HasPrefix(full, p) {
		// Templates whose generation prompt differs from the start of an
		// assistant turn (an empty think block written only in history):
		// the reply starts after the common prefix.
		n := 0
		for n < len(p) && n < len(full) && p[n] == full[n] {
			n++
		}
		// Not inside a tag.
		if lt := strings.LastIndexByte(full[:n], '<'); lt > strings.LastIndexByte(full[:n], '>') {
			n = lt
		}
		p = p[:n]
	}
	reply = full[len(p):]
	at, _ := firstOf(reply, endsOfTurn)
	if at >= 0 {
		reply = reply[:at]
	}
	return p, reply, true
}

func call(name, args string) chat.ToolCall {
	return chat.ToolCall{ID: "call12345", Type: "function", Function: chat.FunctionCall{Name: name, Arguments: json.RawMessage(args)}}
}

// parseReply runs a reply through the reasoning parser (as the server
// does) and the tool-call parser, whole or in random pieces.
func parseReply(f Format, rf chat.ReasoningFormat, prompt, reply string, tools []Tool, rng *rand.Rand) (content string, calls []parsedCall) {
	rp := chat.NewReasoningParser(rf, prompt)
	tp := NewParser(f, tools)
	var events []Event
	feed := func(s string) {
		sp := rp.Add(s)
		events = append(events, tp.Add(sp.Content)...)
	}
	if rng == nil {
		feed(reply)
	} else {
		for rest := reply; rest != ""; {
			n := 1 + rng.IntN(min(8, len(rest)))
			for n < len(rest) && !utf8Start(rest[n]) {
				n++
			}
			feed(rest[:n])
			rest = rest[n:]
		}
	}
	events = append(events, tp.Add(rp.Flush().Content)...)
	events = append(events, tp.Flush()...)
	for _, e := range events {
		if e.Call == nil {
			content += e.Content
			continue
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(e.Call.Arguments), &args); err != nil {
			args = map[string]any{"!invalid": e.Call.Arguments}
		}
		if e.Call.ID == "" {
			args["!noid"] = true
		}
		calls = append(calls, parsedCall{e.Call.Name, args})
	}
	return content, calls
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// TestTranscripts renders conversations with tool calls through the real
// templates and parses the assistant's part back, whole and streamed in
// random pieces: the calls come back equal, nothing else is content.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(templateDir, "*.jinja"))
	if len(files) == 0 {
		sharedtest.Missing(t, "no chat templates at %s", templateDir)
	}
	sort.Strings(files)
	tested := map[string]bool{}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jinja")
		src, _ := os.ReadFile(path)
		tmpl, err := chat.Parse(name, string(src))
		if err != nil {
			t.Fatal(err)
		}
		f, known := Detect(string(src))
		want, listed := wantFormat[name]
		if listed && f != want {
			t.Errorf("%s: detected %v, want %v", name, f, want)
			continue
		}
		rf := chat.DetectReasoning(string(src))
		cases := []struct {
			calls []chat.ToolCall
			want  []parsedCall
		}{
			{[]chat.ToolCall{call("get_weather", `{"location": "Paris", "unit": "celsius"}`)},
				[]parsedCall{{"get_weather", map[string]any{"location": "Paris", "unit": "celsius"}}}},
			{[]chat.ToolCall{call("get_weather", `{"location": "São Paulo \"SP\"", "days": 3, "hourly": true}`), call("get_time", `{"zone": "Europe/Paris"}`)},
				[]parsedCall{{"get_weather", map[string]any{"location": "São Paulo \"SP\"", "days": 3.0, "hourly": true}}, {"get_time", map[string]any{"zone": "Europe/Paris"}}}},
			// Arguments as OpenAI sends them: a JSON string.
			{[]chat.ToolCall{{ID: "call12345", Type: "function", Function: chat.FunctionCall{Name: "get_time", Arguments: `{"zone": "UTC"}`}}},
				[]parsedCall{{"get_time", map[string]any{"zone": "UTC"}}}},
		}
		for ci, c := range cases {
			prompt, reply, ok := assistantPart(t, tmpl, c.calls, "")
			if !ok {
				if listed && ci == 0 {
					t.Errorf("%s: could not render the transcript", name)
				}
				continue
			}
			want := c.want
			if f == Harmony {
				want = want[:1] // the model stops at <|call|> after one call
			}
			for run := range 4 {
				var rng *rand.Rand
				if run > 0 {
					rng = rand.New(rand.NewPCG(uint64(run), uint64(ci)))
				}
				content, got := parseReply(f, rf, prompt, reply, testTools(), rng)
				if strings.TrimSpace(content) != "" || !reflect.DeepEqual(got, want) {
					if listed {
						t.Errorf("%s (case %d, run %d): reply %q\ngave calls %v and content %q, want %v", name, ci, run, reply, got, content, want)
					} else if run == 0 && ci == 0 {
						t.Logf("%s (format %v, known %v): not parsed (not a family of the issue): %q", name, f, known, reply)
					}
					break
				}
				if run == 0 && listed {
					tested[name] = true
				}
			}
		}
	}
	for name := range wantFormat {
		if !tested[name] {
			t.Errorf("%s: no transcript parsed", name)
		}
	}
}

// TestContentAroundCalls: text before (and, where the format allows it,
// after) calls stays content, and text that only looks like a call is
// content too, whole.
func TestContentAroundCalls(t *testing.T) {
	tools := testTools()
	for _, c := range []struct {
		f       Format
		text    string
		content string
		calls   int
	}{
		{Hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>", "Let me check.\n", 1},
		{Hermes, "I use <tool_call> tags like <tool_call>this</tool_call>.", "I use <tool_call> tags like <tool_call>this</tool_call>.", 0},
		{Hermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\"", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\"", 0},
		{Hermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}", "", 1},
		{Hermes, "a < b and <tool_ca", "a < b and <tool_ca", 0},
		{GLM, "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>after", "after", 1},
		{Llama3, "The answer is {\"name\": 1}", "The answer is {\"name\": 1}", 0},
		{Llama3, "{\"name\": \"unknown_fn\", \"parameters\": {}}", "{\"name\": \"unknown_fn\", \"parameters\": {}}", 0},
		{Llama3, "  {\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}", "  ", 1},
		{Llama3, "<|python_tag|>brave_search.call(query=\"weather in Paris\", n=3)", "", 1},
		{Mistral, "[TOOL_CALLS]get_time[ARGS]{\"zone\": \"UTC\"}[TOOL_CALLS]get_weather[CALL_ID]abcdefghi[ARGS]{\"location\": \"x\"}", "", 2},
		{Mistral, "[TOOL_CALLS]not json", "[TOOL_CALLS]not json", 0},
		{DeepSeek, "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "Sure.", 1},
		{Harmony, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"zone\": \"UTC\"}<|call|>", "", 1},
		{Harmony, "Hello <|channel|>final text", "Hello <|channel|>final text", 0},
	} {
		for run := range 3 {
			var rng *rand.Rand
			if run > 0 {
				rng = rand.New(rand.NewPCG(uint64(run), 5))
			}
			content, calls := parseReply(c.f, chat.ReasoningNone, "", c.text, tools, rng)
			if content != c.content || len(calls) != c.calls {
				t.Errorf("%v %q (run %d): content %q and %d calls %v, want %q and %d", c.f, c.text, run, content, len(calls), calls, c.content, c.calls)
				break
			}
		}
	}
}

func TestDetect(t *testing.T) {
	if f, ok := Detect("{{ messages }}"); ok || f != Hermes {
		t.Errorf("a template without tools: %v %v", f, ok)
	}
}

func TestFallbackTemplate(t *testing.T) {
	tmpl := Fallback()
	f, _ := Detect(fallbackSource)
	if f != Hermes {
		t.Fatalf("the fallback template reads as %v", f)
	}
	calls := []chat.ToolCall{call("get_weather", `{"location": "Paris", "unit": "celsius"}`), call("get_time", `{"zone": "UTC"}`)}
	prompt, reply, ok := assistantPart(t, tmpl, calls, "")
	if !ok {
		t.Fatal("no render")
	}
	if !strings.Contains(prompt, `"name": "get_weather"`) || !strings.Contains(prompt, "<tools>") {
		t.Errorf("the tools are not in the prompt:\n%s", prompt)
	}
	content, got := parseReply(Hermes, chat.ReasoningNone, prompt, reply, testTools(), nil)
	if strings.TrimSpace(content) != "" || len(got) != 2 || got[1].Name != "get_time" {
		t.Errorf("reply %q: content %q calls %v", reply, content, got)
	}
	out, err := Render(tmpl, []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"},
		{Role: "assistant", ToolCalls: calls[1:]}, {Role: "tool", ToolCallID: "call12345", Content: "12:00"}},
		chat.Options{AddGenerationPrompt: true, Tools: []any{timeTool}})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.\n\n# Tools"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "<tool_response>\n12:00\n</tool_response>") || !strings.HasSuffix(out, "<|im_start|>assistant\n") {
		t.Errorf("round trip render:\n%s", out)
	}
}
