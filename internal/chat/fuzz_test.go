package chat

import (
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary template sources through Parse and Render:
// both must return (an error is fine) and never panic or kill the process.
// Engine panics are recovered inside Parse and Render and turned into
// *Error; runaway macro recursion is stopped by the depth guard.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"{{ messages[0].content }}",
		"{%- for m in messages -%}{{ m.role }}{% if loop.last %}!{% endif %}{%- endfor -%}",
		"{% set ns = namespace(x=1) %}{% set ns.x = ns.x + 1 %}{{ ns.x }}",
		"{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
		"{{ tools | tojson(indent=2) }}{{ raise_exception('no') }}",
		"{{ strftime_now('%d %b %Y') }}{% generation %}x{% endgeneration %}",
		"{% if x is mapping %}{{ x.items() | list }}{% elif x is string %}{{ x | trim }}{% endif %}",
		"{{ 'a' ~ b | default('c') }}{# c #}{% raw %}{{ x }}{% endraw %}",
		"{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif -%}",
		"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}",
		"{{ (messages[-1:] | first).content.split('x')[0] }}",
		"{% for k, v in tools[0].function.parameters.properties.items() %}{{ k }}:{{ v.type }}{% endfor %}",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	msgs := []Message{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: []any{map[string]any{"type": "text", "text": "hi"}}},
		{Role: "assistant", Content: nil, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: map[string]any{"a": 1}}}}},
		{Role: "tool", Content: "7", ToolCallID: "c1", Name: "f"},
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}}}}}}
	f.Fuzz(func(t *testing.T, src string) {
		// Resource exhaustion is not what this looks for: string and
		// number multiplication and range() can ask for any amount of
		// memory, in Python too.
		if len(src) > 4096 || strings.ContainsAny(src, "*") || strings.Contains(src, "range") {
			t.Skip()
		}
		tmpl, err := Parse("fuzz.jinja", src)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse error is %T, not *Error: %v", err, err)
			}
			return
		}
		_, err = tmpl.RenderChat(msgs, Options{AddGenerationPrompt: true, Tools: tools, BOS: "<s>", EOS: "</s>", Now: now})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Render error is %T, not *Error: %v", err, err)
			}
		}
	})
}
