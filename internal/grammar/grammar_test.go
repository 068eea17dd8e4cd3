package grammar

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

const jsonGBNF = `# JSON, as in RFC 8259, with bounded whitespace
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= | " " | "\n" [ \t]{0,20}
`

func mustGBNF(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(src)
	if err != nil {
		t.Fatalf("ParseGBNF: %v", err)
	}
	return g
}

func TestGBNFJSON(t *testing.T) {
	g := mustGBNF(t, jsonGBNF)
	for _, s := range []string{
		`{}`, `[]`, `0`, `-12.5e+3`, `"a\"b\\c\u00e9"`, `{"a": [1, 2, {"b": null}], "c": true}`,
		"{\n  \"k\": \"v\"\n}", `"héllo wörld ☃ 😀"`, `[ ]`, `false`,
	} {
		if !g.Accepts(s) {
			t.Errorf("rejected %q", s)
		}
	}
	for _, s := range []string{
		`{`, `01`, `{"a" 1}`, `[1,]`, `"\x"`, "\"a\x01\"", `tru`, `{}}`, `1.`, `"` + "\xff" + `"`, `"\ud800"x`,
	} {
		if g.Accepts(s) {
			t.Errorf("accepted %q", s)
		}
	}
	// Prefixes of valid text are viable, complete or not.
	ok, complete := g.Check(`{"a": [1, 2`)
	if !ok || complete {
		t.Errorf("Check prefix: ok %v complete %v", ok, complete)
	}
	ok, complete = g.Check(`12`)
	if !ok || !complete {
		t.Errorf("Check 12: ok %v complete %v", ok, complete)
	}
}

func TestGBNFSyntax(t *testing.T) {
	ok := []string{
		`root ::= "a"`,
		"root ::= x\nx ::= [a-z]+ # comment\n",
		"root ::= (\n  \"a\"\n  | \"b\"\n)",
		"root ::= \"a\" |\n  \"b\"",
		`root ::= [^\]\\] .`,
		`root ::= "x"{2,} "y"{,3} "z"{4}`,
		`root ::= "\x41\u00e9\U0001F600"`,
	}
	for _, src := range ok {
		if _, err := ParseGBNF(src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
	bad := map[string]string{
		``:                               "no rules",
		`x ::= "a"`:                      `no rule named "root"`,
		`root ::= y`:                     `rule "y" is used but not defined`,
		`root ::= "a`:                    "unterminated string",
		`root ::= [a-`:                   "unterminated character class",
		`root ::= ( "a"`:                 "expected ) to close",
		`root ::= "a" )`:                 "unexpected ) without",
		`root ::= * "a"`:                 "must follow an expression",
		`root = "a"`:                     "expected ::=",
		`root ::= "\q"`:                  `unknown escape \q`,
		`root ::= "a"{3,1}`:              "maximum is below the minimum",
		`root ::= root "a" | "b"`:        "left-recursive",
		"root ::= \"a\"\nroot ::= \"b\"": "defined twice",
		`root ::= x x`:                   "",
		`root ::= <think>`:               "token references",
		`root ::= [z-a]`:                 "reversed",
		`root ::= "\xZZ"`:                "hex digits",
		`root ::= "\uD800"`:              "not a Unicode scalar value",
		"root ::= a\na ::= \"b\"? a":     "left-recursive",
	}
	for src, want := range bad {
		_, err := ParseGBNF(src)
		if want == "" {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", src, err, want)
		}
	}
	// Errors carry the position.
	_, err := ParseGBNF("root ::= \"a\"\nb ::= \"x\" ]")
	se, ok2 := err.(*SyntaxError)
	if !ok2 || se.Line != 2 || se.Col != 11 {
		t.Errorf("position: %#v", err)
	}
}

func TestRepetitionCounts(t *testing.T) {
	g := mustGBNF(t, `root ::= "a"{2,4} "b"{3} "c"{1,} "d"{,2}`)
	for _, s := range []string{"aabbbc", "aaaabbbcccdd", "aaabbbcd"} {
		if !g.Accepts(s) {
			t.Errorf("rejected %q", s)
		}
	}
	for _, s := range []string{"abbbc", "aaaaabbbc", "aabbc", "aabbb", "aabbbcddd"} {
		if g.Accepts(s) {
			t.Errorf("accepted %q", s)
		}
	}
}

// The automaton must not grow with the length of a repetition: a loop
// returns to the same state.
func TestLoopStatesBounded(t *testing.T) {
	g := mustGBNF(t, jsonGBNF)
	g.Accepts(`"` + strings.Repeat("abc", 50) + `"`)
	n1 := len(g.automatonForCheck().a.states)
	g.Accepts(`"` + strings.Repeat("abc", 5000) + `"`)
	if n2 := len(g.automatonForCheck().a.states); n2 != n1 {
		t.Errorf("states grew from %d to %d with a longer string", n1, n2)
	}
}

func TestClassUTF8(t *testing.T) {
	// Every code point in and out of a class, encoded as UTF-8, against
	// the class's byte automaton.
	ranges := []RuneRange{{'a', 'f'}, {0x7F, 0x800}, {0xD000, 0xE100}, {0xFFF0, 0x10010}, {0x10FFF0, 0x10FFFF}}
	in := func(r rune) bool {
		for _, x := range ranges {
			if r >= x.Lo && r <= x.Hi {
				return true
			}
		}
		return false
	}
	for _, negate := range []bool{false, true} {
		b := NewBuilder()
		b.Define("root", Class(ranges, negate))
		g, err := b.Build("root")
		if err != nil {
			t.Fatal(err)
		}
		for r := rune(0); r <= utf8.MaxRune; r++ {
			if r >= 0x3000 && r < 0xC000 || r >= 0x20000 && r < 0x100000 {
				continue // the middle of big ranges: sampled below
			}
			want := in(r) != negate && !(r >= 0xD800 && r <= 0xDFFF)
			if got := g.Accepts(string(utf8.AppendRune(nil, r))); got != want && utf8.ValidRune(r) {
				t.Fatalf("negate %v: U+%04X: got %v, want %v", negate, r, got, want)
			}
		}
		// Surrogates written as (invalid) UTF-8 are refused.
		if g.Accepts("\xed\xa0\x80") {
			t.Errorf("negate %v: accepted an encoded surrogate", negate)
		}
	}
}

func TestEmbed(t *testing.T) {
	inner := mustGBNF(t, jsonGBNF)
	b := NewBuilder()
	b.Define("root", Seq(Lit("<a>"), b.Embed(inner), Lit("</a>")))
	g, err := b.Build("root")
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{`<a>{"x": [1, 2]}</a>`: true, `<a>"s"</a>`: true, `<a>{</a>`: false, `{}`: false} {
		if g.Accepts(s) != want {
			t.Errorf("%q: got %v", s, !want)
		}
	}
}

func TestNotContaining(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, m := range []string{"<tool_call>", "aab", "abab", "a", "[TOOL_CALLS]", "<｜tool▁calls▁begin｜>"} {
		b := NewBuilder()
		b.Define("root", Seq(b.NotContaining(m), Opt(Lit(m))))
		g, err := b.Build("root")
		if err != nil {
			t.Fatal(err)
		}
		alpha := m + "xy<>|"
		for range 3000 {
			n := rng.IntN(20)
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = alpha[rng.IntN(len(alpha))]
			}
			s := string(buf)
			// Text without m, or text without m and then m once, at the end.
			want := !strings.Contains(s, m) || strings.Index(s, m) == len(s)-len(m)
			if got := g.Accepts(s); got != want {
				t.Fatalf("%q in %q: got %v, want %v", m, s, got, want)
			}
		}
	}
}
