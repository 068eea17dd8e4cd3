package toolcall

import "braid/internal/chat"

// fallbackSource is the template for models without one when a request
// has tools: ChatML, with the tools and calls written the Hermes way.
const fallbackSource = `{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first and tools %}
{%- elif message.role == 'assistant' and message.tool_calls %}
{{- '<|im_start|>assistant\n' }}
{%- if message.content %}{{- message.content + '\n' }}{%- endif %}
{%- for tc in message.tool_calls %}
{{- '<tool_call>\n{"name": ' + (tc.function.name | tojson) + ', "arguments": ' + (tc.function.arguments | tojson) + '}\n</tool_call>' }}
{%- if not loop.last %}{{- '\n' }}{%- endif %}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>user\n<tool_response>\n' + message.content + '\n</tool_response><|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' }}
{%- if message.content is string %}{{- message.content }}{%- endif %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

var fallback = func() *chat.Template {
	t, err := chat.Parse("chatml-tools", fallbackSource)
	if err != nil {
		panic(err)
	}
	return t
}()

// Fallback is the chat template for a model without one when a request
// offers tools: ChatML with Hermes-style tools and calls.
func Fallback() *chat.Template { return fallback }
