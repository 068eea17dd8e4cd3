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
)

var toJSONUse = regexp.MustCompile(`(\|\s*)tojson\b`)

// rewriteSource renames engine filters we replace, touching only code inside
// {{ }} and {% %} tags and outside string literals, so template text and
// quoted strings are left byte for byte, and line numbers stay the same.
func rewriteSource(src string) string {
	if !strings.Contains(src, "tojson") {
		return src
	}
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
			out.WriteString(rewriteCode(tag))
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
