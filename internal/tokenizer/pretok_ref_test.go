package tokenizer

import (
	"math/rand"
	"slices"
	"testing"
)

// A reference path for the word-regex pre-tokenizers (llama3, qwen2,
// qwen35): a small backtracking evaluator that runs the regex as written,
// alternatives in order and greedy quantifiers giving back one codepoint at a
// time, with std::regex_iterator's search (leftmost match, gaps kept). It
// shares only the codepoint classes with the scanners in pretok.go, so it
// checks their hand-made control flow, not the Unicode tables.

// rx matches at pos and calls k with every end it can reach, in the order
// the regex prefers them, until k returns true.
type rx func(p *preText, pos, e int, k func(int) bool) bool

func rxClass(f func(r rune, c uint8) bool) rx {
	return func(p *preText, pos, e int, k func(int) bool) bool {
		return pos < e && f(p.cps[pos], p.cls[pos]) && k(pos+1)
	}
}

func rxRune(rs ...rune) rx {
	return rxClass(func(r rune, _ uint8) bool { return slices.Contains(rs, r) })
}

func rxSeq(xs ...rx) rx {
	if len(xs) == 1 {
		return xs[0]
	}
	head, tail := xs[0], rxSeq(xs[1:]...)
	return func(p *preText, pos, e int, k func(int) bool) bool {
		return head(p, pos, e, func(q int) bool { return tail(p, q, e, k) })
	}
}

func rxAlt(xs ...rx) rx {
	return func(p *preText, pos, e int, k func(int) bool) bool {
		for _, x := range xs {
			if x(p, pos, e, k) {
				return true
			}
		}
		return false
	}
}

// rxRepeat is x{lo,hi}, greedy; hi < 0 means no upper bound.
func rxRepeat(x rx, lo, hi int) rx {
	var rep func(p *preText, pos, e, n int, k func(int) bool) bool
	rep = func(p *preText, pos, e, n int, k func(int) bool) bool {
		if hi < 0 || n < hi {
			more := x(p, pos, e, func(q int) bool { return q > pos && rep(p, q, e, n+1, k) })
			if more {
				return true
			}
		}
		return n >= lo && k(pos)
	}
	return func(p *preText, pos, e int, k func(int) bool) bool { return rep(p, pos, e, 0, k) }
}

func rxOpt(x rx) rx  { return rxRepeat(x, 0, 1) }
func rxStar(x rx) rx { return rxRepeat(x, 0, -1) }
func rxPlus(x rx) rx { return rxRepeat(x, 1, -1) }

// rxNotAhead is (?!x).
func rxNotAhead(x rx) rx {
	return func(p *preText, pos, e int, k func(int) bool) bool {
		return !x(p, pos, e, func(int) bool { return true }) && k(pos)
	}
}

// refWordRegex builds
// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\s W \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where W is the word class (\p{L}, or [\p{L}\p{M}] for qwen35) and D the
// digit group: llama.cpp's llama3 (D = 3), qwen2 and qwen35 (D = 1) patterns.
func refWordRegex(word uint8, maxDigits int) rx {
	ap := rxRune('\'')
	ci := func(a, b rune) rx { return rxRune(a, b) }
	isCR := func(r rune) bool { return r == '\r' || r == '\n' }
	return rxAlt(
		rxAlt(
			rxSeq(ap, ci('s', 'S')), rxSeq(ap, ci('t', 'T')), rxSeq(ap, ci('r', 'R'), ci('e', 'E')),
			rxSeq(ap, ci('v', 'V'), ci('e', 'E')), rxSeq(ap, ci('m', 'M')), rxSeq(ap, ci('l', 'L'), ci('l', 'L')),
			rxSeq(ap, ci('d', 'D')),
		),
		rxSeq(
			rxOpt(rxClass(func(r rune, c uint8) bool { return !isCR(r) && c&(clLetter|clNumber) == 0 })),
			rxPlus(rxClass(func(_ rune, c uint8) bool { return c&word != 0 })),
		),
		rxRepeat(rxClass(func(_ rune, c uint8) bool { return c&clNumber != 0 }), 1, maxDigits),
		rxSeq(
			rxOpt(rxRune(' ')),
			rxPlus(rxClass(func(_ rune, c uint8) bool { return c&(clSpace|word|clNumber) == 0 })),
			rxStar(rxRune('\r', '\n')),
		),
		rxSeq(rxStar(rxClass(func(_ rune, c uint8) bool { return c&clSpace != 0 })), rxPlus(rxRune('\r', '\n'))),
		rxSeq(
			rxPlus(rxClass(func(_ rune, c uint8) bool { return c&clSpace != 0 })),
			rxNotAhead(rxClass(func(_ rune, c uint8) bool { return c&clSpace == 0 })),
		),
		rxPlus(rxClass(func(_ rune, c uint8) bool { return c&clSpace != 0 })),
	)
}

// refSplit is std::regex_iterator over all of p: the end offset of every
// match and of every gap between matches.
func refSplit(x rx, p *preText) []int {
	var ends []int
	n := len(p.cps)
	gap := 0
	for pos := 0; pos < n; {
		end := -1
		x(p, pos, n, func(q int) bool { end = q; return true })
		if end <= pos { // no match (or an empty one, which these patterns cannot make)
			pos++
			continue
		}
		if pos > gap {
			ends = append(ends, pos)
		}
		ends = append(ends, end)
		pos, gap = end, end
	}
	if gap < n {
		ends = append(ends, n)
	}
	return ends
}

// refPre lists the pre-tokenizers that are one word regex, with that regex.
var refPre = []struct {
	name string
	re   rx
}{
	{"llama3", refWordRegex(clLetter, 3)},
	{"qwen2", refWordRegex(clLetter, 1)},
	{"qwen35", refWordRegex(clLetter|clMark, 1)},
}

// checkPreRef compares the scanner of every refPre entry with its regex on
// text; it returns a description of the first difference, or "".
func checkPreRef(text string) (string, []int, []int) {
	var p preText
	p.reset(text)
	sc := &scratch{}
	for _, r := range refPre {
		pt, err := lookupPre(r.name)
		if err != nil {
			return err.Error(), nil, nil
		}
		got := slices.Clone(pt.split(&p, sc))
		want := refSplit(r.re, &p)
		if !slices.Equal(got, want) {
			return r.name, got, want
		}
	}
	return "", nil, nil
}

// preAlphabet is what the random texts are made of: every class the
// regexes tell apart, the contraction letters in both cases, the codepoints
// the scanners test by value, and marks of each kind (Mn, Mc, Me, a variation
// selector, a virama) next to letters, digits, emoji and spaces.
var preAlphabet = []rune{
	'a', 'Z', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'V', 'm', 'M', 'l', 'L', 'd', 'D',
	'é', 'Ж', '我', '가', 'ក', 'ន', 'क', 'ǅ', 'ª',
	'\u0301', '\u0327', '\u0903', '\u094d', '\u17b6', '\u17c6', '\u20dd', '\u0488', '\ufe0f', '\U000e0100', '\u200d',
	'0', '7', '٣', '½', 'Ⅻ', '²',
	'\'', '\'', ' ', ' ', ' ', '\t', '\n', '\r', '\v', '\u00a0', '\u3000', '\u2029', '\u0085', '\u1680',
	'!', '.', ',', '?', '…', '。', '$', '+', '<', '_', '-', '`',
	'🦙', '😶', 0, 0x1e, '▁', '\uFFFD', 0xE000,
}

// TestPreTokenizerReference runs the word-regex scanners against refSplit
// on random texts over preAlphabet.
func TestPreTokenizerReference(t *testing.T) {
	rng := rand.New(rand.NewSource(35))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	buf := make([]rune, 0, 24)
	for i := 0; i < n; i++ {
		buf = buf[:0]
		for j := rng.Intn(24); j > 0; j-- {
			buf = append(buf, preAlphabet[rng.Intn(len(preAlphabet))])
		}
		text := string(buf)
		if name, got, want := checkPreRef(text); name != "" {
			t.Fatalf("%s: split(%q) ends %v, the regex gives %v", name, text, got, want)
		}
	}
}
