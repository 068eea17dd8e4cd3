package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// pyJSON holds the json.dumps arguments Hugging Face's tojson passes on.
type pyJSON struct {
	ensureASCII bool
	indent      *string // nil: one line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// filterToJSON replaces the engine's tojson. The engine's version sends
// indent= through Go's json.MarshalIndent, which sorts keys and uses Go's
// float and escaping rules; HF templates print tool schemas with
// tojson(indent=4), so the prompt would differ from the one the model was
// trained on. This is HF's signature:
// tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: missing value")
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	opt := map[string]jinja.Value{}
	for i, a := range args[1:] {
		if i >= len(names) {
			return jinja.Undefined(), fmt.Errorf("tojson: too many arguments")
		}
		opt[names[i]] = a
	}
	for k, v := range kwargs {
		if !containsString(names, k) {
			return jinja.Undefined(), fmt.Errorf("tojson: unexpected keyword argument %q", k)
		}
		opt[k] = v
	}
	p := pyJSON{itemSep: ", ", keySep: ": "}
	if v, ok := opt["ensure_ascii"]; ok {
		p.ensureASCII = v.IsTruthy()
	}
	if v, ok := opt["sort_keys"]; ok {
		p.sortKeys = v.IsTruthy()
	}
	if v, ok := opt["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		var s string
		switch {
		case v.IsInt():
			s = strings.Repeat(" ", max(0, int(v.AsInt())))
		case v.IsString():
			s = v.AsString()
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent must be an int or a string")
		}
		p.indent = &s
		// Python drops the trailing space of ", " once lines break.
		p.itemSep = ","
	}
	if v, ok := opt["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be a pair of strings")
		}
		p.itemSep = v.AsList().Get(0).AsString()
		p.keySep = v.AsList().Get(1).AsString()
	}
	var sb strings.Builder
	if err := p.encode(&sb, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(sb.String()), nil
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (p *pyJSON) newline(sb *strings.Builder, level int) {
	sb.WriteByte('\n')
	for range level {
		sb.WriteString(*p.indent)
	}
}

func (p *pyJSON) encode(sb *strings.Builder, v jinja.Value, level int) error {
	switch {
	case v.IsNone():
		sb.WriteString("null")
	case v.IsUndefined():
		// HF's tojson would fail on jinja2's Undefined; null is the
		// closest harmless answer.
		sb.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case v.IsInt():
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		sb.WriteString(pyFloatJSON(v.AsFloat()))
	case v.IsString():
		writePyString(sb, v.AsString(), p.ensureASCII)
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				sb.WriteString(p.itemSep)
			}
			if p.indent != nil {
				p.newline(sb, level+1)
			}
			if err := p.encode(sb, it, level+1); err != nil {
				return err
			}
		}
		if p.indent != nil {
			p.newline(sb, level)
		}
		sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			sb.WriteString("{}")
			return nil
		}
		if p.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(p.itemSep)
			}
			if p.indent != nil {
				p.newline(sb, level+1)
			}
			writePyString(sb, k, p.ensureASCII)
			sb.WriteString(p.keySep)
			val, _ := d.Get(k)
			if err := p.encode(sb, val, level+1); err != nil {
				return err
			}
		}
		if p.indent != nil {
			p.newline(sb, level)
		}
		sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", kindName(v))
	}
	return nil
}

func kindName(v jinja.Value) string {
	if v.IsCallable() {
		return "function"
	}
	return "value"
}

// pyFloatJSON is Python's float.__repr__ as json.dumps uses it: shortest
// round-trip digits, positional notation for exponents -4..15 (always with a
// fractional part), scientific otherwise, and Infinity/NaN as json.dumps
// writes them (allow_nan=True).
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

func pyFloatRepr(f float64) string {
	if math.IsNaN(f) {
		return "nan"
	}
	if math.IsInf(f, 0) {
		if f > 0 {
			return "inf"
		}
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	var out string
	switch {
	case exp < 0:
		out = "0." + strings.Repeat("0", -exp-1) + digits
	case exp+1 >= len(digits):
		out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	default:
		out = digits[:exp+1] + "." + digits[exp+1:]
	}
	return sign + out
}

// writePyString quotes s as json.dumps does: only '"', '\\' and control
// characters are escaped unless ensureASCII, which also escapes every
// non-ASCII rune (as UTF-16 surrogate pairs above the BMP). Unlike Go's
// encoder, U+2028/U+2029 and '<', '>', '&' stay as they are.
func writePyString(sb *strings.Builder, s string, ensureASCII bool) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		sb.WriteString(`\u`)
		sb.WriteByte(hex[r>>12&0xf])
		sb.WriteByte(hex[r>>8&0xf])
		sb.WriteByte(hex[r>>4&0xf])
		sb.WriteByte(hex[r&0xf])
	}
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				sb.WriteString(`\"`)
			case '\\':
				sb.WriteString(`\\`)
			case '\n':
				sb.WriteString(`\n`)
			case '\r':
				sb.WriteString(`\r`)
			case '\t':
				sb.WriteString(`\t`)
			case '\b':
				sb.WriteString(`\b`)
			case '\f':
				sb.WriteString(`\f`)
			default:
				// Python's ensure_ascii escapes everything outside
				// ' '..'~', DEL included.
				if c < 0x20 || (ensureASCII && c == 0x7f) {
					u4(rune(c))
				} else {
					sb.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !ensureASCII {
			// Invalid bytes pass through: Python strings cannot hold
			// them, so there is no behaviour to copy, and dropping data
			// silently would be worse.
			sb.WriteString(s[i : i+size])
		} else if r >= 0x10000 {
			r -= 0x10000
			u4(0xd800 + (r>>10)&0x3ff)
			u4(0xdc00 + r&0x3ff)
		} else {
			u4(r)
		}
		i += size
	}
	sb.WriteByte('"')
}
