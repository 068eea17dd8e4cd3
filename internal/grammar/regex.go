package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Regular expressions of JSON Schema's "pattern" (ECMA-262 syntax), turned
// into the contents of a JSON string: every character the expression
// matches is written as JSON needs it ('"', '\' and controls escaped).
// Supported: literals, escapes (\d \w \s and negations, \n \t \r \f \v \0,
// \xHH, \uHHHH, escaped punctuation), classes with ranges and negation, the
// dot, groups ((...), (?:...), (?<name>...)), alternation, the quantifiers
// * + ? {m} {m,} {m,n} (lazy or not: the language is the same), and ^ and $
// at the very start and end. Refused: backreferences, lookaround, word
// boundaries, Unicode property classes. A pattern not anchored with ^ (or
// $) may be preceded (or followed) by any text, as JSON Schema patterns
// match anywhere in the string.

// maxRepeat bounds {m,n} counts in patterns.
const maxRepeat = 1000

type regexParser struct {
	src   []rune
	pos   int
	depth int
}

// regexBody is the grammar of the JSON string contents (without the
// quotes) that the pattern matches somewhere in.
func regexBody(pattern string) (*Node, error) {
	if !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("the pattern is not valid UTF-8")
	}
	p := &regexParser{src: []rune(pattern)}
	start := len(p.src) > 0 && p.src[0] == '^'
	if start {
		p.pos++
	}
	end := false
	if n := len(p.src); n > p.pos && p.src[n-1] == '$' && !escapedAt(p.src, n-1) {
		end = true
		p.src = p.src[:n-1]
	}
	n, top, err := p.alternation()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("pattern: unexpected %q at offset %d", p.src[p.pos], p.pos)
	}
	if top > 1 && (start || end) {
		return nil, fmt.Errorf("pattern: ^ or $ with a top-level | is ambiguous here; group the alternatives: ^(a|b)$")
	}
	anyText := Star(jsonChars(nil, true))
	parts := []*Node{}
	if !start {
		parts = append(parts, anyText)
	}
	parts = append(parts, n)
	if !end {
		parts = append(parts, anyText)
	}
	return Seq(parts...), nil
}

// escapedAt reports whether src[i] is preceded by an odd number of
// backslashes.
func escapedAt(src []rune, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && src[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

func (p *regexParser) errf(format string, a ...any) error {
	return fmt.Errorf("pattern at offset %d: %s", p.pos, fmt.Sprintf(format, a...))
}

// alternation returns the expression and how many top-level alternatives
// it had.
func (p *regexParser) alternation() (*Node, int, error) {
	var alts []*Node
	for {
		seq, err := p.concat()
		if err != nil {
			return nil, 0, err
		}
		alts = append(alts, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		return Alt(alts...), len(alts), nil
	}
}

func (p *regexParser) concat() (*Node, error) {
	var items []*Node
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c == '|' || c == ')' {
			break
		}
		atom, err := p.atom()
		if err != nil {
			return nil, err
		}
		if atom, err = p.quantifier(atom); err != nil {
			return nil, err
		}
		items = append(items, atom)
	}
	return Seq(items...), nil
}

func (p *regexParser) atom() (*Node, error) {
	c := p.src[p.pos]
	switch c {
	case '(':
		if p.depth++; p.depth > maxNesting {
			return nil, p.errf("groups nested deeper than %d", maxNesting)
		}
		p.pos++
		if p.pos < len(p.src) && p.src[p.pos] == '?' {
			switch {
			case p.pos+1 < len(p.src) && p.src[p.pos+1] == ':':
				p.pos += 2
			case p.pos+2 < len(p.src) && p.src[p.pos+1] == '<' && p.src[p.pos+2] != '=' && p.src[p.pos+2] != '!':
				for p.pos < len(p.src) && p.src[p.pos] != '>' {
					p.pos++
				}
				if p.pos == len(p.src) {
					return nil, p.errf("unterminated group name")
				}
				p.pos++
			default:
				return nil, p.errf("lookaround and other (?...) groups are not supported")
			}
		}
		n, _, err := p.alternation()
		if err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			return nil, p.errf("missing )")
		}
		p.pos++
		p.depth--
		return n, nil
	case ')':
		return nil, p.errf("unmatched )")
	case '[':
		return p.class()
	case '.':
		p.pos++
		return jsonChars(lineTerminators(), true), nil
	case '^', '$':
		return nil, p.errf("%c is only supported at the very start (^) or end ($) of the pattern", c)
	case '*', '+', '?', '{':
		if c == '{' && !p.isQuantifier() {
			p.pos++
			return jsonChars([]RuneRange{{'{', '{'}}, false), nil
		}
		return nil, p.errf("%c must follow something to repeat", c)
	case '\\':
		rs, neg, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return jsonChars(rs, neg), nil
	}
	p.pos++
	return jsonChars([]RuneRange{{c, c}}, false), nil
}

// isQuantifier reports whether the '{' at pos starts {m}, {m,} or {m,n}.
func (p *regexParser) isQuantifier() bool {
	i := p.pos + 1
	digits := func() int {
		n := 0
		for i < len(p.src) && p.src[i] >= '0' && p.src[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return false
	}
	if i < len(p.src) && p.src[i] == ',' {
		i++
		digits()
	}
	return i < len(p.src) && p.src[i] == '}'
}

func (p *regexParser) quantifier(atom *Node) (*Node, error) {
	if p.pos >= len(p.src) {
		return atom, nil
	}
	var min, max int
	switch p.src[p.pos] {
	case '*':
		min, max = 0, -1
		p.pos++
	case '+':
		min, max = 1, -1
		p.pos++
	case '?':
		min, max = 0, 1
		p.pos++
	case '{':
		if !p.isQuantifier() {
			return atom, nil
		}
		p.pos++
		num := func() int {
			start := p.pos
			for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
				p.pos++
			}
			if p.pos == start {
				return -1
			}
			n, err := strconv.Atoi(string(p.src[start:p.pos]))
			if err != nil || n > maxRepeat {
				return maxRepeat + 1
			}
			return n
		}
		min = num()
		max = min
		if p.src[p.pos] == ',' {
			p.pos++
			max = num()
		}
		p.pos++ // '}'
		if min > maxRepeat || max > maxRepeat {
			return nil, p.errf("repetition counts above %d are not supported", maxRepeat)
		}
		if max >= 0 && max < min {
			return nil, p.errf("repetition {%d,%d} has its maximum below its minimum", min, max)
		}
	default:
		return atom, nil
	}
	if p.pos < len(p.src) && p.src[p.pos] == '?' {
		p.pos++ // lazy: same language
	}
	if p.pos < len(p.src) {
		if c := p.src[p.pos]; c == '*' || c == '+' || c == '?' || c == '{' && p.isQuantifier() {
			return nil, p.errf("a quantifier cannot follow a quantifier")
		}
	}
	return Repeat(atom, min, max), nil
}

var (
	digitRanges = []RuneRange{{'0', '9'}}
	wordRanges  = []RuneRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// ECMAScript's \s: white space and line terminators.
	spaceRanges = []RuneRange{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
		{0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
)

func lineTerminators() []RuneRange {
	return []RuneRange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}
}

// escape reads a backslash escape: the characters it stands for, negated
// or not. In a class, \b is a backspace.
func (p *regexParser) escape(inClass bool) ([]RuneRange, bool, error) {
	p.pos++
	if p.pos >= len(p.src) {
		return nil, false, p.errf("pattern ends with a lone backslash")
	}
	c := p.src[p.pos]
	p.pos++
	one := func(r rune) ([]RuneRange, bool, error) { return []RuneRange{{r, r}}, false, nil }
	switch c {
	case 'd':
		return digitRanges, false, nil
	case 'D':
		return digitRanges, true, nil
	case 'w':
		return wordRanges, false, nil
	case 'W':
		return wordRanges, true, nil
	case 's':
		return spaceRanges, false, nil
	case 'S':
		return spaceRanges, true, nil
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 't':
		return one('\t')
	case 'f':
		return one('\f')
	case 'v':
		return one('\v')
	case '0':
		return one(0)
	case 'b':
		if inClass {
			return one('\b')
		}
		return nil, false, p.errf(`\b (word boundary) is not supported`)
	case 'B':
		return nil, false, p.errf(`\B (word boundary) is not supported`)
	case 'p', 'P':
		return nil, false, p.errf(`\%c (Unicode property classes) is not supported`, c)
	case 'k':
		return nil, false, p.errf(`\k (named backreferences) is not supported`)
	case 'c':
		if p.pos < len(p.src) {
			l := p.src[p.pos] | 0x20
			if l >= 'a' && l <= 'z' {
				p.pos++
				return one(l - 'a' + 1)
			}
		}
		return nil, false, p.errf(`\c needs a letter`)
	case 'x', 'u':
		if c == 'u' && p.pos < len(p.src) && p.src[p.pos] == '{' {
			end := p.pos + 1
			for end < len(p.src) && p.src[end] != '}' {
				end++
			}
			v, err := strconv.ParseUint(string(p.src[p.pos+1:min(end, len(p.src))]), 16, 32)
			if end == len(p.src) || err != nil || v > utf8.MaxRune {
				return nil, false, p.errf(`bad \u{...} escape`)
			}
			p.pos = end + 1
			return one(rune(v))
		}
		n := 2
		if c == 'u' {
			n = 4
		}
		if len(p.src)-p.pos < n {
			return nil, false, p.errf(`\%c needs %d hex digits`, c, n)
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil {
			return nil, false, p.errf(`\%c needs %d hex digits`, c, n)
		}
		p.pos += n
		return one(rune(v))
	}
	if c >= '1' && c <= '9' {
		return nil, false, p.errf("backreferences are not supported")
	}
	if c < 128 && isWordByte(byte(c)) {
		return nil, false, p.errf(`unknown escape \%c`, c)
	}
	return one(c)
}

func (p *regexParser) class() (*Node, error) {
	open := p.pos
	p.pos++
	negate := false
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		negate = true
		p.pos++
	}
	var ranges []RuneRange
	var negated [][]RuneRange // \D \W \S inside the class
	first := true
	for {
		if p.pos >= len(p.src) {
			p.pos = open
			return nil, p.errf("unterminated character class")
		}
		c := p.src[p.pos]
		if c == ']' && !first {
			p.pos++
			break
		}
		if c == ']' {
			// "[]" matches nothing in ECMAScript; "[^]" anything.
			p.pos++
			break
		}
		first = false
		var lo []RuneRange
		var neg bool
		if c == '\\' {
			var err error
			if lo, neg, err = p.escape(true); err != nil {
				return nil, err
			}
		} else {
			p.pos++
			lo = []RuneRange{{c, c}}
		}
		if neg {
			negated = append(negated, lo)
			continue
		}
		// A range a-b.
		if len(lo) == 1 && lo[0].Lo == lo[0].Hi && p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			var hi []RuneRange
			if p.src[p.pos] == '\\' {
				var err error
				if hi, neg, err = p.escape(true); err != nil {
					return nil, err
				}
				if neg || len(hi) != 1 || hi[0].Lo != hi[0].Hi {
					return nil, p.errf("a class escape cannot end a range")
				}
			} else {
				hi = []RuneRange{{p.src[p.pos], p.src[p.pos]}}
				p.pos++
			}
			if hi[0].Lo < lo[0].Lo {
				return nil, p.errf("range out of order")
			}
			ranges = append(ranges, RuneRange{lo[0].Lo, hi[0].Lo})
			continue
		}
		ranges = append(ranges, lo...)
	}
	set := normalizeRanges(ranges)
	for _, n := range negated {
		set = normalizeRanges(append(set, invertRanges(normalizeRanges(n))...))
	}
	return jsonChars(set, negate), nil
}

// jsonChars matches one character of ranges (or, negated, not of them)
// as it appears inside a JSON string: itself, or its escape when JSON
// requires one.
func jsonChars(ranges []RuneRange, negate bool) *Node {
	rs := normalizeRanges(ranges)
	if negate {
		rs = invertRanges(rs)
	}
	// The characters written raw: everything but '"', '\' and controls.
	special := []RuneRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}
	raw := intersectRanges(rs, invertRanges(special))
	var alts []*Node
	if len(raw) > 0 {
		alts = append(alts, Class(raw, false))
	}
	for _, r := range intersectRanges(rs, special) {
		for c := r.Lo; c <= r.Hi; c++ {
			alts = append(alts, Lit(jsonEscape(c)))
		}
	}
	if len(alts) == 0 {
		return &Node{op: opBytes} // nothing
	}
	return Alt(alts...)
}

func jsonEscape(c rune) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	return fmt.Sprintf(`\u%04x`, c)
}

func intersectRanges(a, b []RuneRange) []RuneRange {
	var out []RuneRange
	for _, x := range a {
		for _, y := range b {
			lo, hi := max(x.Lo, y.Lo), min(x.Hi, y.Hi)
			if lo <= hi {
				out = append(out, RuneRange{lo, hi})
			}
		}
	}
	return normalizeRanges(out)
}

// formatBody is the grammar of the string contents of a JSON Schema
// format: what it generates is valid for the format (a subset of it:
// dates never fall on February 29, e-mail addresses are plain).
func formatBody(format string) (*Node, error) {
	d := ByteRange('0', '9')
	hex := Class([]RuneRange{{'0', '9'}, {'a', 'f'}}, false)
	rep := func(n *Node, k int) *Node { return Repeat(n, k, k) }
	date := func() *Node {
		day28 := Alt(Seq(Lit("0"), ByteRange('1', '9')), Seq(Lit("1"), d), Seq(Lit("2"), ByteRange('0', '8')))
		day30 := Alt(Seq(Lit("0"), ByteRange('1', '9')), Seq(ByteRange('1', '2'), d), Lit("30"))
		day31 := Alt(day30, Lit("31"))
		md := Alt(
			Seq(Alt(Lit("01"), Lit("03"), Lit("05"), Lit("07"), Lit("08"), Lit("10"), Lit("12")), Lit("-"), day31),
			Seq(Alt(Lit("04"), Lit("06"), Lit("09"), Lit("11")), Lit("-"), day30),
			Seq(Lit("02-"), day28),
		)
		return Seq(rep(d, 4), Lit("-"), md)
	}
	tm := func() *Node {
		hh := Alt(Seq(ByteRange('0', '1'), d), Seq(Lit("2"), ByteRange('0', '3')))
		mm := Seq(ByteRange('0', '5'), d)
		offset := Alt(Lit("Z"), Seq(charSet("+-"), hh, Lit(":"), mm))
		return Seq(hh, Lit(":"), mm, Lit(":"), mm, Opt(Seq(Lit("."), Repeat(d, 1, 9))), offset)
	}
	alnum := Class([]RuneRange{{'0', '9'}, {'a', 'z'}}, false)
	label := Seq(alnum, Opt(Seq(Repeat(Alt(alnum, Lit("-")), 0, 30), alnum)))
	host := Seq(label, Repeat(Seq(Lit("."), label), 0, 4))
	switch format {
	case "date":
		return date(), nil
	case "time":
		return tm(), nil
	case "date-time":
		return Seq(date(), Lit("T"), tm()), nil
	case "uuid":
		return Seq(rep(hex, 8), Lit("-"), rep(hex, 4), Lit("-"), rep(hex, 4), Lit("-"), rep(hex, 4), Lit("-"), rep(hex, 12)), nil
	case "ipv4":
		octet := Alt(Seq(Lit("25"), ByteRange('0', '5')), Seq(Lit("2"), ByteRange('0', '4'), d), Seq(Lit("1"), d, d), Seq(ByteRange('1', '9'), d), d)
		return Seq(octet, Lit("."), octet, Lit("."), octet, Lit("."), octet), nil
	case "email":
		word := Repeat(Class([]RuneRange{{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}, false), 1, 32)
		local := Seq(word, Repeat(Seq(charSet("._+-"), word), 0, 3))
		tld := Repeat(ByteRange('a', 'z'), 2, 10)
		return Seq(local, Lit("@"), label, Repeat(Seq(Lit("."), label), 0, 3), Lit("."), tld), nil
	case "hostname":
		return host, nil
	case "uri":
		seg := Repeat(Class([]RuneRange{{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'-', '.'}, {'_', '_'}, {'~', '~'}}, false), 0, 40)
		return Seq(Alt(Lit("https://"), Lit("http://")), host, Repeat(Seq(Lit("/"), seg), 0, 8)), nil
	}
	return nil, fmt.Errorf("format %q is not supported (supported: date, time, date-time, uuid, ipv4, email, hostname, uri)", format)
}
