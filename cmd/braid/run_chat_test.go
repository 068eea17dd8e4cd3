package main

import (
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/chat"
	"braid/internal/gguf"
)

// printChat feeds output through a chatPrinter byte by byte, as tokens can
// cut it anywhere, and returns what it printed.
func printChat(f chat.ReasoningFormat, prompt, output string, hide, tty bool) string {
	var b strings.Builder
	p := &chatPrinter{w: &b, hide: hide, tty: tty}
	if f != chat.ReasoningNone {
		p.parser = chat.NewReasoningParser(f, prompt)
	}
	for i := 0; i < len(output); i++ {
		p.write(output[i : i+1])
	}
	p.close()
	return b.String()
}

func TestChatPrinter(t *testing.T) {
	harmony := "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer."
	think := "Think.\n</think>\n\nAnswer."
	for _, c := range []struct {
		name      string
		f         chat.ReasoningFormat
		prompt    string
		out       string
		hide, tty bool
		want      string
	}{
		{"harmony piped", chat.ReasoningHarmony, "", harmony, false, false, "----- reasoning -----\nThink.\n----- answer -----\nAnswer."},
		{"harmony terminal", chat.ReasoningHarmony, "", harmony, false, true, "\x1b[2mThink.\x1b[0m\n\nAnswer."},
		{"harmony hidden", chat.ReasoningHarmony, "", harmony, true, true, "Answer."},
		{"think piped", chat.ReasoningThink, "<think>\n", think, false, false, "----- reasoning -----\nThink.\n----- answer -----\nAnswer."},
		{"think hidden", chat.ReasoningThink, "<think>\n", think, true, false, "Answer."},
		// Cut off while thinking: the faint style must not leak into the
		// shell.
		{"unfinished terminal", chat.ReasoningThink, "<think>\n", "Still thinking", false, true, "\x1b[2mStill thinking\x1b[0m\n\n"},
		{"raw", chat.ReasoningNone, "", harmony, false, true, harmony},
	} {
		if got := printChat(c.f, c.prompt, c.out, c.hide, c.tty); got != c.want {
			t.Errorf("%s: printed %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRunReasoningFlags(t *testing.T) {
	for _, c := range []struct {
		args     []string
		contains string
	}{
		{[]string{"--reasoning-format", "raw"}, `"raw"`},
		{[]string{"--reasoning-effort", "max"}, `"max"`},
	} {
		args := append([]string{"run", "-m", "absent.gguf", "-p", "hi", "--chat"}, c.args...)
		if _, errOut, code := braid(t, "", args...); code != 2 || !strings.Contains(errOut, c.contains) {
			t.Errorf("braid %v: exit %d stderr %q; want exit 2 naming %s", args, code, errOut, c.contains)
		}
	}
}

// withTemplate writes a copy of the GGUF at src with tokenizer.chat_template
// set to tmpl.
func withTemplate(t *testing.T, src, tmpl string) string {
	t.Helper()
	m, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := gguf.NewWriter()
	f := m.Files[0]
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
	w.Set("tokenizer.chat_template", gguf.String(tmpl))
	for i, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, f.TensorData(i)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "templated.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunChatReasoning runs stories260K under a template that opens <think>
// in the prompt, so all it writes is reasoning: printed after the
// reasoning separator (stdout is a pipe), hidden with --hide-reasoning, raw
// with --reasoning-format none.
func TestRunChatReasoning(t *testing.T) {
	src := filepath.Join(shared, "models", "stories260K", "stories260K-F32.gguf")
	needShared(t, src)
	model := withTemplate(t, src, "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n")
	run := func(extra ...string) string {
		args := append([]string{"run", "-m", model, "-p", "Once upon a time", "-n", "20", "--temp", "0", "--chat"}, extra...)
		out, errOut, code := braid(t, "", args...)
		if code != 0 {
			t.Fatalf("braid %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	raw := run("--reasoning-format", "none")
	story := strings.Trim(raw, " \t\r\n")
	if story == "" {
		t.Fatalf("raw output is empty: %q", raw)
	}
	if got, want := run(), "----- reasoning -----\n"+story+"\n----- answer -----\n\n"; got != want {
		t.Errorf("split output %q, want %q", got, want)
	}
	if got := run("--hide-reasoning"); got != "\n" {
		t.Errorf("--hide-reasoning printed %q, want only the final newline", got)
	}
}
