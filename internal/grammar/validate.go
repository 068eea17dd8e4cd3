package grammar

import (
	"fmt"
	"math/big"
	"net"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// ValidateJSON checks a JSON text against a JSON Schema, for the keywords
// the compiler supports (it reports the others as a *SchemaError). It is
// the compiler's own check of enum values, and the tests' oracle for what
// the grammars generate. Patterns are checked with Go's regexp, which reads
// the supported ECMAScript subset the same way.
func ValidateJSON(schema, doc []byte) error {
	s, err := ParseValue(schema)
	if err != nil {
		return &SchemaError{Msg: fmt.Sprintf("not valid JSON: %v", err)}
	}
	v, err := ParseValue(doc)
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	return validate(v, s, s, "", 0)
}

func invalid(path, format string, a ...any) error {
	if path == "" {
		path = "/"
	}
	return fmt.Errorf("at %s: %s", path, fmt.Sprintf(format, a...))
}

func jsonType(v *Value) string {
	if v.Kind == "number" {
		if r, ok := v.rat(); ok && r.IsInt() {
			return "integer"
		}
	}
	return v.Kind
}

func validate(v, s, root *Value, path string, depth int) error {
	if depth > maxJSONDepth {
		return &SchemaError{Path: path, Msg: "references nest too deeply"}
	}
	switch s.Kind {
	case "boolean":
		if s.Bool {
			return nil
		}
		return invalid(path, "the schema false allows nothing")
	case "object":
	default:
		return &SchemaError{Path: path, Msg: "a schema must be an object or a boolean"}
	}
	for _, k := range s.Keys {
		if !annotations[k] && !supported[k] && !strings.HasPrefix(k, "x-") {
			return &SchemaError{Path: path, Keyword: k, Msg: "keyword not supported"}
		}
	}
	if n := s.Get("nullable"); n != nil && n.Kind == "boolean" && n.Bool && v.Kind == "null" {
		return nil
	}
	if r := s.Get("$ref"); r != nil {
		if r.Kind != "string" {
			return &SchemaError{Path: path, Keyword: "$ref", Msg: "must be a string"}
		}
		t, err := resolvePointer(root, r.Str)
		if err != nil {
			return &SchemaError{Path: path, Keyword: "$ref", Msg: err.Error()}
		}
		if err := validate(v, t, root, path, depth+1); err != nil {
			return err
		}
	}
	if k := s.Get("const"); k != nil && !k.Equal(v) {
		return invalid(path, "%s is not the const %s", v.Encode(), k.Encode())
	}
	if e := s.Get("enum"); e != nil {
		found := false
		for _, x := range e.Arr {
			if x.Equal(v) {
				found = true
				break
			}
		}
		if !found {
			return invalid(path, "%s is not in the enum", v.Encode())
		}
	}
	if t := s.Get("type"); t != nil {
		names := []string{t.Str}
		if t.Kind == "array" {
			names = nil
			for _, x := range t.Arr {
				names = append(names, x.Str)
			}
		}
		jt := jsonType(v)
		ok := false
		for _, n := range names {
			if n == jt || n == "number" && jt == "integer" {
				ok = true
			}
		}
		if !ok {
			return invalid(path, "%s is not of type %s", v.Encode(), t.Encode())
		}
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		list := s.Get(kw)
		if list == nil {
			continue
		}
		matched := 0
		var first error
		for _, sub := range list.Arr {
			err := validate(v, sub, root, path, depth+1)
			if _, bad := err.(*SchemaError); bad {
				return err
			}
			if err == nil {
				matched++
			} else if first == nil {
				first = err
			}
		}
		switch {
		case kw == "anyOf" && matched == 0:
			return invalid(path, "no anyOf alternative matches (%v)", first)
		case kw == "oneOf" && matched != 1:
			return invalid(path, "%d oneOf alternatives match", matched)
		case kw == "allOf" && matched != len(list.Arr):
			return first
		}
	}
	switch v.Kind {
	case "string":
		return validateString(v, s, path)
	case "number":
		return validateNumber(v, s, path)
	case "array":
		return validateArray(v, s, root, path, depth)
	case "object":
		return validateObject(v, s, root, path, depth)
	}
	return nil
}

func intOf(s *Value, kw string) (int, bool) {
	x := s.Get(kw)
	if x == nil || x.Kind != "number" {
		return 0, false
	}
	r, ok := x.rat()
	if !ok || !r.IsInt() {
		return 0, false
	}
	return int(r.Num().Int64()), true
}

func validateString(v, s *Value, path string) error {
	n := utf8.RuneCountInString(v.Str)
	if m, ok := intOf(s, "minLength"); ok && n < m {
		return invalid(path, "%d characters, fewer than minLength %d", n, m)
	}
	if m, ok := intOf(s, "maxLength"); ok && n > m {
		return invalid(path, "%d characters, more than maxLength %d", n, m)
	}
	if p := s.Get("pattern"); p != nil {
		re, err := regexp.Compile(p.Str)
		if err != nil {
			return &SchemaError{Path: path, Keyword: "pattern", Msg: err.Error()}
		}
		if !re.MatchString(v.Str) {
			return invalid(path, "%q does not match the pattern %q", v.Str, p.Str)
		}
	}
	if f := s.Get("format"); f != nil {
		if err := checkFormat(f.Str, v.Str); err != nil {
			return invalid(path, "%q is not a %s: %v", v.Str, f.Str, err)
		}
	}
	return nil
}

var (
	uuidRe     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	hostnameRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$`)
	uriRe      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:[^\s]*$`)
)

func checkFormat(format, s string) error {
	switch format {
	case "date":
		_, err := time.Parse("2006-01-02", s)
		return err
	case "time":
		_, err := time.Parse("15:04:05.999999999Z07:00", s)
		return err
	case "date-time":
		_, err := time.Parse(time.RFC3339Nano, s)
		return err
	case "uuid":
		if !uuidRe.MatchString(s) {
			return fmt.Errorf("not 8-4-4-4-12 hex digits")
		}
	case "ipv4":
		ip := net.ParseIP(s)
		if ip == nil || ip.To4() == nil || strings.Count(s, ".") != 3 {
			return fmt.Errorf("not a dotted quad")
		}
		for _, part := range strings.Split(s, ".") {
			if len(part) > 1 && part[0] == '0' {
				return fmt.Errorf("leading zero")
			}
		}
	case "email":
		a, err := mail.ParseAddress(s)
		if err != nil {
			return err
		}
		if a.Address != s {
			return fmt.Errorf("not a bare address")
		}
	case "hostname":
		if len(s) > 253 || !hostnameRe.MatchString(s) {
			return fmt.Errorf("not a host name")
		}
	case "uri":
		if !uriRe.MatchString(s) {
			return fmt.Errorf("no scheme")
		}
	default:
		return fmt.Errorf("unknown format")
	}
	return nil
}

func validateNumber(v, s *Value, path string) error {
	x, ok := v.rat()
	if !ok {
		return invalid(path, "unreadable number %s", v.Num)
	}
	cmp := func(kw string, bad func(c int) bool) error {
		b := s.Get(kw)
		if b == nil || b.Kind != "number" {
			return nil
		}
		r, ok := new(big.Rat).SetString(b.Num.String())
		if !ok {
			return &SchemaError{Path: path, Keyword: kw, Msg: "unreadable number"}
		}
		if bad(x.Cmp(r)) {
			return invalid(path, "%s violates %s %s", v.Num, kw, b.Num)
		}
		return nil
	}
	draft4 := func(kw string) bool { b := s.Get(kw); return b != nil && b.Kind == "boolean" && b.Bool }
	for _, e := range []error{
		cmp("minimum", func(c int) bool { return c < 0 || c == 0 && draft4("exclusiveMinimum") }),
		cmp("maximum", func(c int) bool { return c > 0 || c == 0 && draft4("exclusiveMaximum") }),
		cmp("exclusiveMinimum", func(c int) bool { return c <= 0 }),
		cmp("exclusiveMaximum", func(c int) bool { return c >= 0 }),
	} {
		if e != nil {
			return e
		}
	}
	return nil
}

func validateArray(v, s, root *Value, path string, depth int) error {
	n := len(v.Arr)
	if m, ok := intOf(s, "minItems"); ok && n < m {
		return invalid(path, "%d items, fewer than minItems %d", n, m)
	}
	if m, ok := intOf(s, "maxItems"); ok && n > m {
		return invalid(path, "%d items, more than maxItems %d", n, m)
	}
	var prefix []*Value
	rest := s.Get("items")
	if p := s.Get("prefixItems"); p != nil {
		prefix = p.Arr
	} else if rest != nil && rest.Kind == "array" {
		prefix, rest = rest.Arr, s.Get("additionalItems")
	}
	for i, e := range v.Arr {
		sub := rest
		if i < len(prefix) {
			sub = prefix[i]
		}
		if sub == nil {
			continue
		}
		if err := validate(e, sub, root, fmt.Sprintf("%s/%d", path, i), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func validateObject(v, s, root *Value, path string, depth int) error {
	n := len(v.Keys)
	if m, ok := intOf(s, "minProperties"); ok && n < m {
		return invalid(path, "%d properties, fewer than minProperties %d", n, m)
	}
	if m, ok := intOf(s, "maxProperties"); ok && n > m {
		return invalid(path, "%d properties, more than maxProperties %d", n, m)
	}
	if r := s.Get("required"); r != nil {
		for _, k := range r.Arr {
			if _, ok := v.Obj[k.Str]; !ok {
				return invalid(path, "required property %q is missing", k.Str)
			}
		}
	}
	props := s.Get("properties")
	addl := s.Get("additionalProperties")
	for _, k := range v.Keys {
		sub := props.Get(k)
		if sub == nil {
			if addl == nil {
				continue
			}
			if addl.Kind == "boolean" && !addl.Bool {
				return invalid(path, "property %q is not allowed (additionalProperties is false)", k)
			}
			sub = addl
		}
		if err := validate(v.Obj[k], sub, root, path+"/"+escapePointer(k), depth+1); err != nil {
			return err
		}
	}
	return nil
}
