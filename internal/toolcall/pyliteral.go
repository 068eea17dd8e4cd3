package toolcall

import (
	"strconv"
	"strings"
)

// pythonLiteral converts a Python literal of dicts, lists, strings,
// numbers, True, False and None (as Python's str prints a dict) into
// JSON; false when s is not one, or has text after it.
func pythonLiteral(s string) (string, bool) {
	p := &pyReader{s: s}
	var sb strings.Builder
	if !p.value(&sb, 0) {
		return "", false
	}
	p.space()
	return sb.String(), p.i == len(p.s)
}

type pyReader struct {
	s string
	i int
}

func (p *pyReader) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyReader) value(sb *strings.Builder, depth int) bool {
	if depth > 100 {
		return false
	}
	p.space()
	if p.i >= len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		sb.WriteByte(c)
		p.i++
		first := true
		for {
			p.space()
			if p.i < len(p.s) && p.s[p.i] == closer {
				p.i++
				sb.WriteByte(closer)
				return true
			}
			if !first {
				if p.i >= len(p.s) || p.s[p.i] != ',' {
					return false
				}
				p.i++
				sb.WriteString(", ")
				p.space()
				if p.i < len(p.s) && p.s[p.i] == closer { // trailing comma
					continue
				}
			}
			first = false
			if c == '{' {
				p.space()
				if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
					return false
				}
				if !p.str(sb) {
					return false
				}
				p.space()
				if p.i >= len(p.s) || p.s[p.i] != ':' {
					return false
				}
				p.i++
				sb.WriteString(": ")
			}
			if !p.value(sb, depth+1) {
				return false
			}
		}
	case c == '\'' || c == '"':
		return p.str(sb)
	}
	for _, kw := range [][2]string{{"True", "true"}, {"False", "false"}, {"None", "null"}} {
		if strings.HasPrefix(p.s[p.i:], kw[0]) {
			p.i += len(kw[0])
			sb.WriteString(kw[1])
			return true
		}
	}
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("+-0123456789.eE", p.s[p.i]) >= 0 {
		p.i++
	}
	num := p.s[start:p.i]
	if _, err := strconv.ParseFloat(num, 64); err != nil || num == "" {
		return false
	}
	sb.WriteString(strings.TrimPrefix(num, "+"))
	return true
}

// str reads a Python string literal (either quote, backslash escapes).
func (p *pyReader) str(sb *strings.Builder) bool {
	q := p.s[p.i]
	p.i++
	var out strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			sb.WriteString(quote(out.String()))
			return true
		case c == '\\' && p.i+1 < len(p.s):
			p.i++
			switch e := p.s[p.i]; e {
			case 'n':
				out.WriteByte('\n')
			case 't':
				out.WriteByte('\t')
			case 'r':
				out.WriteByte('\r')
			default:
				out.WriteByte(e)
			}
			p.i++
		default:
			out.WriteByte(c)
			p.i++
		}
	}
	return false
}
