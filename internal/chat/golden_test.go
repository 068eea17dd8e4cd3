package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"braid/internal/sharedtest"
)

const goldenDir = "../../../shared/testdata/templates"

// goldenNow is the fixed clock the goldens were rendered with.
var goldenNow = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

type goldenFile struct {
	Template string       `json:"template"`
	Cases    []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name    string          `json:"name"`
	Context json.RawMessage `json:"context"`
	Output  *string         `json:"output"`
	Error   string          `json:"error"`
	Note    string          `json:"note"`
}

// knownMismatch lists golden cases that do not render like Python, with
// the reason; key "template/case". Anything not listed must match.
var knownMismatch = map[string]string{
	// Python fails on '): ' + param_fields.description: jinja2's Undefined
	// refuses '+' (UndefinedError "'dict object' has no attribute
	// 'description'"), because the tool has no per-parameter description.
	// ardanlabs/jinja treats Undefined as "" in '+' and renders the prompt;
	// its '+' is not reachable from outside the engine.
	"CohereForAI-c4ai-command-r-plus-tool_use/c_tools_nogen":         undefinedPlus,
	"CohereForAI-c4ai-command-r-plus-tool_use/c_tools_gen":           undefinedPlus,
	"CohereForAI-c4ai-command-r-plus-tool_use/d_tools_strargs_nogen": undefinedPlus,
	"CohereForAI-c4ai-command-r-plus-tool_use/d_tools_strargs_gen":   undefinedPlus,
	// Python fails on str + dict (TypeError "can only concatenate str (not
	// \"dict\") to str") when the template concatenates the dict arguments;
	// ardanlabs/jinja's '+' stringifies the dict and renders.
	"meetkai-functionary-medium-v3.2/c_tools_nogen": strPlusDict,
	"meetkai-functionary-medium-v3.2/c_tools_gen":   strPlusDict,
	// The template writes "'\n"|safe + t["function"] | tojson(). In jinja2
	// |safe makes a Markup, and Markup + str HTML-escapes the str; HF's
	// tojson returns a plain str, so Python prints the tool JSON as
	// {&#34;name&#34;: ...}. ardanlabs/jinja has no Markup type (|safe is
	// the identity) and prints plain JSON, as llama.cpp does.
	"meetkai-functionary-medium-v3.1/c_tools_nogen":         markupConcat,
	"meetkai-functionary-medium-v3.1/c_tools_gen":           markupConcat,
	"meetkai-functionary-medium-v3.1/d_tools_strargs_nogen": markupConcat,
	"meetkai-functionary-medium-v3.1/d_tools_strargs_gen":   markupConcat,
}

const (
	undefinedPlus = "Python raises on str + Undefined; the engine renders Undefined as \"\""
	strPlusDict   = "Python raises on str + dict; the engine stringifies the dict"
	markupConcat  = "Python HTML-escapes str concatenated to |safe Markup; the engine has no Markup"
)

func loadGoldens(t *testing.T) map[string]goldenFile {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if len(files) == 0 {
		sharedtest.Missing(t, "no chat-template goldens at %s (shared test data not checked out)", goldenDir)
	}
	out := map[string]goldenFile{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g goldenFile
		if err := json.Unmarshal(data, &g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = g
	}
	return out
}

func TestGoldens(t *testing.T) {
	goldens := loadGoldens(t)
	names := make([]string, 0, len(goldens))
	for n := range goldens {
		names = append(names, n)
	}
	sort.Strings(names)
	var total, matched int
	for _, name := range names {
		g := goldens[name]
		src, err := os.ReadFile(filepath.Join(goldenDir, g.Template))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, perr := Parse(g.Template, string(src))
		for _, c := range g.Cases {
			total++
			key := name + "/" + c.Name
			reason, known := knownMismatch[key]
			var same bool
			ok := t.Run(key, func(t *testing.T) {
				if perr != nil {
					t.Fatalf("parse: %v", perr)
				}
				vals, err := contextVars(c.Context)
				if err != nil {
					t.Fatal(err)
				}
				got, err := tmpl.render(vals, func() time.Time { return goldenNow })
				switch {
				case c.Output == nil && err != nil:
					same = true
					t.Logf("error as expected: python %q, here %v", c.Error, err)
				case c.Output == nil:
					if !known {
						t.Fatalf("want error %q, got output:\n%s", c.Error, got)
					}
				case err != nil:
					if !known {
						t.Fatalf("render: %v", err)
					}
				case got == *c.Output:
					same = true
				default:
					if !known {
						t.Errorf("output differs\n%s", diffAt(*c.Output, got))
					}
				}
				if known {
					if same {
						t.Errorf("listed in knownMismatch but matches now; remove it")
					}
					t.Logf("known mismatch: %s", reason)
				}
			})
			if ok && same {
				matched++
			}
		}
	}
	t.Logf("%d of %d golden cases match Python jinja2 byte for byte (errors where Python errs)", matched, total)
}

// diffAt shows where two renders first differ.
func diffAt(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-80)
	return "first difference at byte " + itoa(i) + "\nwant: " + quoteClip(want[lo:], 200) + "\ngot:  " + quoteClip(got[lo:], 200)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func quoteClip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// TestGoldensRenderChat renders the golden conversations through the typed
// API (messages decoded into []Message as a server would, tools kept as
// raw JSON) and expects the same prompts as the raw-variable path.
func TestGoldensRenderChat(t *testing.T) {
	goldens := loadGoldens(t)
	for name, g := range goldens {
		src, err := os.ReadFile(filepath.Join(goldenDir, g.Template))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Parse(g.Template, string(src))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range g.Cases {
			if c.Output == nil || knownMismatch[name+"/"+c.Name] != "" {
				continue
			}
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				msgs, opts := goldenChatArgs(t, c.Context)
				got, err := tmpl.RenderChat(msgs, opts)
				if err != nil {
					t.Fatalf("render: %v", err)
				}
				if got != *c.Output {
					t.Errorf("output differs\n%s", diffAt(*c.Output, got))
				}
			})
		}
	}
}

// goldenChatArgs turns a golden context into RenderChat's arguments, as a
// server would build them: messages decoded into []Message, tools kept as
// raw JSON, other variables in Extra.
func goldenChatArgs(t *testing.T, context json.RawMessage) ([]Message, Options) {
	t.Helper()
	var ctx map[string]json.RawMessage
	if err := json.Unmarshal(context, &ctx); err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	if err := json.Unmarshal(ctx["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	opts := Options{Now: goldenNow, Extra: map[string]any{}}
	for k, v := range ctx {
		switch k {
		case "messages", "datetime", "date_string":
		case "add_generation_prompt":
			opts.AddGenerationPrompt = string(v) == "true"
		case "bos_token":
			json.Unmarshal(v, &opts.BOS)
		case "eos_token":
			json.Unmarshal(v, &opts.EOS)
		case "tools":
			var tools []json.RawMessage
			if err := json.Unmarshal(v, &tools); err != nil {
				t.Fatal(err)
			}
			for _, tool := range tools {
				opts.Tools = append(opts.Tools, tool)
			}
		default:
			opts.Extra[k] = v
		}
	}
	return msgs, opts
}
