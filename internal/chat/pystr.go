package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// printOutput is wrapped around every {{ }} expression (see rewriteSource)
// so values print as Python's str() does: None as "None", floats as repr
// ("2.0", "1e+16"), lists and dicts as their repr with quoted strings. The
// engine prints None as "" and floats with %g, which changes prompts where
// a template prints a null content or a number from a tool schema.
func printOutput(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 {
		return jinja.Undefined(), fmt.Errorf("print: expected one value")
	}
	v := args[0]
	if v.IsString() || v.IsUndefined() {
		return v, nil
	}
	return jinja.NewString(pyStr(v)), nil
}

// pyStr is Python's str() of a template value; Undefined prints empty as
// jinja2's default Undefined does.
func pyStr(v jinja.Value) string {
	switch {
	case v.IsUndefined():
		return ""
	case v.IsString():
		return v.AsString()
	}
	var sb strings.Builder
	writePyRepr(&sb, v)
	return sb.String()
}

func writePyRepr(sb *strings.Builder, v jinja.Value) {
	switch {
	case v.IsUndefined():
		// Inside a container jinja2's Undefined has no good repr either;
		// the empty string keeps the output readable.
	case v.IsNone():
		sb.WriteString("None")
	case v.IsBool():
		if v.AsBool() {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case v.IsInt():
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		sb.WriteString(pyFloatRepr(v.AsFloat()))
	case v.IsString():
		writePyStringRepr(sb, v.AsString())
	case v.IsList():
		sb.WriteByte('[')
		for i, it := range v.AsList().Items {
			if i > 0 {
				sb.WriteString(", ")
			}
			writePyRepr(sb, it)
		}
		sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		sb.WriteByte('{')
		for i, k := range d.OrderedKeys() {
			if i > 0 {
				sb.WriteString(", ")
			}
			writePyStringRepr(sb, k)
			sb.WriteString(": ")
			val, _ := d.Get(k)
			writePyRepr(sb, val)
		}
		sb.WriteByte('}')
	case v.IsCallable():
		fmt.Fprintf(sb, "<function %s>", v.AsCallable().Name)
	}
}

// writePyStringRepr is Python's repr() of a str: single quotes unless the
// text has a single quote and no double quote, and escapes for the quote,
// backslash and non-printable characters.
func writePyStringRepr(sb *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	sb.WriteByte(q)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(sb, `\x%02x`, s[i])
		case r == rune(q) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == ' ' || (r > ' ' && unicode.IsPrint(r)):
			sb.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(sb, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(sb, `\u%04x`, r)
		default:
			fmt.Fprintf(sb, `\U%08x`, r)
		}
		i += size
	}
	sb.WriteByte(q)
}
