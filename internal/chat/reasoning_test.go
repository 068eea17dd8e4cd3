package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"braid/internal/sharedtest"
)

type reasoningCase struct {
	name      string
	prompt    string // the rendered prompt the output continues
	in        string
	reasoning string
	content   string
}

var thinkCases = []reasoningCase{
	{name: "tags in output", prompt: "<|im_start|>assistant\n",
		in: "<think>\nLet me add: 2+2=4.\n</think>\n\nThe answer is 4.", reasoning: "Let me add: 2+2=4.", content: "The answer is 4."},
	{name: "opened in prompt", prompt: "<｜Assistant｜><think>\n",
		in: "The user greets me.\n\nI reply.\n</think>\n\nHello!", reasoning: "The user greets me.\n\nI reply.", content: "Hello!"},
	{name: "opened and repeated", prompt: "assistant\n<think>\n",
		in: "<think>\nhm</think>ok", reasoning: "hm", content: "ok"},
	{name: "closed in prompt", prompt: "<|im_start|>assistant\n<think>\n\n</think>\n\n",
		in: "Just the answer.", content: "Just the answer."},
	{name: "no thinking", prompt: "<|assistant|>",
		in: "Plain answer with </think> inside", content: "Plain answer with </think> inside"},
	{name: "unterminated", prompt: "<think>",
		in: "still thinking when the limit hit\n\n", reasoning: "still thinking when the limit hit"},
	{name: "empty reasoning", prompt: "",
		in: "<think>\n\n</think>\n\nAnswer\n", content: "Answer\n"},
	{name: "only think tag", prompt: "", in: "<think>"},
	{name: "think prefix is content", prompt: "", in: "<thinking is fun", content: "<thinking is fun"},
	{name: "lookalike inside", prompt: "<think>",
		in: "a </thinker> b </think> c", reasoning: "a </thinker> b", content: "c"},
	{name: "utf8", prompt: "<think>\n",
		in: "日本語で考える 🤔\n</think>\n答え", reasoning: "日本語で考える 🤔", content: "答え"},
	{name: "empty", prompt: "<think>"},
}

var harmonyCases = []reasoningCase{
	{name: "analysis then final",
		in:        "<|channel|>analysis<|message|>User says hi. Respond.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
		reasoning: "User says hi. Respond.", content: "Hello! How can I help?"},
	{name: "return dropped by the detokenizer",
		in:        "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>answer",
		reasoning: "think", content: "answer"},
	{name: "final only",
		in: "<|channel|>final<|message|>Just this.", content: "Just this."},
	{name: "two analysis messages",
		in:        "<|channel|>analysis<|message|>one.<|end|><|start|>assistant<|channel|>analysis<|message|> two.<|end|><|start|>assistant<|channel|>final<|message|>done",
		reasoning: "one. two.", content: "done"},
	{name: "tool call kept whole",
		in:        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
		reasoning: "Need weather.",
		content:   "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"},
	{name: "recipient first",
		in:      " to=functions.f<|channel|>commentary json<|message|>{}",
		content: " to=functions.f<|channel|>commentary json<|message|>{}"},
	{name: "commentary preamble is content",
		in: "<|channel|>commentary<|message|>Let me check.<|end|>", content: "Let me check."},
	{name: "missing end tag",
		in:        "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b",
		reasoning: "a", content: "b"},
	{name: "plain text model", in: "No harmony here < at all", content: "No harmony here < at all"},
	{name: "cut inside header",
		in: "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|chan", reasoning: "x"},
	{name: "cut inside tool header",
		in: "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.f", reasoning: "x",
		content: "<|start|>assistant to=functions.f"},
	{name: "text between messages",
		in:        "<|channel|>analysis<|message|>r<|end|>stray<|start|>assistant<|channel|>final<|message|>c",
		reasoning: "r", content: "strayc"},
	{name: "lookalike tag in body",
		in: "<|channel|>final<|message|>a <|ending|> b", content: "a <|ending|> b"},
	{name: "oversized header",
		in:      "<|start|>" + strings.Repeat("é", 300) + "<|message|>x",
		content: "<|start|>" + strings.Repeat("é", 300) + "<|message|>x"},
	{name: "utf8",
		in: "<|channel|>analysis<|message|>考え<|end|><|start|>assistant<|channel|>final<|message|>答え🙂", reasoning: "考え", content: "答え🙂"},
	{name: "empty"},
}

// parseAll runs text through a parser in the given pieces and returns the
// split and every byte as classified, in order.
func parseAll(f ReasoningFormat, prompt string, pieces []string) (Split, string) {
	p := NewReasoningParser(f, prompt)
	var all strings.Builder
	p.trace = func(_ segKind, s string) { all.WriteString(s) }
	var got Split
	add := func(s Split) {
		got.Reasoning += s.Reasoning
		got.Content += s.Content
	}
	for _, piece := range pieces {
		add(p.Add(piece))
	}
	add(p.Flush())
	return got, all.String()
}

// checkChunkings expects the same split whole, cut at every point into
// two, and byte by byte, with no byte lost.
func checkChunkings(t *testing.T, f ReasoningFormat, c reasoningCase) {
	t.Helper()
	check := func(how string, pieces []string) {
		t.Helper()
		got, all := parseAll(f, c.prompt, pieces)
		if got.Reasoning != c.reasoning || got.Content != c.content {
			t.Errorf("%s: got reasoning %q content %q, want %q and %q", how, got.Reasoning, got.Content, c.reasoning, c.content)
		}
		if all != c.in {
			t.Errorf("%s: classified bytes %q are not the input %q", how, all, c.in)
		}
	}
	check("whole", []string{c.in})
	for i := 0; i <= len(c.in); i++ {
		check("split at "+itoa(i), []string{c.in[:i], c.in[i:]})
	}
	bytes := make([]string, len(c.in))
	for i := 0; i < len(c.in); i++ {
		bytes[i] = c.in[i : i+1]
	}
	check("byte by byte", bytes)
}

func TestReasoningThink(t *testing.T) {
	for _, c := range thinkCases {
		t.Run(c.name, func(t *testing.T) { checkChunkings(t, ReasoningThink, c) })
	}
}

func TestReasoningHarmony(t *testing.T) {
	for _, c := range harmonyCases {
		t.Run(c.name, func(t *testing.T) { checkChunkings(t, ReasoningHarmony, c) })
	}
}

func TestReasoningNoneIsAllContent(t *testing.T) {
	in := "<think>a</think><|channel|>analysis<|message|>b"
	checkChunkings(t, ReasoningNone, reasoningCase{in: in, content: in})
}

// TestReasoningStreamsEarly checks that held-back text is only what could
// still be a tag: reasoning reaches the client as it is generated.
func TestReasoningStreamsEarly(t *testing.T) {
	p := NewReasoningParser(ReasoningHarmony, "")
	if s := p.Add("<|channel|>analysis<|message|>Thinking about it <|"); s.Reasoning != "Thinking about it " {
		t.Errorf("harmony: got %+v before a possible tag", s)
	}
	if s := p.Add("end|>"); s != (Split{}) {
		t.Errorf("harmony: end tag gave %+v", s)
	}
	p = NewReasoningParser(ReasoningThink, "<think>\n")
	if s := p.Add("step one\n\n</thi"); s.Reasoning != "step one" {
		t.Errorf("think: got %+v before a possible </think>", s)
	}
	if s := p.Add("nk>\nyes"); s.Content != "yes" || s.Reasoning != "" {
		t.Errorf("think: after </think> got %+v", s)
	}
	p = NewReasoningParser(ReasoningHarmony, "")
	if s := p.Add("Hi"); s.Content != "Hi" {
		t.Errorf("harmony on plain text: got %+v, want the text at once", s)
	}
}

func TestDetectReasoning(t *testing.T) {
	want := map[string]ReasoningFormat{
		"openai-gpt-oss-120b":                      ReasoningHarmony,
		"Qwen-Qwen3-0.6B":                          ReasoningThink,
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ReasoningThink,
		"GLM-4.6":                          ReasoningThink,
		"Qwen-Qwen2.5-7B-Instruct":         ReasoningNone,
		"meta-llama-Llama-3.1-8B-Instruct": ReasoningNone,
	}
	for name, f := range want {
		src, err := os.ReadFile(filepath.Join(goldenDir, name+".jinja"))
		if err != nil {
			sharedtest.Missing(t, "shared templates absent: %v", err)
		}
		if got := DetectReasoning(string(src)); got != f {
			t.Errorf("%s: detected %v, want %v", name, got, f)
		}
	}
	if DetectReasoning(ChatML().Source()) != ReasoningNone {
		t.Error("ChatML detected as a reasoning format")
	}
}

func TestCheckReasoningEffort(t *testing.T) {
	for _, e := range []string{"low", "medium", "high"} {
		if err := CheckReasoningEffort(e); err != nil {
			t.Error(err)
		}
	}
	err := CheckReasoningEffort("max")
	if err == nil || !strings.Contains(err.Error(), `"max"`) {
		t.Errorf("max: error %v does not name the value", err)
	}
}

// TestHarmonyReasoningEffort renders gpt-oss's template with each
// reasoning_effort and expects the golden prompt (rendered without it, so
// with the template's default "medium") with that effort in the system
// message's "Reasoning:" line.
func TestHarmonyReasoningEffort(t *testing.T) {
	const name = "openai-gpt-oss-120b"
	g, ok := loadGoldens(t)[name]
	if !ok {
		sharedtest.Missing(t, "no golden for %s", name)
	}
	src, err := os.ReadFile(filepath.Join(goldenDir, g.Template))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(g.Template, string(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Cases {
		if c.Output == nil {
			continue
		}
		if strings.Count(*c.Output, "Reasoning: medium\n") != 1 {
			t.Fatalf("%s: golden has no single default effort line", c.Name)
		}
		for _, effort := range ReasoningEfforts {
			msgs, opts := goldenChatArgs(t, c.Context)
			opts.Extra["reasoning_effort"] = effort
			got, err := tmpl.RenderChat(msgs, opts)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.Name, effort, err)
			}
			want := strings.Replace(*c.Output, "Reasoning: medium\n", "Reasoning: "+effort+"\n", 1)
			if got != want {
				t.Errorf("%s/%s:\n%s", c.Name, effort, diffAt(want, got))
			}
		}
	}
}

// FuzzReasoningParser feeds arbitrary output to every format, whole, in two
// pieces and byte by byte: it must not panic, must classify every byte in
// order (reasoning + content + dropped markup is the input), and must split
// the same however the text is cut.
func FuzzReasoningParser(f *testing.F) {
	for _, c := range append(append([]reasoningCase{}, thinkCases...), harmonyCases...) {
		f.Add(c.in, uint(len(c.in)/2), c.prompt != "")
	}
	f.Add("<|start|><|start|><|message|><|end|><|channel|>", uint(3), false)
	f.Add(" to=<think></think><|call|>\xff\xfe", uint(5), true)
	f.Fuzz(func(t *testing.T, in string, cut uint, opened bool) {
		if len(in) > 4096 {
			t.Skip()
		}
		prompt := ""
		if opened {
			prompt = "<think>\n"
		}
		k := int(cut % uint(len(in)+1))
		bytes := make([]string, len(in))
		for i := 0; i < len(in); i++ {
			bytes[i] = in[i : i+1]
		}
		for _, fm := range []ReasoningFormat{ReasoningNone, ReasoningThink, ReasoningHarmony} {
			whole, all := parseAll(fm, prompt, []string{in})
			if all != in {
				t.Fatalf("%v: classified bytes %q are not the input %q", fm, all, in)
			}
			for _, pieces := range [][]string{{in[:k], in[k:]}, bytes} {
				got, all := parseAll(fm, prompt, pieces)
				if all != in {
					t.Fatalf("%v in %d pieces: classified bytes %q are not the input %q", fm, len(pieces), all, in)
				}
				if got != whole {
					t.Fatalf("%v in %d pieces: got %+v, whole gave %+v", fm, len(pieces), got, whole)
				}
			}
			if utf8.ValidString(in) && (!utf8.ValidString(whole.Reasoning) || !utf8.ValidString(whole.Content)) {
				t.Fatalf("%v: valid UTF-8 input split inside a character: %+v", fm, whole)
			}
		}
	})
}

type fakeVocab map[string]bool // token text -> is a control token

func (v fakeVocab) TokenID(text string) (int32, bool) {
	for i, t := range []string{"<think>", "</think>", "<|channel|>", "<|message|>"} {
		if t == text && v[t] {
			return int32(i), true
		}
	}
	return -1, false
}

func (v fakeVocab) IsControl(id int32) bool { return id == 1 }

func TestControlTags(t *testing.T) {
	v := fakeVocab{"<think>": true, "</think>": true}
	got := ReasoningThink.ControlTags(v)
	if len(got) != 1 || !got[1] {
		t.Errorf("think: %v, want only </think> (id 1), the control one", got)
	}
	if got := ReasoningHarmony.ControlTags(v); len(got) != 0 {
		t.Errorf("harmony on a vocabulary without its tags: %v", got)
	}
}
