package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"

	"braid/internal/grammar"
)

// GrammarSpec says which calls a forced-call grammar allows.
type GrammarSpec struct {
	Format Format
	// Template is the chat template's source: it tells the variants of a
	// format apart (Mistral's JSON list or [ARGS]; DeepSeek's
	// "function<｜tool▁sep｜>" or the name).
	Template string
	Tools    []Tool
	// Only, when set, is the one function that may be called.
	Only string
	// Parallel allows more than one call.
	Parallel bool
}

// ToolError is a tool whose parameters cannot be enforced: which, and why.
type ToolError struct {
	Tool string
	Err  error
}

func (e *ToolError) Error() string { return fmt.Sprintf("tool %q: %v", e.Tool, e.Err) }

func (e *ToolError) Unwrap() error { return e.Err }

// Calls adds to b the rule for what a model writes when it must call a
// tool: one call (or, with Parallel, several) in s.Format's syntax, each
// naming one of the tools with arguments valid for its parameters schema.
// The name of the rule is returned. A schema the grammar compiler cannot
// enforce is a *ToolError wrapping its *grammar.SchemaError.
func Calls(b *grammar.Builder, s GrammarSpec) (*grammar.Node, error) {
	sc := grammar.NewSchemaCompiler(b, "tool-")
	var alts []*grammar.Node
	for _, t := range s.Tools {
		if s.Only != "" && t.Name != s.Only {
			continue
		}
		n, err := callNode(b, sc, s, t)
		if err != nil {
			return nil, &ToolError{Tool: t.Name, Err: err}
		}
		alts = append(alts, n)
	}
	if len(alts) == 0 {
		return nil, fmt.Errorf("no tool named %q", s.Only)
	}
	one := grammar.Alt(alts...)
	sep, open, close := grammar.Lit("\n"), grammar.Empty(), grammar.Empty()
	switch s.Format {
	case Mistral:
		if !mistralArgs(s.Template) {
			// [TOOL_CALLS][{...}, {...}]
			open, close, sep = grammar.Lit(tagMistralCalls+"["), grammar.Lit("]"), grammar.Lit(", ")
		} else {
			sep = grammar.Empty()
		}
	case DeepSeek:
		open, close, sep = grammar.Lit(tagDSCallsBegin), grammar.Lit(tagDSCallsEnd), grammar.Empty()
	case Llama3, Harmony:
		// One call per reply: Llama 3's templates refuse more, and a
		// harmony message ends at <|call|>.
		s.Parallel = false
	}
	if s.Parallel {
		return grammar.Seq(open, one, grammar.Star(grammar.Seq(sep, one)), close), nil
	}
	return grammar.Seq(open, one, close), nil
}

func mistralArgs(template string) bool { return strings.Contains(template, tagMistralArgs) }

// args compiles a tool's parameters schema ({} when it has none).
func args(sc *grammar.SchemaCompiler, t Tool) (*grammar.Node, *grammar.Value, error) {
	raw := t.Parameters
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	v, err := grammar.ParseValue(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("parameters are not valid JSON: %v", err)
	}
	n, err := sc.Compile(v)
	return n, v, err
}

func callNode(b *grammar.Builder, sc *grammar.SchemaCompiler, s GrammarSpec, t Tool) (*grammar.Node, error) {
	name := grammar.Lit
	switch s.Format {
	case QwenXML, GLM:
		return textCall(b, sc, s.Format, t)
	}
	a, _, err := args(sc, t)
	if err != nil {
		return nil, err
	}
	q := quote(t.Name)
	switch s.Format {
	case Llama3:
		return grammar.Seq(name(`{"name": `+q+`, "parameters": `), a, name("}")), nil
	case Mistral:
		if mistralArgs(s.Template) {
			return grammar.Seq(name(tagMistralCalls+t.Name+tagMistralArgs), a), nil
		}
		alnum := grammar.Class([]grammar.RuneRange{{Lo: '0', Hi: '9'}, {Lo: 'A', Hi: 'Z'}, {Lo: 'a', Hi: 'z'}}, false)
		return grammar.Seq(name(`{"name": `+q+`, "arguments": `), a, name(`, "id": "`), grammar.Repeat(alnum, 9, 9), name(`"}`)), nil
	case DeepSeek:
		if strings.Contains(s.Template, "function<｜tool▁sep｜>") {
			return grammar.Seq(name(tagDSCallBegin+"function"+tagDSSep+t.Name+"\n```json\n"), a, name("\n```"+tagDSCallEnd)), nil
		}
		return grammar.Seq(name(tagDSCallBegin+t.Name+tagDSSep), a, name(tagDSCallEnd)), nil
	case Harmony:
		text := grammar.Star(grammar.Class([]grammar.RuneRange{{Lo: '<', Hi: '<'}}, true))
		analysis := grammar.Seq(name(tagHChannel+"analysis"+tagHMessage), text, name(tagHEnd+tagHStart+"assistant"))
		return grammar.Seq(grammar.Opt(analysis), name(tagHChannel+"commentary to=functions."+t.Name+" "+tagHConstrain+"json"+tagHMessage), a, grammar.Opt(name(tagHCall))), nil
	}
	// Hermes, and the fallback.
	return grammar.Seq(name(tagToolCall+"\n"+`{"name": `+q+`, "arguments": `), a, name("}\n"+tagToolCallEnd)), nil
}

// textCall is a call of the formats that write each argument as tagged
// text: a string parameter as its raw text (without '<', so it cannot be
// mistaken for a closing tag), other types as JSON, which is how the
// parser reads them back. String parameters with a pattern, format or
// length cannot be enforced on raw text and are refused.
func textCall(b *grammar.Builder, sc *grammar.SchemaCompiler, f Format, t Tool) (*grammar.Node, error) {
	_, schema, err := args(sc, t)
	if err != nil {
		return nil, err
	}
	props, free, _, err := sc.ObjectProperties(schema, "")
	if err != nil {
		return nil, err
	}
	if free {
		props = nil // no named parameters: an empty call
	}
	types := propertyTypes(t.Parameters)
	noLT := grammar.Class([]grammar.RuneRange{{Lo: '<', Hi: '<'}}, true)
	rawText := grammar.Star(noLT)
	value := func(p grammar.Property) (*grammar.Node, error) {
		ps := schema.Get("properties").Get(p.Name)
		if ps == nil || !isStringy(types[p.Name]) {
			return p.Value, nil
		}
		if ps.Get("enum") != nil || ps.Get("const") != nil {
			vals := ps.Get("enum")
			var list []*grammar.Value
			if vals != nil {
				list = vals.Arr
			} else {
				list = []*grammar.Value{ps.Get("const")}
			}
			var alts []*grammar.Node
			for _, v := range list {
				if v.Kind == "string" && !strings.Contains(v.Str, "<") && textValue(v.Str, types[p.Name]) == quote(v.Str) {
					alts = append(alts, grammar.Lit(v.Str))
				}
			}
			if len(alts) == 0 {
				return nil, fmt.Errorf("parameter %q: no enum value can be written as text", p.Name)
			}
			return grammar.Alt(alts...), nil
		}
		for _, kw := range []string{"pattern", "format"} {
			if ps.Get(kw) != nil {
				return nil, fmt.Errorf("parameter %q: %s cannot be enforced on the text arguments of the %v format", p.Name, kw, f)
			}
		}
		if len(types[p.Name]) != 1 {
			return nil, fmt.Errorf("parameter %q: a string that may also be another type cannot be enforced on the text arguments of the %v format", p.Name, f)
		}
		// Lengths count code points, as the raw text's class does.
		lo, hi := 0, -1
		for kw, dst := range map[string]*int{"minLength": &lo, "maxLength": &hi} {
			if v := ps.Get(kw); v != nil {
				var n int
				if v.Kind != "number" || json.Unmarshal([]byte(v.Num.String()), &n) != nil || n < 0 || n > 10000 {
					return nil, fmt.Errorf("parameter %q: %s must be an integer in [0, 10000]", p.Name, kw)
				}
				*dst = n
			}
		}
		if hi >= 0 && lo > hi {
			return nil, fmt.Errorf("parameter %q: minLength is above maxLength", p.Name)
		}
		if lo > 0 || hi >= 0 {
			return grammar.Repeat(noLT, lo, hi), nil
		}
		return rawText, nil
	}
	var members []grammar.Property
	for _, p := range props {
		v, err := value(p)
		if err != nil {
			return nil, err
		}
		p.Value = v
		members = append(members, p)
	}
	if f == GLM {
		m := sc.Members(tagToolCall+t.Name+"\n", tagToolCallEnd, grammar.Lit("\n"), members, func(p grammar.Property) *grammar.Node {
			return grammar.Seq(grammar.Lit("<arg_key>"+p.Name+"</arg_key>\n<arg_value>"), p.Value, grammar.Lit("</arg_value>"))
		})
		return m, nil
	}
	m := sc.Members(tagToolCall+"\n<function="+t.Name+">\n", "</function>\n"+tagToolCallEnd, grammar.Lit("\n"), members, func(p grammar.Property) *grammar.Node {
		return grammar.Seq(grammar.Lit("<parameter="+p.Name+">\n"), p.Value, grammar.Lit("\n</parameter>"))
	})
	return m, nil
}

// isStringy reports whether a parameter's types include string (or are
// unknown, when the parser reads text that is not JSON as a string).
func isStringy(types []string) bool {
	for _, t := range types {
		if t == "string" {
			return true
		}
	}
	return false
}

// Marker is the text that starts f's calls (for DeepSeek, the start its
// two tags share: its parser also reads a call without the list tag), ""
// for the formats whose calls have none to wait for (Llama 3 writes a bare
// JSON reply; harmony names the recipient inside a message header).
func (f Format) Marker() string {
	switch f {
	case Hermes, QwenXML, GLM:
		return tagToolCall
	case Mistral:
		return tagMistralCalls
	case DeepSeek:
		return "<｜tool▁call"
	}
	return ""
}

// Lazy is the grammar of a reply that may call tools (tool_choice auto
// with strict tools): any text in which the format's marker does not
// occur, then optionally the calls, their arguments valid for the tools'
// schemas. The text before a call is free; a call, once begun, is held to
// its schema. false when the format has no marker (see Marker).
func Lazy(b *grammar.Builder, s GrammarSpec) (*grammar.Node, bool, error) {
	m := s.Format.Marker()
	if m == "" {
		return nil, false, nil
	}
	calls, err := Calls(b, s)
	if err != nil {
		return nil, true, err
	}
	return grammar.Seq(b.NotContaining(m), grammar.Opt(calls)), true, nil
}
