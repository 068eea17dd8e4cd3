// Package toolcall reads the tool calls a model writes, in the syntax its
// chat template taught it, and writes the grammars that make a model call a
// tool. Each format's parser follows the format's published description
// (the model card or the chat template's own instructions):
//
//   - Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
//     (Qwen2.5, Qwen3, Hermes 2 and 3; also the fallback);
//   - Qwen XML: <tool_call><function=NAME><parameter=P>VALUE</parameter>
//     </function></tool_call> (Qwen3-Coder, Qwen3.5);
//   - GLM: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>
//     </tool_call> (GLM-4.5 and later);
//   - Llama 3: a reply that is {"name": ..., "parameters": {...}}, or
//     <|python_tag|> before it or before a built-in tool's NAME.call(k="v");
//   - Mistral: [TOOL_CALLS] then a JSON list of calls (v3 tokenizers) or
//     NAME[ARGS]{...}, NAME[CALL_ID]ID[ARGS]{...} (v11 and later);
//   - Harmony (gpt-oss): a message whose header names a recipient,
//     "to=functions.NAME", with the arguments as its body up to <|call|>;
//   - DeepSeek: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
//     <｜tool▁sep｜>NAME ```json ARGS ```<｜tool▁call▁end｜>... (V3, R1) or
//     <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜> (V3.1).
//
// Parsing streams: text arrives in pieces, content passes as soon as it
// cannot be the start of a call, and a call is emitted when it is complete.
// Text that does not parse as a call stays content: nothing is lost.
package toolcall

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
)

// Format is a model family's syntax for tool calls.
type Format int

// The formats.
const (
	None Format = iota
	Hermes
	QwenXML
	GLM
	Llama3
	Mistral
	Harmony
	DeepSeek
)

var formatNames = map[Format]string{None: "none", Hermes: "hermes", QwenXML: "qwen-xml", GLM: "glm", Llama3: "llama3",
	Mistral: "mistral", Harmony: "harmony", DeepSeek: "deepseek"}

func (f Format) String() string {
	if n, ok := formatNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Tags of the formats: special tokens that must reach the parser as text.
const (
	tagToolCall     = "<tool_call>"
	tagToolCallEnd  = "</tool_call>"
	tagPythonTag    = "<|python_tag|>"
	tagMistralCalls = "[TOOL_CALLS]"
	tagMistralArgs  = "[ARGS]"
	tagMistralID    = "[CALL_ID]"
	tagDSCallsBegin = "<｜tool▁calls▁begin｜>"
	tagDSCallsEnd   = "<｜tool▁calls▁end｜>"
	tagDSCallBegin  = "<｜tool▁call▁begin｜>"
	tagDSCallEnd    = "<｜tool▁call▁end｜>"
	tagDSSep        = "<｜tool▁sep｜>"
	tagHStart       = "<|start|>"
	tagHChannel     = "<|channel|>"
	tagHMessage     = "<|message|>"
	tagHConstrain   = "<|constrain|>"
	tagHEnd         = "<|end|>"
	tagHCall        = "<|call|>"
	tagHReturn      = "<|return|>"
)

// Detect picks the format from a chat template's source: the markers it
// writes calls with. A template that mentions tools in no known syntax
// gets Hermes, the most common; one that never mentions them, None.
func Detect(templateSource string) (Format, bool) {
	has := func(s string) bool { return strings.Contains(templateSource, s) }
	switch {
	case has(tagHChannel):
		return Harmony, true
	case has("tool▁calls▁begin"):
		return DeepSeek, true
	case has(tagMistralCalls):
		return Mistral, true
	case has("<arg_key>"):
		return GLM, true
	case has("<function=") && has(tagToolCall):
		return QwenXML, true
	case has(tagToolCall):
		return Hermes, true
	case has(tagPythonTag) || has("<|start_header_id|>") && has(`"parameters"`):
		return Llama3, true
	}
	return Hermes, false
}

// Tags are the special tokens f's parser reads; a detokenizer that drops
// control tokens must write these.
func (f Format) Tags() []string {
	switch f {
	case Hermes, QwenXML, GLM:
		return []string{tagToolCall, tagToolCallEnd}
	case Llama3:
		return []string{tagPythonTag}
	case Mistral:
		return []string{tagMistralCalls, tagMistralArgs, tagMistralID}
	case DeepSeek:
		return []string{tagDSCallsBegin, tagDSCallsEnd, tagDSCallBegin, tagDSCallEnd, tagDSSep}
	case Harmony:
		return []string{tagHStart, tagHChannel, tagHMessage, tagHConstrain, tagHEnd, tagHCall, tagHReturn}
	}
	return nil
}

// Call is one complete tool call.
type Call struct {
	ID        string
	Name      string
	Arguments string // a JSON object
}

// Event is one step of a parsed stream: content text, or a complete call
// (in the order the model wrote them).
type Event struct {
	Content string
	Call    *Call
}

// Tool is a function the request offers, as the parsers need it: its
// name and its parameters' schema (for the formats that write arguments as
// text, whose types the schema decides).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// NewID returns a tool call id in the format's style: Mistral's templates
// want nine letters and digits, the others take OpenAI's "call_" ids.
func NewID(f Format) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [24]byte
	rand.Read(b[:])
	n := 24
	if f == Mistral {
		n = 9
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = alnum[int(b[i])%len(alnum)]
	}
	if f == Mistral {
		return string(out)
	}
	return "call_" + string(out)
}
