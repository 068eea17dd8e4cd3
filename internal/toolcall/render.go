package toolcall

import (
	"encoding/json"
	"strings"

	"braid/internal/chat"
)

// Render renders a conversation that may hold tool calls, smoothing over
// what templates disagree on. OpenAI clients send an assistant message
// with calls as null content and the arguments as a JSON string; most
// templates want an object for the arguments, and either "" or null for
// the content (Qwen3 fails on null, GLM prints it as "None", DeepSeek-R1's
// distills write the calls only when it is null). So the arguments become
// objects, the content "" is tried first and null second, and the first
// render that succeeds and writes every call's name is taken.
func Render(t *chat.Template, msgs []chat.Message, opts chat.Options) (string, error) {
	var names []string
	empty := make([]chat.Message, len(msgs))
	null := make([]chat.Message, len(msgs))
	withNull := false
	for i, m := range msgs {
		if len(m.ToolCalls) > 0 {
			calls := make([]chat.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.Function.Arguments = objectArgs(c.Function.Arguments)
				calls[j] = c
				names = append(names, c.Function.Name)
			}
			m.ToolCalls = calls
		}
		empty[i], null[i] = m, m
		if m.Role == "assistant" && len(m.ToolCalls) > 0 && m.Content == nil {
			empty[i].Content = ""
			withNull = true
		}
	}
	out, err := t.RenderChat(empty, opts)
	if !withNull || err == nil && writesAll(out, names) {
		return out, err
	}
	if out2, err2 := t.RenderChat(null, opts); err2 == nil && writesAll(out2, names) {
		return out2, nil
	}
	return out, err
}

func writesAll(s string, names []string) bool {
	for _, n := range names {
		if !strings.Contains(s, n) {
			return false
		}
	}
	return true
}

// objectArgs turns arguments sent as a JSON string holding an object into
// that object (key order kept); anything else is left as it is.
func objectArgs(a any) any {
	s, ok := a.(string)
	if !ok {
		return a
	}
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return a
}
