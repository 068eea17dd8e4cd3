package chat

import (
	"regexp"
	"strings"
)

// Names under which our replacements of engine built-ins are installed.
// The engine resolves filters among its own built-ins before it looks at the
// render variables, so a replacement filter has to be called by a name the
// engine does not know; the source is rewritten to use it.
const (
	toJSONFilter = "__braid_tojson"
	printFunc    = "__braid_str"
	enterMacro   = "__braid_enter"
	exitMacro    = "__braid_exit"
)

// maxMacroDepth bounds macro recursion. The engine recurses on the Go stack
// without a limit, and a Go stack overflow kills the process (recover cannot
// catch it), so a template with a runaway recursive macro would take the
// server down. Python stops at its recursion limit (a few hundred macro
// levels); real templates recurse as deep as a JSON schema nests.
const maxMacroDepth = 500

var (
	macroOpen  = regexp.MustCompile(`^\{%[-+]?\s*macro\b`)
	macroClose = regexp.MustCompile(`^\{%([-+]?)\s*endmacro\b`)
)

var toJSONUse = regexp.MustCompile(`(\|\s*)tojson\b`)

// rewriteSource renames engine filters we replace, routes {{ }} output
// through Python's str(), and brackets every macro body with depth-counting
// calls, touching only code inside {{ }} and {% %}
// tags and outside string literals, so template text and quoted strings are
// left byte for byte, and line numbers stay the same.
func rewriteSource(src string) string {
	var out strings.Builder
	out.Grow(len(src) + 64)
	i := 0
	for i < len(src) {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			out.WriteString(src[i:])
			break
		}
		j += i
		out.WriteString(src[i:j])
		switch src[j+1] {
		case '#':
			end := strings.Index(src[j+2:], "#}")
			if end < 0 {
				out.WriteString(src[j:])
				return out.String()
			}
			end += j + 2 + 2
			out.WriteString(src[j:end])
			i = end
		case '{', '%':
			closer := "}}"
			if src[j+1] == '%' {
				closer = "%}"
			}
			end := tagEnd(src, j+2, closer)
			tag := src[j:end]
			if src[j+1] == '%' && isRawTag(tag) {
				// Everything up to endraw is literal text.
				k := rawEnd.FindStringIndex(src[end:])
				if k == nil {
					out.WriteString(src[j:])
					return out.String()
				}
				out.WriteString(src[j : end+k[1]])
				i = end + k[1]
				continue
			}
			switch m := macroClose.FindStringSubmatch(tag); {
			case src[j+1] == '{':
				out.WriteString(wrapOutput(rewriteCode(tag)))
			case m != nil:
				// The guard takes over the tag's left whitespace control so
				// lstrip_blocks and '-' strip the same text as before.
				out.WriteString("{%" + m[1] + " if " + exitMacro + "() %}{% endif %}")
				out.WriteString(tag)
			case macroOpen.MatchString(tag):
				out.WriteString(rewriteCode(tag))
				// Repeat the tag's right whitespace control on the guard,
				// which now stands where trim_blocks and '-%}' act.
				right := ""
				if n := len(tag); n >= 3 && (tag[n-3] == '-' || tag[n-3] == '+') {
					right = tag[n-3 : n-2]
				}
				out.WriteString("{% if " + enterMacro + "() %}{% endif " + right + "%}")
			default:
				out.WriteString(rewriteCode(tag))
			}
			i = end
		default:
			out.WriteByte('{')
			i = j + 1
		}
	}
	return out.String()
}

var (
	rawStart = regexp.MustCompile(`^\{%[-+]?\s*raw\s*[-+]?%\}$`)
	rawEnd   = regexp.MustCompile(`\{%[-+]?\s*endraw\s*[-+]?%\}`)
)

func isRawTag(tag string) bool { return rawStart.MatchString(tag) }

// tagEnd returns the index just past the closer of a tag whose code starts
// at i, skipping string literals, or len(src) if it is never closed (the
// engine reports that error itself).
func tagEnd(src string, i int, closer string) int {
	for i < len(src) {
		c := src[i]
		if c == '\'' || c == '"' {
			i = stringEnd(src, i)
			continue
		}
		if strings.HasPrefix(src[i:], closer) {
			return i + len(closer)
		}
		i++
	}
	return len(src)
}

// stringEnd returns the index just past the string literal starting at i.
func stringEnd(src string, i int) int {
	q := src[i]
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case q:
			return i + 1
		}
	}
	return len(src)
}

// rewriteCode applies the renames to the code of one tag, outside its
// string literals.
func rewriteCode(tag string) string {
	if !strings.Contains(tag, "tojson") {
		return tag
	}
	var out strings.Builder
	start := 0
	flush := func(end int) {
		out.WriteString(toJSONUse.ReplaceAllString(tag[start:end], "${1}"+toJSONFilter))
	}
	for i := 0; i < len(tag); {
		if c := tag[i]; c == '\'' || c == '"' {
			flush(i)
			e := stringEnd(tag, i)
			out.WriteString(tag[i:e])
			i, start = e, e
			continue
		}
		i++
	}
	flush(len(tag))
	return out.String()
}

// wrapOutput turns {{ X }} into {{ __braid_str((X)) }}, keeping the
// whitespace-control marks where they were; an unclosed tag is left for
// the engine to report.
func wrapOutput(tag string) string {
	if len(tag) < 4 || !strings.HasSuffix(tag, "}}") {
		return tag
	}
	code := tag[2 : len(tag)-2]
	left, right := "", ""
	if code != "" && (code[0] == '-' || code[0] == '+') {
		left, code = code[:1], code[1:]
	}
	if n := len(code); n > 0 && (code[n-1] == '-' || code[n-1] == '+') {
		right, code = code[n-1:], code[:n-1]
	}
	if strings.TrimSpace(code) == "" {
		return tag
	}
	return "{{" + left + " " + printFunc + "((" + code + ")) " + right + "}}"
}
