package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// SyntaxError is a GBNF text that does not parse: where and why.
type SyntaxError struct {
	Line, Col int // 1-based; Col counts bytes
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// MaxGBNF bounds a GBNF text: a longer one is refused before parsing.
const MaxGBNF = 1 << 20

// ParseGBNF compiles a grammar in GBNF, the notation of llama.cpp's
// grammars: rules "name ::= expression", the start rule named root;
// expressions of "literal strings", [character classes] (ranges, ^ to
// negate), the any-character dot, rule names, ( groups ), | alternatives and
// the repetitions * + ? {m} {m,} {m,n} {,n}; # starts a comment. A rule ends
// at a newline outside parentheses, except after "::=" or "|". Escapes in
// strings and classes: \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH.
// Literals and classes match code points in UTF-8.
func ParseGBNF(src string) (*Grammar, error) {
	if len(src) > MaxGBNF {
		return nil, fmt.Errorf("grammar: %d bytes of GBNF; at most %d are accepted", len(src), MaxGBNF)
	}
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("grammar: the GBNF text is not valid UTF-8")
	}
	p := &gbnfParser{src: src, b: NewBuilder(), defined: map[string]int{}, refs: map[string]int{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if _, ok := p.defined["root"]; !ok {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: `no rule named "root" (the start rule)`}
	}
	for name, at := range p.refs {
		if _, ok := p.defined[name]; !ok {
			l, c := p.lineCol(at)
			return nil, &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf("rule %q is used but not defined", name)}
		}
	}
	return p.b.Build("root")
}

type gbnfParser struct {
	src     string
	pos     int
	b       *Builder
	defined map[string]int // rule name -> offset of its definition
	refs    map[string]int // rule name -> offset of its first use
	depth   int
}

// maxNesting bounds parenthesis depth, so a hostile text cannot exhaust
// the stack.
const maxNesting = 256

func (p *gbnfParser) lineCol(at int) (int, int) {
	line, col := 1, 1
	for i := 0; i < at && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func (p *gbnfParser) errAt(at int, format string, a ...any) error {
	l, c := p.lineCol(at)
	return &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf(format, a...)}
}

func (p *gbnfParser) describe() string {
	if p.pos >= len(p.src) {
		return "the end of the text"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return strconv.QuoteRune(r)
}

// space skips blanks and comments, and newlines when nl is set.
func (p *gbnfParser) space(nl bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case nl && (c == '\n' || c == '\r'):
			p.pos++
		default:
			return
		}
	}
}

func isWordByte(c byte) bool {
	return c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isWordByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *gbnfParser) parse() error {
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			if len(p.defined) == 0 {
				return p.errAt(p.pos, "the grammar has no rules")
			}
			return nil
		}
		at := p.pos
		name := p.name()
		if name == "" {
			return p.errAt(p.pos, "expected a rule name, found %s", p.describe())
		}
		if _, dup := p.defined[name]; dup {
			return p.errAt(at, "rule %q is defined twice", name)
		}
		p.space(false)
		if !hasPrefixAt(p.src, p.pos, "::=") {
			return p.errAt(p.pos, "expected ::= after the rule name %q, found %s", name, p.describe())
		}
		p.pos += 3
		p.space(true)
		p.defined[name] = at
		body, err := p.alternatives(false)
		if err != nil {
			return err
		}
		p.b.Define(name, body)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return p.errAt(p.pos, "expected the end of the line after rule %q, found %s", name, p.describe())
		}
	}
}

func hasPrefixAt(s string, at int, prefix string) bool {
	return len(s)-at >= len(prefix) && s[at:at+len(prefix)] == prefix
}

func (p *gbnfParser) alternatives(nested bool) (*Node, error) {
	var alts []*Node
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		return Alt(alts...), nil
	}
}

func (p *gbnfParser) sequence(nested bool) (*Node, error) {
	var items []*Node
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		var item *Node
		switch {
		case c == '"':
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			item = lit
		case c == '[':
			cls, err := p.class()
			if err != nil {
				return nil, err
			}
			item = cls
		case c == '.':
			p.pos++
			item = AnyChar()
		case c == '(':
			at := p.pos
			p.pos++
			if p.depth++; p.depth > maxNesting {
				return nil, p.errAt(at, "parentheses nested deeper than %d", maxNesting)
			}
			p.space(true)
			inner, err := p.alternatives(true)
			if err != nil {
				return nil, err
			}
			p.depth--
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errAt(p.pos, "expected ) to close the ( at line %d, found %s", p.lineOf(at), p.describe())
			}
			p.pos++
			item = inner
		case c == '<':
			return nil, p.errAt(p.pos, "token references (<...>) are not supported; write the token's text as a string")
		case isWordByte(c):
			at := p.pos
			name := p.name()
			if _, ok := p.refs[name]; !ok {
				p.refs[name] = at
			}
			item = p.b.Ref(name)
		default:
			return Seq(items...), p.endOfSequence(nested)
		}
		p.space(nested)
		var err error
		if item, err = p.postfix(item, nested); err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return Seq(items...), nil
}

func (p *gbnfParser) lineOf(at int) int { l, _ := p.lineCol(at); return l }

// endOfSequence checks that what stopped a sequence may stop it.
func (p *gbnfParser) endOfSequence(nested bool) error {
	if p.pos >= len(p.src) {
		return nil
	}
	switch c := p.src[p.pos]; {
	case c == '|', c == '\n', c == '\r':
		return nil
	case c == ')' && nested:
		return nil
	case c == ')':
		return p.errAt(p.pos, "unexpected ) without a matching (")
	case c == '*' || c == '+' || c == '?' || c == '{':
		return p.errAt(p.pos, "%s must follow an expression", p.describe())
	}
	return p.errAt(p.pos, "unexpected %s", p.describe())
}

func (p *gbnfParser) postfix(item *Node, nested bool) (*Node, error) {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '*':
			item = Star(item)
			p.pos++
		case '+':
			item = Plus(item)
			p.pos++
		case '?':
			item = Opt(item)
			p.pos++
		case '{':
			at := p.pos
			p.pos++
			p.space(nested)
			lo, hasLo := p.number()
			p.space(nested)
			hi := lo
			if p.pos < len(p.src) && p.src[p.pos] == ',' {
				p.pos++
				p.space(nested)
				var hasHi bool
				hi, hasHi = p.number()
				if !hasHi {
					hi = -1
				}
				p.space(nested)
			} else if !hasLo {
				return nil, p.errAt(p.pos, "expected a count in {}, found %s", p.describe())
			}
			if p.pos >= len(p.src) || p.src[p.pos] != '}' {
				return nil, p.errAt(p.pos, "expected } to close the repetition, found %s", p.describe())
			}
			p.pos++
			if lo < 0 || (hi >= 0 && hi < lo) {
				return nil, p.errAt(at, "repetition {%d,%d}: the maximum is below the minimum", lo, hi)
			}
			if lo > 10000 || hi > 10000 {
				return nil, p.errAt(at, "repetition counts above 10000 are not supported")
			}
			item = Repeat(item, lo, hi)
		default:
			return item, nil
		}
		p.space(nested)
	}
	return item, nil
}

func (p *gbnfParser) number() (int, bool) {
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' && p.pos-start < 9 {
		p.pos++
	}
	if p.pos == start {
		return 0, false
	}
	n, _ := strconv.Atoi(p.src[start:p.pos])
	return n, true
}

// char reads one code point of a literal or class, escapes decoded.
func (p *gbnfParser) char() (rune, error) {
	at := p.pos
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errAt(at, "unfinished escape at the end of the text")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '.', '/':
		return rune(c), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if len(p.src)-p.pos < n {
			return 0, p.errAt(at, `\%c needs %d hex digits`, c, n)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return 0, p.errAt(at, `\%c needs %d hex digits, found %q`, c, n, p.src[p.pos:p.pos+n])
		}
		p.pos += n
		if v > utf8.MaxRune || (v >= 0xD800 && v <= 0xDFFF) {
			return 0, p.errAt(at, "escape %q is not a Unicode scalar value", p.src[at:p.pos])
		}
		return rune(v), nil
	}
	return 0, p.errAt(at, "unknown escape \\%c", c)
}

func (p *gbnfParser) literal() (*Node, error) {
	at := p.pos
	p.pos++
	var buf []byte
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return nil, p.errAt(at, "unterminated string")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return Lit(string(buf)), nil
		}
		r, err := p.char()
		if err != nil {
			return nil, err
		}
		buf = utf8.AppendRune(buf, r)
	}
}

func (p *gbnfParser) class() (*Node, error) {
	at := p.pos
	p.pos++
	negate := false
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		negate = true
		p.pos++
	}
	var ranges []RuneRange
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return nil, p.errAt(at, "unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return Class(ranges, negate), nil
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			dash := p.pos
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errAt(dash, "range %q-%q is reversed", lo, hi)
			}
		}
		ranges = append(ranges, RuneRange{lo, hi})
	}
}
