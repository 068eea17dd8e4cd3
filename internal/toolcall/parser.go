package toolcall

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parser finds tool calls in a model's output while it streams. Content
// passes at once unless it may be the start of a call (then it waits for
// the next piece); a call is emitted whole when it ends. The same text
// gives the same events however it is cut. It is not safe for concurrent
// use.
type Parser struct {
	f       Format
	tools   map[string]Tool
	markers []string // start a call anywhere
	leading []string // start a call only at the start of the output

	buf      string
	inRegion bool
	start    bool // nothing but whitespace has passed yet
	events   []Event
	newID    func() string
}

// NewParser returns a parser for f. tools are the request's functions:
// they give the types of arguments written as text, and a Llama 3 reply
// (which has no marker) is a call only if it names one of them.
func NewParser(f Format, tools []Tool) *Parser {
	p := &Parser{f: f, tools: map[string]Tool{}, start: true, newID: func() string { return NewID(f) }}
	for _, t := range tools {
		p.tools[t.Name] = t
	}
	switch f {
	case Hermes, QwenXML, GLM:
		p.markers = []string{tagToolCall}
	case Mistral:
		p.markers = []string{tagMistralCalls}
	case DeepSeek:
		p.markers = []string{tagDSCallsBegin, tagDSCallBegin}
	case Harmony:
		p.markers = []string{tagHStart, tagHChannel}
		p.leading = []string{"to=", " to="}
	case Llama3:
		p.markers = []string{tagPythonTag}
		p.leading = []string{"{"}
	}
	return p
}

// Add takes the next piece of output and returns what is now known.
func (p *Parser) Add(text string) []Event {
	p.buf += text
	p.run(false)
	return p.take()
}

// Flush decides whatever is still held at the end of the output.
func (p *Parser) Flush() []Event {
	p.run(true)
	return p.take()
}

func (p *Parser) take() []Event {
	ev := p.events
	p.events = nil
	return ev
}

func (p *Parser) content(s string) {
	if s == "" {
		return
	}
	if strings.TrimLeft(s, spaces) != "" {
		p.start = false
	}
	if n := len(p.events); n > 0 && p.events[n-1].Call == nil {
		p.events[n-1].Content += s
		return
	}
	p.events = append(p.events, Event{Content: s})
}

const spaces = " \t\r\n"

// maxHeader bounds a harmony header: without <|message|> within it the
// text is not one.
const maxHeader = 512

func (p *Parser) run(final bool) {
	for p.buf != "" {
		if !p.inRegion {
			if !p.scan(final) {
				return
			}
			continue
		}
		end := p.regionEnd()
		if end < 0 {
			if !final {
				return
			}
			end = len(p.buf)
		}
		region := p.buf[:end]
		p.buf = p.buf[end:]
		p.inRegion = false
		if ev, ok := p.parseRegion(region); ok {
			for _, e := range ev {
				if e.Call != nil {
					p.events = append(p.events, e)
					p.start = false
				} else {
					p.content(e.Content)
				}
			}
		} else {
			p.content(region)
		}
	}
}

// scan passes content up to the next call's start; it reports whether a
// region began (call run again).
func (p *Parser) scan(final bool) bool {
	if p.start && len(p.leading) > 0 {
		trimmed := strings.TrimLeft(p.buf, spaces)
		lead := len(p.buf) - len(trimmed)
		for _, m := range p.leading {
			if strings.HasPrefix(trimmed, m) {
				p.content(p.buf[:lead])
				p.buf = p.buf[lead:]
				p.inRegion = true
				return true
			}
		}
		if !final {
			for _, m := range append(p.leading, p.markers...) {
				if strings.HasPrefix(m, trimmed) {
					return false // may still become a marker
				}
			}
		}
		if trimmed != "" {
			p.start = false
		}
	}
	at, _ := firstOf(p.buf, p.markers)
	if at >= 0 {
		p.content(p.buf[:at])
		p.buf = p.buf[at:]
		p.inRegion = true
		return true
	}
	hold := 0
	if !final {
		hold = partialSuffix(p.buf, p.markers)
	}
	p.content(p.buf[:len(p.buf)-hold])
	p.buf = p.buf[len(p.buf)-hold:]
	return false
}

// regionEnd is where the call starting the buffer ends (just past it), or
// -1 while it may go on. JSON arguments are skipped as JSON, so a tag
// written inside one of their strings does not end the call.
func (p *Parser) regionEnd() int {
	b := p.buf
	switch p.f {
	case Hermes, QwenXML, GLM:
		from := len(tagToolCall)
		if i := skipSpaces(b, from); i < len(b) && b[i] == '{' {
			n := skipJSON(b[i:])
			if n == -1 {
				return -1
			}
			if n > 0 {
				from = i + n
			}
		}
		end := indexFrom(b, tagToolCallEnd, from)
		next := indexFrom(b, tagToolCall, from)
		if next >= 0 && (end < 0 || next < end) {
			return next // unclosed: the next call begins
		}
		if end >= 0 {
			return end + len(tagToolCallEnd)
		}
	case Mistral:
		i := skipSpaces(b, len(tagMistralCalls))
		if i < len(b) && b[i] == '[' && !strings.HasPrefix(b[i:], tagMistralArgs) && !strings.HasPrefix(tagMistralArgs, b[i:]) {
			if n := skipJSON(b[i:]); n != -1 {
				if n < 0 {
					return len(b) // not JSON: the rest is text
				}
				return i + n
			}
			return -1
		}
		next := indexFrom(b, tagMistralCalls, len(tagMistralCalls))
		a := indexFrom(b, tagMistralArgs, 0)
		if a >= 0 && (next < 0 || a < next) {
			j := skipSpaces(b, a+len(tagMistralArgs))
			if n := skipJSON(b[j:]); n >= 0 {
				return j + n
			} else if n == -1 {
				return -1
			}
		}
		if next >= 0 {
			return next
		}
	case DeepSeek:
		return p.deepseekEnd(b)
	case Harmony:
		m := strings.Index(b, tagHMessage)
		if m < 0 {
			if len(b) > maxHeader+len(tagHMessage) {
				return maxHeader // not a header: its text is content
			}
			return -1
		}
		body := m + len(tagHMessage)
		if j := skipSpaces(b, body); j < len(b) && (b[j] == '{' || b[j] == '[') {
			n := skipJSON(b[j:])
			if n == -1 {
				return -1
			}
			if n > 0 {
				end := j + n
				k := skipSpaces(b, end)
				for _, tag := range []string{tagHCall, tagHEnd, tagHReturn} {
					if strings.HasPrefix(b[k:], tag) {
						return k + len(tag)
					}
					if strings.HasPrefix(tag, b[k:]) {
						return -1 // the closing tag may be arriving
					}
				}
				return end
			}
		}
		at, tag := firstOf(b[body:], []string{tagHCall, tagHEnd, tagHReturn, tagHStart})
		switch {
		case at < 0:
			return -1
		case tag == tagHStart:
			return body + at
		}
		return body + at + len(tag)
	}
	return -1
}

// deepseekEnd walks the calls of a DeepSeek region.
func (p *Parser) deepseekEnd(b string) int {
	i := 0
	lone := !strings.HasPrefix(b, tagDSCallsBegin)
	if !lone {
		i = len(tagDSCallsBegin)
	}
	for {
		i = skipSpaces(b, i)
		if !lone && strings.HasPrefix(b[i:], tagDSCallsEnd) {
			return i + len(tagDSCallsEnd)
		}
		if !strings.HasPrefix(b[i:], tagDSCallBegin) {
			if i == len(b) || strings.HasPrefix(tagDSCallBegin, b[i:]) || strings.HasPrefix(tagDSCallsEnd, b[i:]) {
				return -1
			}
			return i // something else: the region ends here
		}
		sep := indexFrom(b, tagDSSep, i)
		if sep < 0 {
			return -1
		}
		j := sep + len(tagDSSep)
		if strings.TrimSpace(b[i+len(tagDSCallBegin):sep]) == "function" {
			// NAME\n```json\n
			nl := indexFrom(b, "\n", j)
			if nl < 0 {
				return -1
			}
			j = skipSpaces(b, nl)
			if strings.HasPrefix(b[j:], "```json") {
				j += len("```json")
			} else if strings.HasPrefix("```json", b[j:]) {
				return -1
			}
		}
		j = skipSpaces(b, j)
		if n := skipJSON(b[j:]); n == -1 {
			return -1
		} else if n > 0 {
			j += n
		}
		end := indexFrom(b, tagDSCallEnd, j)
		if end < 0 {
			return -1
		}
		i = end + len(tagDSCallEnd)
		if lone {
			return i
		}
	}
}

func skipSpaces(s string, i int) int {
	for i < len(s) && strings.IndexByte(spaces, s[i]) >= 0 {
		i++
	}
	return i
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	if i := strings.Index(s[from:], sub); i >= 0 {
		return from + i
	}
	return -1
}

// skipJSON is the length of the JSON object or array (or string) at the
// start of s, by brackets and string quotes alone (the parse that follows
// checks the rest); -1 when s ends inside it, -2 when s does not start one.
func skipJSON(s string) int {
	if s == "" {
		return -1
	}
	switch s[0] {
	case '{', '[', '"':
	default:
		return -2
	}
	depth := 0
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
				if depth == 0 {
					return i + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return -2
			}
		}
	}
	return -1
}

func (p *Parser) call(name, args, id string) Event {
	if id == "" {
		id = p.newID()
	}
	return Event{Call: &Call{ID: id, Name: name, Arguments: args}}
}

// parseRegion reads the calls of one region; false when it is not a
// call after all (its text is then content).
func (p *Parser) parseRegion(r string) ([]Event, bool) {
	switch p.f {
	case Hermes, QwenXML, GLM:
		inner := strings.TrimPrefix(r, tagToolCall)
		inner = strings.TrimSuffix(inner, tagToolCallEnd)
		inner = strings.TrimSpace(inner)
		var name, args string
		var ok bool
		switch {
		case strings.HasPrefix(inner, "{"):
			name, args, ok = p.jsonCall(inner, false)
		case strings.HasPrefix(inner, "<function="):
			name, args, ok = p.qwenXML(inner)
		case p.f == GLM:
			name, args, ok = p.glm(inner)
		}
		if !ok {
			return nil, false
		}
		return []Event{p.call(name, args, "")}, true
	case Llama3:
		return p.llama3(r)
	case Mistral:
		return p.mistral(strings.TrimPrefix(r, tagMistralCalls))
	case DeepSeek:
		return p.deepseek(r)
	case Harmony:
		return p.harmony(r)
	}
	return nil, false
}

// jsonValue reads one JSON value at the start of s (after spaces) and
// returns its text and what follows.
func jsonValue(s string) (json.RawMessage, string, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, s, false
	}
	return raw, s[dec.InputOffset():], true
}

// objectText checks that raw is a JSON object and returns its text;
// a JSON string holding an object (arguments encoded twice) is unwrapped.
func objectText(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return "", false
		}
		t = bytes.TrimSpace([]byte(s))
		if !json.Valid(t) {
			return "", false
		}
	}
	if len(t) == 0 || t[0] != '{' {
		return "", false
	}
	return string(t), true
}

// jsonCall reads {"name": ..., "arguments" | "parameters": {...}}; with
// whole, nothing but spaces may follow.
func (p *Parser) jsonCall(s string, whole bool) (name, args string, ok bool) {
	raw, rest, ok := jsonValue(s)
	if !ok || (whole && strings.TrimSpace(rest) != "") {
		return "", "", false
	}
	if strings.TrimSpace(rest) != "" && !whole {
		return "", "", false
	}
	return p.callObject(raw)
}

func (p *Parser) callObject(raw json.RawMessage) (name, args string, ok bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return "", "", false
	}
	if json.Unmarshal(obj["name"], &name) != nil || name == "" {
		return "", "", false
	}
	a, has := obj["arguments"]
	if !has {
		a, has = obj["parameters"]
	}
	if !has {
		return name, "{}", true
	}
	args, ok = objectText(a)
	return name, args, ok
}

// qwenXML reads <function=NAME><parameter=P>\nVALUE\n</parameter>...
// </function>.
func (p *Parser) qwenXML(s string) (string, string, bool) {
	s = strings.TrimPrefix(s, "<function=")
	name, s, ok := strings.Cut(s, ">")
	if !ok || strings.ContainsAny(name, "<>\n") || name == "" {
		return "", "", false
	}
	var pairs [][2]string
	for {
		s = strings.TrimLeft(s, spaces)
		if strings.HasPrefix(s, "</function>") {
			s = strings.TrimPrefix(s, "</function>")
			break
		}
		if s == "" {
			break // the output ended before </function>
		}
		if !strings.HasPrefix(s, "<parameter=") {
			return "", "", false
		}
		s = strings.TrimPrefix(s, "<parameter=")
		key, rest, ok := strings.Cut(s, ">")
		if !ok || key == "" || strings.ContainsAny(key, "<>\n") {
			return "", "", false
		}
		val, rest, ok := strings.Cut(rest, "</parameter>")
		if !ok {
			// Ended inside a value: up to </function> or the end.
			val, rest, _ = strings.Cut(rest, "</function>")
		}
		val = strings.TrimPrefix(val, "\n")
		val = strings.TrimSuffix(val, "\n")
		pairs = append(pairs, [2]string{key, val})
		s = rest
	}
	if strings.TrimSpace(s) != "" {
		return "", "", false
	}
	return name, p.textArgs(name, pairs), true
}

// glm reads NAME<arg_key>K</arg_key><arg_value>V</arg_value>..., with
// newlines between the parts.
func (p *Parser) glm(s string) (string, string, bool) {
	i := strings.Index(s, "<arg_key>")
	head := s
	if i >= 0 {
		head = s[:i]
	}
	name := strings.TrimSpace(head)
	if name == "" || strings.ContainsAny(name, "<>\n{}\" \t") {
		// GLM-4.5 may also write the arguments as JSON after the name.
		return "", "", false
	}
	if i < 0 {
		return name, "{}", true
	}
	s = s[i:]
	var pairs [][2]string
	for {
		s = strings.TrimLeft(s, spaces)
		if s == "" {
			break
		}
		if !strings.HasPrefix(s, "<arg_key>") {
			return "", "", false
		}
		key, rest, ok := strings.Cut(s[len("<arg_key>"):], "</arg_key>")
		if !ok {
			return "", "", false
		}
		rest = strings.TrimLeft(rest, spaces)
		if !strings.HasPrefix(rest, "<arg_value>") {
			return "", "", false
		}
		val, after, ok := strings.Cut(rest[len("<arg_value>"):], "</arg_value>")
		if !ok {
			return "", "", false
		}
		rest = after
		pairs = append(pairs, [2]string{key, val})
		s = rest
	}
	return name, p.textArgs(name, pairs), true
}

// textArgs builds the arguments object of a format that writes values as
// text: strings raw, other values as JSON (or Python's str of them). The
// tool's schema says which a parameter is; without it, text that reads as
// JSON is JSON.
func (p *Parser) textArgs(name string, pairs [][2]string) string {
	types := propertyTypes(p.tools[name].Parameters)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, kv := range pairs {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(quote(kv[0]))
		sb.WriteString(": ")
		sb.WriteString(textValue(kv[1], types[kv[0]]))
	}
	sb.WriteByte('}')
	return sb.String()
}

// textValue is one argument's JSON. With the schema's types: JSON text of
// an allowed type other than string is that value, anything else is the
// text as a string. Without: JSON other than a string is that value.
// Python's True, False and None (Qwen's templates print values with
// Python's str) read as JSON's.
func textValue(v string, types []string) string {
	t := strings.TrimSpace(v)
	switch t {
	case "True":
		t = "true"
	case "False":
		t = "false"
	case "None":
		t = "null"
	}
	var x any
	if json.Unmarshal([]byte(t), &x) == nil {
		kind := jsonKind(x)
		if len(types) == 0 && kind != "string" {
			return t
		}
		for _, ty := range types {
			if ty != "string" && (ty == kind || ty == "number" && kind == "integer") {
				return t
			}
		}
	}
	return quote(v)
}

func jsonKind(x any) string {
	switch v := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// propertyTypes reads the type names of each property of a parameters
// schema (none known: no entry).
func propertyTypes(params json.RawMessage) map[string][]string {
	out := map[string][]string{}
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
			Enum []any           `json:"enum"`
		} `json:"properties"`
	}
	if json.Unmarshal(params, &s) != nil {
		return out
	}
	for k, v := range s.Properties {
		var one string
		var many []string
		switch {
		case json.Unmarshal(v.Type, &one) == nil && one != "":
			out[k] = []string{one}
		case json.Unmarshal(v.Type, &many) == nil && len(many) > 0:
			out[k] = many
		case len(v.Enum) > 0:
			for _, e := range v.Enum {
				out[k] = append(out[k], jsonKind(e))
			}
		}
	}
	return out
}

func quote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// llama3 reads a whole reply that is a call: JSON objects (separated by
// ';' or spaces), optionally after <|python_tag|>, or a built-in tool's
// NAME.call(key="value", ...).
func (p *Parser) llama3(r string) ([]Event, bool) {
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimLeft(r, spaces), tagPythonTag))
	if !strings.HasPrefix(s, "{") {
		name, args, ok := pythonCall(s)
		if !ok {
			return nil, false
		}
		return []Event{p.call(name, args, "")}, true
	}
	var ev []Event
	for s != "" {
		raw, rest, ok := jsonValue(s)
		if !ok {
			return nil, false
		}
		name, args, ok := p.callObject(raw)
		if !ok {
			return nil, false
		}
		if _, known := p.tools[name]; len(p.tools) > 0 && !known {
			return nil, false
		}
		ev = append(ev, p.call(name, args, ""))
		s = strings.TrimLeft(rest, spaces+";")
	}
	return ev, len(ev) > 0
}

// pythonCall reads NAME.call(k="v", n=1, b=True) as Llama 3.1 writes
// calls of built-in tools.
func pythonCall(s string) (string, string, bool) {
	name, rest, ok := strings.Cut(s, ".call(")
	if !ok || name == "" || strings.ContainsAny(name, " \n()\"'") || !strings.HasSuffix(strings.TrimSpace(rest), ")") {
		return "", "", false
	}
	body := strings.TrimSuffix(strings.TrimSpace(rest), ")")
	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	for strings.TrimSpace(body) != "" {
		body = strings.TrimLeft(body, spaces)
		key, after, ok := strings.Cut(body, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " ,\"'") {
			return "", "", false
		}
		after = strings.TrimLeft(after, spaces)
		var val string
		switch {
		case strings.HasPrefix(after, `"`) || strings.HasPrefix(after, `'`):
			q := after[0]
			end := 1
			for end < len(after) && after[end] != q {
				if after[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(after) {
				return "", "", false
			}
			lit := after[1:end]
			unq, err := strconv.Unquote(`"` + strings.ReplaceAll(lit, `"`, `\"`) + `"`)
			if err != nil {
				unq = lit
			}
			val = quote(unq)
			after = after[end+1:]
		default:
			tok := after
			if i := strings.IndexByte(after, ','); i >= 0 {
				tok = after[:i]
			}
			after = after[len(tok):]
			tok = strings.TrimSpace(tok)
			switch tok {
			case "True":
				val = "true"
			case "False":
				val = "false"
			case "None":
				val = "null"
			default:
				if _, err := strconv.ParseFloat(tok, 64); err != nil {
					return "", "", false
				}
				val = tok
			}
		}
		if !first {
			sb.WriteString(", ")
		}
		first = false
		sb.WriteString(quote(key) + ": " + val)
		body = strings.TrimLeft(after, spaces)
		if body != "" {
			if body[0] != ',' {
				return "", "", false
			}
			body = body[1:]
		}
	}
	sb.WriteByte('}')
	return name, sb.String(), true
}

// mistral reads what follows [TOOL_CALLS]: a JSON list of calls, or
// NAME[ARGS]{...} with an optional [CALL_ID]ID before [ARGS].
func (p *Parser) mistral(s string) ([]Event, bool) {
	t := strings.TrimLeft(s, spaces)
	if strings.HasPrefix(t, "[") && !strings.HasPrefix(t, tagMistralArgs) {
		raw, rest, ok := jsonValue(t)
		if !ok {
			return nil, false
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
			return nil, false
		}
		var ev []Event
		for _, c := range list {
			name, args, ok := p.callObject(c)
			if !ok {
				return nil, false
			}
			var idObj struct {
				ID string `json:"id"`
			}
			json.Unmarshal(c, &idObj)
			ev = append(ev, p.call(name, args, idObj.ID))
		}
		if r := rest; strings.TrimSpace(r) != "" {
			ev = append(ev, Event{Content: r})
		}
		return ev, true
	}
	ai := strings.Index(t, tagMistralArgs)
	if ai < 0 {
		return nil, false
	}
	head, body := t[:ai], t[ai+len(tagMistralArgs):]
	name, id := head, ""
	if n, i, ok := strings.Cut(head, tagMistralID); ok {
		name, id = n, strings.TrimSpace(i)
	}
	name = strings.TrimSpace(name)
	if name == "" || strings.ContainsAny(name, "[]{}\"\n ") {
		return nil, false
	}
	raw, rest, ok := jsonValue(body)
	if !ok {
		return nil, false
	}
	args, ok := objectText(raw)
	if !ok {
		return nil, false
	}
	ev := []Event{p.call(name, args, id)}
	if strings.TrimSpace(rest) != "" {
		ev = append(ev, Event{Content: rest})
	}
	return ev, true
}

// deepseek reads <｜tool▁calls▁begin｜> calls <｜tool▁calls▁end｜>, or a
// lone call. The arguments are read as JSON, so a tag inside one of their
// strings is theirs.
func (p *Parser) deepseek(r string) ([]Event, bool) {
	s := strings.TrimPrefix(r, tagDSCallsBegin)
	var ev []Event
	for {
		s = strings.TrimLeft(s, spaces)
		if s == "" || s == tagDSCallsEnd {
			break
		}
		if !strings.HasPrefix(s, tagDSCallBegin) {
			return nil, false
		}
		head, body, ok := strings.Cut(s[len(tagDSCallBegin):], tagDSSep)
		if !ok {
			return nil, false
		}
		var name string
		var raw json.RawMessage
		if strings.TrimSpace(head) == "function" {
			// V3 and R1: function<sep>NAME\n```json\nARGS\n```
			n, code, ok := strings.Cut(body, "\n")
			if !ok {
				return nil, false
			}
			name = strings.TrimSpace(n)
			code = strings.TrimLeft(code, spaces)
			code = strings.TrimPrefix(code, "```json")
			code = strings.TrimPrefix(code, "```")
			var rest string
			if raw, rest, ok = jsonValue(code); !ok {
				// Templates that print the arguments dict with Python's
				// str teach the model single quotes and True/None.
				lit, after, found := strings.Cut(code, "```")
				j, ok := pythonLiteral(strings.TrimSpace(lit))
				if !ok || !found {
					return nil, false
				}
				raw, rest = json.RawMessage(j), "```"+after
			}
			rest = strings.TrimLeft(rest, spaces)
			if !strings.HasPrefix(rest, "```") {
				return nil, false
			}
			s = rest[len("```"):]
		} else {
			// V3.1: NAME<sep>ARGS
			name = strings.TrimSpace(head)
			var rest string
			if raw, rest, ok = jsonValue(body); !ok {
				return nil, false
			}
			s = rest
		}
		args, ok := objectText(raw)
		if !ok || name == "" || strings.ContainsAny(name, "\n<>{}") {
			return nil, false
		}
		s = strings.TrimLeft(s, spaces)
		switch {
		case strings.HasPrefix(s, tagDSCallEnd):
			s = s[len(tagDSCallEnd):]
		case s != "":
			return nil, false
		}
		ev = append(ev, p.call(name, args, ""))
	}
	return ev, len(ev) > 0
}

// harmony reads a message whose header names a recipient: the header up
// to <|message|> holds "to=functions.NAME" (or another namespace), the
// body is the arguments up to <|call|>, <|end|> or the end.
func (p *Parser) harmony(r string) ([]Event, bool) {
	header, body, ok := strings.Cut(r, tagHMessage)
	if !ok {
		return nil, false
	}
	i := strings.Index(header, "to=")
	if i < 0 {
		return nil, false
	}
	rec := header[i+3:]
	if j := strings.IndexAny(rec, " \t\n<"); j >= 0 {
		rec = rec[:j]
	}
	name := strings.TrimPrefix(rec, "functions.")
	if name == "" || !utf8.ValidString(name) {
		return nil, false
	}
	for _, tag := range []string{tagHCall, tagHEnd, tagHReturn} {
		body = strings.TrimSuffix(body, tag)
	}
	raw, rest, ok := jsonValue(body)
	if !ok || strings.TrimSpace(rest) != "" {
		return nil, false
	}
	args, ok := objectText(raw)
	if !ok {
		return nil, false
	}
	return []Event{p.call(name, args, "")}, true
}

// firstOf finds the earliest of tags in s.
func firstOf(s string, tags []string) (int, string) {
	at, tag := -1, ""
	for _, t := range tags {
		if i := strings.Index(s, t); i >= 0 && (at < 0 || i < at) {
			at, tag = i, t
		}
	}
	return at, tag
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of one of tags.
func partialSuffix(s string, tags []string) int {
	n := 0
	for _, t := range tags {
		for k := min(len(s), len(t)-1); k > n; k-- {
			if strings.HasSuffix(s, t[:k]) {
				n = k
				break
			}
		}
	}
	return n
}
