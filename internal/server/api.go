package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"braid/internal/chat"
	"braid/internal/sample"
)

// apiError is an error in OpenAI's shape with its HTTP status.
type apiError struct {
	Status  int
	Type    string
	Message string
	Param   string
	Code    string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, a...)}
}

// errorBody is the JSON OpenAI's SDKs parse into their error types.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = e.Message, e.Type
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// stopList is OpenAI's stop field: a string or a list of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop must be a string or a list of strings")
	}
	*s = many
	return nil
}

// samplingRequest holds the fields shared by chat and text completions.
type samplingRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
	TopP                *float64 `json:"top_p"`
	TopK                *int     `json:"top_k"`
	MinP                *float64 `json:"min_p"`
	Seed                *int64   `json:"seed"`
	Stop                stopList `json:"stop"`
	PresencePenalty     *float64 `json:"presence_penalty"`
	FrequencyPenalty    *float64 `json:"frequency_penalty"`
	RepeatPenalty       *float64 `json:"repeat_penalty"`
	N                   *int     `json:"n"`
	// NCmpl is llama-server's name for n; the endpoints that take n > 1
	// read it there (completions_batch.go) when n is not given.
	NCmpl *int `json:"n_cmpl"`
	// IgnoreEOS (llama-server and vLLM's extension) generates through
	// end-of-generation tokens, for benchmarks with fixed output lengths.
	IgnoreEOS bool `json:"ignore_eos"`
	// NKeep and NDiscard (llama-server's) say what a context shift keeps
	// from the start of the prompt (-1: all of it) and how many tokens
	// after those it drops (0: half).
	NKeep    *int `json:"n_keep"`
	NDiscard *int `json:"n_discard"`
	// LogitBias is refused: the sampler has no per-token bias (ignore_eos
	// bans the end-of-generation tokens by other means).
	LogitBias json.RawMessage `json:"logit_bias"`
	// ResponseFormat (OpenAI's), JSONSchema and Grammar (llama-server's:
	// a JSON Schema, a GBNF text) constrain the output while sampling.
	ResponseFormat *responseFormat `json:"response_format"`
	JSONSchema     json.RawMessage `json:"json_schema"`
	Grammar        *string         `json:"grammar"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	samplingRequest
	Messages    []chat.Message    `json:"messages"`
	Logprobs    *bool             `json:"logprobs"`
	TopLogprobs *int              `json:"top_logprobs"`
	Tools       []json.RawMessage `json:"tools"`
	// ToolChoice is "none", "auto", "required" or {"type": "function",
	// "function": {"name": ...}}; ParallelToolCalls (default true) lets
	// a forced reply hold several calls.
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Functions and FunctionCall, the deprecated forms, are refused.
	Functions    json.RawMessage `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
	// ReasoningEffort is OpenAI's field; it reaches the template as the
	// variable reasoning_effort, which gpt-oss's template writes into the
	// system message.
	ReasoningEffort *string `json:"reasoning_effort"`
	// ReasoningFormat is llama-server's switch: "none" sends the raw text
	// as content instead of splitting off reasoning_content.
	ReasoningFormat *string `json:"reasoning_format"`
	// ChatTemplateKwargs (llama-server's and vLLM's extension) are further
	// template variables, such as enable_thinking.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	samplingRequest
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
}

// maxStops bounds the stop list, as OpenAI does (4); more would only let one
// request slow every token's check.
const maxStops = 16

// decodeBody reads and parses a JSON body, naming what is wrong: the size
// limit, invalid UTF-8, malformed JSON or a field of the wrong type.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) *apiError {
	body, e := readBody(w, r, limit)
	if e != nil {
		return e
	}
	return parseJSON(body, v)
}

// readBody reads a request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("request body is over the limit of %d bytes", mb.Limit)}
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return body, nil
}

// parseJSON is the part of decodeBody that the fuzzer drives.
func parseJSON(body []byte, v any) *apiError {
	if !utf8.Valid(body) {
		i := 0
		for i < len(body) {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return badRequest("", "request body is not valid UTF-8 (first bad byte at offset %d)", i)
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			// Fields of the embedded samplingRequest carry its name.
			field := strings.TrimPrefix(te.Field, "samplingRequest.")
			if field == "" {
				return badRequest("", "request body must be a JSON object, not %s", te.Value)
			}
			return badRequest(field, "field %q must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		case errors.As(err, &se):
			return badRequest("", "malformed JSON at offset %d: %v", se.Offset, err)
		default:
			return badRequest("", "invalid request body: %v", err)
		}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return goKind
}

func (q *samplingRequest) keep() *int    { return q.NKeep }
func (q *samplingRequest) discard() *int { return q.NDiscard }

// params turns the sampling fields into sampler parameters and the token
// limit (-1: none), checking every range; what the request does not set
// comes from d (nil: sample.DefaultParams, a random seed, no limit).
func (q *samplingRequest) params(d *Defaults, randomSeed func() uint64) (sample.Params, int, *apiError) {
	if d == nil {
		d = DefaultDefaults()
	}
	p := d.Params
	if q.N != nil && *q.N != 1 {
		return p, 0, badRequest("n", "n = %d is not supported here: only /v1/chat/completions and /v1/completions generate several choices", *q.N)
	}
	if q.NCmpl != nil && *q.NCmpl != 1 {
		return p, 0, badRequest("n_cmpl", "n_cmpl = %d is not supported here: only /v1/chat/completions and /v1/completions generate several choices (n_cmpl as n, when n is not given)", *q.NCmpl)
	}
	if len(q.LogitBias) > 0 && !bytes.Equal(q.LogitBias, []byte("null")) && !bytes.Equal(bytes.TrimSpace(q.LogitBias), []byte("{}")) && !bytes.Equal(bytes.TrimSpace(q.LogitBias), []byte("[]")) {
		return p, 0, badRequest("logit_bias", "logit_bias is not supported (ignore_eos: true bans the end-of-generation tokens)")
	}
	if q.NKeep != nil && *q.NKeep < -1 {
		return p, 0, badRequest("n_keep", "n_keep = %d: give a number of tokens, or -1 for the whole prompt", *q.NKeep)
	}
	if q.NDiscard != nil && *q.NDiscard < 0 {
		return p, 0, badRequest("n_discard", "n_discard = %d must not be negative (0: half of what follows n_keep)", *q.NDiscard)
	}
	maxTok := d.NPredict
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return p, 0, badRequest(f.name, "%s = %d must not be negative", f.name, *f.v)
		}
		maxTok = *f.v
	}
	num := func(name string, v *float64, lo, hi float64, dst *float32) *apiError {
		if v == nil {
			return nil
		}
		if math.IsNaN(*v) || *v < lo || *v > hi {
			return badRequest(name, "%s = %g is out of range [%g, %g]", name, *v, lo, hi)
		}
		*dst = float32(*v)
		return nil
	}
	if e := num("temperature", q.Temperature, 0, 2, &p.Temperature); e != nil {
		return p, 0, e
	}
	if e := num("top_p", q.TopP, 0, 1, &p.TopP); e != nil {
		return p, 0, e
	}
	if q.TopP != nil && *q.TopP == 0 {
		// OpenAI accepts 0 and means "only the most likely token".
		p.TopP, p.TopK = 1, 1
	}
	if e := num("min_p", q.MinP, 0, 1, &p.MinP); e != nil {
		return p, 0, e
	}
	if e := num("presence_penalty", q.PresencePenalty, -2, 2, &p.PresencePenalty); e != nil {
		return p, 0, e
	}
	if e := num("frequency_penalty", q.FrequencyPenalty, -2, 2, &p.FrequencyPenalty); e != nil {
		return p, 0, e
	}
	if e := num("repeat_penalty", q.RepeatPenalty, 0.01, 10, &p.RepeatPenalty); e != nil {
		return p, 0, e
	}
	if q.TopK != nil {
		if *q.TopK < 0 {
			return p, 0, badRequest("top_k", "top_k = %d must not be negative", *q.TopK)
		}
		p.TopK = *q.TopK
	}
	switch {
	case q.Seed != nil && *q.Seed != -1:
		p.Seed = uint64(*q.Seed)
	case q.Seed == nil && d.SeedSet:
		p.Seed = d.Params.Seed
	default: // -1 is llama-server's "random"
		p.Seed = randomSeed()
	}
	if len(q.Stop) > maxStops {
		return p, 0, badRequest("stop", "stop has %d strings; at most %d are allowed", len(q.Stop), maxStops)
	}
	for _, s := range q.Stop {
		if s == "" {
			return p, 0, badRequest("stop", "stop strings must not be empty")
		}
	}
	if err := p.Validate(); err != nil {
		return p, 0, badRequest("", "%v", err)
	}
	return p, maxTok, nil
}

// knownRoles are the chat roles templates are written for.
var knownRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// checkMessages validates the roles and flattens OpenAI's content parts into
// plain text, which is what most GGUF chat templates expect.
func checkMessages(msgs []chat.Message) *apiError {
	if len(msgs) == 0 {
		return badRequest("messages", "messages must hold at least one message")
	}
	for i := range msgs {
		m := &msgs[i]
		param := fmt.Sprintf("messages[%d]", i)
		if !knownRoles[m.Role] {
			return badRequest(param+".role", "messages[%d].role %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		switch c := m.Content.(type) {
		case nil, string:
		case json.RawMessage:
			var parts []struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(c, &parts); err != nil {
				return badRequest(param+".content", "messages[%d].content must be a string or a list of content parts", i)
			}
			var sb strings.Builder
			for j, p := range parts {
				if p.Type != "text" || p.Text == nil {
					return badRequest(param+".content", "messages[%d].content[%d]: only text parts are supported, not %q", i, j, p.Type)
				}
				sb.WriteString(*p.Text)
			}
			m.Content = sb.String()
		default:
			return badRequest(param+".content", "messages[%d].content must be a string or a list of content parts", i)
		}
	}
	return nil
}

// parsePrompt reads a completion prompt: a string, a list of token ids, or a
// list holding one of either.
func parsePrompt(raw json.RawMessage) (text string, ids []int32, e *apiError) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil, badRequest("prompt", "prompt is required")
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil, nil
	}
	if err := json.Unmarshal(raw, &ids); err == nil {
		if len(ids) == 0 {
			return "", nil, badRequest("prompt", "prompt is an empty list of tokens")
		}
		return "", ids, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil && len(list) == 1 {
		if t, i, e := parsePrompt(list[0]); e == nil {
			return t, i, nil
		}
	} else if err == nil && len(list) > 1 {
		return "", nil, badRequest("prompt", "a batch of %d prompts is not supported: send one prompt per request", len(list))
	}
	return "", nil, badRequest("prompt", "prompt must be a string or a list of token ids")
}

// reservedKwargs are template variables the request sets by other fields;
// chat_template_kwargs must not replace them behind those fields' checks.
var reservedKwargs = map[string]bool{"messages": true, "tools": true, "add_generation_prompt": true, chat.NowVar: true}

// templateVars gathers the request's extra template variables:
// chat_template_kwargs, then reasoning_effort over them. A reasoning_effort
// must be one the templates know, whichever field carries it.
func (q *chatRequest) templateVars() (map[string]any, *apiError) {
	vars := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(q.ChatTemplateKwargs)) {
		if reservedKwargs[k] {
			return nil, badRequest("chat_template_kwargs", "chat_template_kwargs must not set %q; it comes from the request's own field", k)
		}
		v := q.ChatTemplateKwargs[k]
		if k == "reasoning_effort" {
			var e string
			if json.Unmarshal(v, &e) != nil {
				return nil, badRequest("chat_template_kwargs", "chat_template_kwargs.reasoning_effort must be a string, not %s", v)
			}
			if err := chat.CheckReasoningEffort(e); err != nil {
				return nil, badRequest("chat_template_kwargs", "chat_template_kwargs: %v", err)
			}
		}
		vars[k] = v
	}
	if q.ReasoningEffort != nil {
		if err := chat.CheckReasoningEffort(*q.ReasoningEffort); err != nil {
			return nil, badRequest("reasoning_effort", "%v", err)
		}
		vars["reasoning_effort"] = *q.ReasoningEffort
	}
	return vars, nil
}

// reasoningFormats are the reasoning_format values accepted: llama-server's
// "none" (raw text), and the names it gives the default split.
var reasoningFormats = []string{"none", "auto", "deepseek"}

// splitReasoning says whether the reply separates reasoning_content from
// content.
func (q *chatRequest) splitReasoning() (bool, *apiError) {
	if q.ReasoningFormat == nil {
		return true, nil
	}
	f := *q.ReasoningFormat
	if !slices.Contains(reasoningFormats, f) {
		return false, badRequest("reasoning_format", "reasoning_format %q is not one of %s", f, strings.Join(reasoningFormats, ", "))
	}
	return f != "none", nil
}
