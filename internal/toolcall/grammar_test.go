package toolcall

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"braid/internal/chat"
	"braid/internal/grammar"
	"braid/internal/sample"
	"braid/internal/sharedtest"
)

// byteVocab: every byte a token, plus two end tokens (ids 0 and 1).
func byteVocab() ([]string, *grammar.Vocab) {
	pieces := []string{"", ""}
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	pieces = append(pieces, tagToolCall, `{"`, `": `, `"}`, "Paris", "Europe/", `, "`, "\n</parameter>", "</arg_value>", "\n</function>",
		tagMistralCalls, tagMistralArgs, tagDSCallsBegin, tagDSCallBegin, tagDSSep, tagDSCallEnd, tagDSCallsEnd)
	return pieces, grammar.NewVocab(pieces, []int32{0, 1})
}

// TestForcedCallGrammars: for every family's template, what the forced-call
// grammar lets a model write (random logits standing for the model) parses
// back, through the reasoning and tool-call parsers, into calls of the
// allowed tools whose arguments are valid for their schemas; one call
// unless parallel calls are allowed.
func TestForcedCallGrammars(t *testing.T) {
	pieces, vocab := byteVocab()
	tools := testTools()
	names := make([]string, 0, len(wantFormat))
	for n := range wantFormat {
		names = append(names, n)
	}
	for _, name := range names {
		src, err := os.ReadFile(filepath.Join(templateDir, name+".jinja"))
		if err != nil {
			sharedtest.Missing(t, "shared chat templates absent: %v", err)
		}
		f := wantFormat[name]
		rf := chat.DetectReasoning(string(src))
		for _, spec := range []GrammarSpec{
			{Format: f, Template: string(src), Tools: tools, Parallel: true},
			{Format: f, Template: string(src), Tools: tools, Only: "get_time"},
			{Format: f, Template: string(src), Tools: tools},
		} {
			b := grammar.NewBuilder()
			n, err := Calls(b, spec)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b.Define("root", n)
			g, err := b.Build("root")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			gd := grammar.NewGuide(g, vocab)
			rng := rand.New(rand.NewPCG(uint64(len(name)), 3))
			complete, multi := 0, 0
			for i := range 12 {
				c := gd.NewConstraint()
				smp, _ := sample.New(sample.Params{Temperature: 1, TopK: 30, TopP: 1, RepeatPenalty: 1, Seed: uint64(i)}, len(pieces))
				row := make([]float32, len(pieces))
				var sb strings.Builder
				ended := false
				for range 1500 {
					for k := range row {
						row[k] = float32(rng.NormFloat64())
					}
					id := c.Sample(smp, row, false)
					if id < 2 {
						ended = true
						break
					}
					sb.WriteString(pieces[id])
					if c.Advance(id) {
						ended = true
						break
					}
				}
				if !ended {
					continue
				}
				complete++
				prompt := ""
				if rf == chat.ReasoningHarmony {
					prompt = "<|start|>assistant"
				}
				content, calls := parseReply(f, rf, prompt, sb.String(), tools, nil)
				if strings.TrimSpace(content) != "" || len(calls) == 0 {
					t.Fatalf("%s %+v: %q gave content %q and calls %v", name, spec.Only, sb.String(), content, calls)
				}
				if len(calls) > 1 {
					multi++
					if !spec.Parallel {
						t.Fatalf("%s: %d calls without parallel calls: %q", name, len(calls), sb.String())
					}
				}
				for _, pc := range calls {
					if spec.Only != "" && pc.Name != spec.Only {
						t.Fatalf("%s: called %s, only %s allowed", name, pc.Name, spec.Only)
					}
					var params string
					for _, tl := range tools {
						if tl.Name == pc.Name {
							params = string(tl.Parameters)
						}
					}
					if params == "" {
						t.Fatalf("%s: called an unknown tool %q", name, pc.Name)
					}
				}
				// Arguments as the parser gives them, against the schema.
				tp := NewParser(f, tools)
				rp := chat.NewReasoningParser(rf, prompt)
				ev := append(tp.Add(rp.Add(sb.String()).Content), tp.Add(rp.Flush().Content)...)
				for _, e := range append(ev, tp.Flush()...) {
					if e.Call == nil {
						continue
					}
					for _, tl := range tools {
						if tl.Name == e.Call.Name {
							if err := grammar.ValidateJSON(tl.Parameters, []byte(e.Call.Arguments)); err != nil {
								t.Fatalf("%s: arguments %s of %s: %v (output %q)", name, e.Call.Arguments, tl.Name, err, sb.String())
							}
						}
					}
				}
			}
			if complete == 0 {
				t.Errorf("%s %+v: no call completed", name, spec.Only)
			}
		}
	}
}

func TestForcedCallRefusals(t *testing.T) {
	tools := []Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]+$"}}}`)}}
	b := grammar.NewBuilder()
	if _, err := Calls(b, GrammarSpec{Format: Hermes, Tools: tools}); err != nil {
		t.Errorf("Hermes writes JSON arguments and can enforce a pattern: %v", err)
	}
	lengths := []Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"code":{"type":"string","minLength":2,"maxLength":3}},"required":["code"]}`)}}
	b = grammar.NewBuilder()
	n, err := Calls(b, GrammarSpec{Format: GLM, Tools: lengths})
	if err != nil {
		t.Fatalf("GLM with string lengths: %v", err)
	}
	b.Define("root", n)
	g, _ := b.Build("root")
	for text, want := range map[string]bool{
		"<tool_call>f\n<arg_key>code</arg_key>\n<arg_value>ab</arg_value>\n</tool_call>":   true,
		"<tool_call>f\n<arg_key>code</arg_key>\n<arg_value>ééé</arg_value>\n</tool_call>":  true,
		"<tool_call>f\n<arg_key>code</arg_key>\n<arg_value>a</arg_value>\n</tool_call>":    false,
		"<tool_call>f\n<arg_key>code</arg_key>\n<arg_value>abcd</arg_value>\n</tool_call>": false,
	} {
		if g.Accepts(text) != want {
			t.Errorf("%q: got %v", text, !want)
		}
	}
	_, err = Calls(grammar.NewBuilder(), GrammarSpec{Format: QwenXML, Tools: tools})
	if err == nil || !strings.Contains(err.Error(), `tool "f"`) || !strings.Contains(err.Error(), "pattern") {
		t.Errorf("QwenXML with a pattern: %v", err)
	}
	_, err = Calls(grammar.NewBuilder(), GrammarSpec{Format: Hermes, Tools: []Tool{{Name: "g", Parameters: []byte(`{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}`)}}})
	var se *grammar.SchemaError
	if err == nil || !strings.Contains(err.Error(), "multipleOf") || !errorsAs(err, &se) {
		t.Errorf("multipleOf: %v", err)
	}
	if _, err := Calls(grammar.NewBuilder(), GrammarSpec{Format: Hermes, Tools: tools, Only: "nope"}); err == nil {
		t.Error("an unknown function was accepted")
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestLazyGrammar: with tool_choice auto and strict tools, text passes
// freely, and a call, once its marker is written, is held to the schema:
// random output always parses into valid calls and content without a
// marker.
func TestLazyGrammar(t *testing.T) {
	pieces, vocab := byteVocab()
	tools := testTools()
	for _, f := range []Format{Hermes, QwenXML, GLM, Mistral, DeepSeek} {
		tmpl := ""
		if f == Mistral {
			tmpl = tagMistralArgs
		}
		b := grammar.NewBuilder()
		n, ok, err := Lazy(b, GrammarSpec{Format: f, Template: tmpl, Tools: tools, Parallel: true})
		if err != nil || !ok {
			t.Fatalf("%v: %v %v", f, ok, err)
		}
		b.Define("root", n)
		g, err := b.Build("root")
		if err != nil {
			t.Fatal(err)
		}
		if !g.Accepts("Just an answer, with <tags> and [brackets].") {
			t.Errorf("%v: refuses plain text", f)
		}
		gd := grammar.NewGuide(g, vocab)
		rng := rand.New(rand.NewPCG(uint64(f), 8))
		calls := 0
		for i := range 30 {
			c := gd.NewConstraint()
			smp, _ := sample.New(sample.Params{Temperature: 1, TopK: 50, TopP: 1, RepeatPenalty: 1, Seed: uint64(i)}, len(pieces))
			row := make([]float32, len(pieces))
			var sb strings.Builder
			for range 800 {
				for k := range row {
					row[k] = float32(rng.NormFloat64())
				}
				// Push the model toward the marker now and then.
				if rng.IntN(40) == 0 {
					start := f.Marker()
					if f == DeepSeek {
						start = tagDSCallsBegin
					}
					row[slices.Index(pieces, start)] = 20
				}
				id := c.Sample(smp, row, false)
				if id < 2 {
					break
				}
				sb.WriteString(pieces[id])
				if c.Advance(id) {
					break
				}
			}
			tp := NewParser(f, tools)
			ev := append(tp.Add(sb.String()), tp.Flush()...)
			for _, e := range ev {
				if e.Call == nil {
					if strings.Contains(e.Content, f.Marker()) && strings.Count(sb.String(), f.Marker()) > 0 && c.Accepting() {
						t.Fatalf("%v: a finished reply has a marker in its content: %q", f, sb.String())
					}
					continue
				}
				calls++
				for _, tl := range tools {
					if tl.Name == e.Call.Name {
						if err := grammar.ValidateJSON(tl.Parameters, []byte(e.Call.Arguments)); err != nil {
							t.Fatalf("%v: %s(%s): %v", f, e.Call.Name, e.Call.Arguments, err)
						}
					}
				}
			}
		}
		if calls == 0 {
			t.Errorf("%v: no call in 30 replies", f)
		}
	}
	if _, ok, _ := Lazy(grammar.NewBuilder(), GrammarSpec{Format: Llama3, Tools: tools}); ok {
		t.Error("Llama 3 has no marker to wait for")
	}
}
