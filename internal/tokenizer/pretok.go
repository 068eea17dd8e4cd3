package tokenizer

import "fmt"

// Pre-tokenizers. llama.cpp splits BPE text with a list of regexes applied
// one after the other: each regex cuts every fragment left by the previous
// one into its matches and the gaps between them. Two of the regexes (GPT-2's
// and Llama 3's) have hand-written scanners there; the rest run through
// std::regex over a text in which every non-ASCII codepoint was collapsed to
// one byte naming its category. Each function here reproduces one such regex
// with a scanner over codepoints and their classes, following the
// backtracking semantics of the regex (or the quirks of llama.cpp's scanner)
// rather than what the pattern might be meant to do.

// preText is the text being split: codepoints as llama.cpp decodes them and
// their classes.
type preText struct {
	cps []rune
	cls []uint8
}

func (p *preText) reset(text string) {
	p.cps = p.cps[:0]
	p.cls = p.cls[:0]
	for i := 0; i < len(text); {
		r, n := decodeRune(text, i)
		i += n
		p.cps = append(p.cps, r)
		p.cls = append(p.cls, classOf(r))
	}
}

// splitter cuts the fragment [s, e) of p and appends the end offset of every
// piece, covering [s, e) exactly.
type splitter func(p *preText, s, e int, ends []int) []int

// preTokenizer is a named chain of splitters.
type preTokenizer struct {
	name   string
	chain  []splitter
	ignore bool // ignore_merges: a word that is itself a token is not merged
	clean  bool // clean_spaces when detokenizing
}

// split runs the chain over p and returns the end offsets of the words,
// in one of sc's buffers.
func (pt *preTokenizer) split(p *preText, sc *scratch) []int {
	a, b := sc.ends[:0], sc.ends2[:0]
	if len(p.cps) > 0 {
		a = append(a, len(p.cps))
		for _, f := range pt.chain {
			b = b[:0]
			prev := 0
			for _, e := range a {
				b = f(p, prev, e, b)
				prev = e
			}
			a, b = b, a
		}
	}
	sc.ends, sc.ends2 = a, b
	return a
}

// lookupPre maps every tokenizer.ggml.pre name llama.cpp accepts for the
// regex families implemented here.
func lookupPre(name string) (*preTokenizer, error) {
	gpt2 := splitGPT2
	llama3 := splitLlama3(3)
	pt := &preTokenizer{name: name, clean: true}
	switch name {
	case "", "default":
		pt.name = "default"
		pt.chain = []splitter{matches(runOf(isDefaultPunct)), gpt2, matches(runOf(isNumber)), matches(threeDigits)}
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2":
		pt.chain = []splitter{llama3}
		pt.ignore = true
	case "dbrx", "smaug-bpe", "glm4", "chatglm-bpe":
		pt.chain = []splitter{llama3}
	case "deepseek-llm":
		pt.chain = []splitter{
			matches(crlf),
			matches(optSpaceThen(inTable(deepseekLetters))),
			matches(optSpaceThen(inTable(deepseekPunct))),
			trailingSpace,
			matches(runOf(inTable(cjkHangul))),
			matches(runOf(isNumber)),
		}
		pt.clean = false
	case "deepseek-coder":
		pt.chain = []splitter{
			matches(crlf),
			matches(optSpaceThen(isLetter)),
			matches(optSpaceThen(isPunct)),
			matches(runOf(inTable(cjkHangul))),
			matches(oneOf(isNumber)),
		}
		pt.clean = false
	case "falcon":
		pt.chain = []splitter{matches(runOf(isFalconPunct)), gpt2, matches(threeDigits)}
	case "starcoder", "refact", "smollm", "codeshell", "exaone", "minerva-7b":
		pt.chain = []splitter{matches(oneOf(isNumber)), gpt2}
		pt.clean = name != "smollm"
	case "command-r":
		pt.chain = []splitter{matches(oneOf(isNumber)), gpt2}
		pt.clean = false
	case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "mpt", "olmo", "jais", "exaone4":
		pt.chain = []splitter{gpt2}
	case "trillion", "granite-docling":
		pt.chain = []splitter{gpt2}
		pt.clean = false
	case "qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez":
		// The qwen2 regex is Llama 3's with \p{N} instead of \p{N}{1,3}.
		pt.chain = []splitter{splitLlama3(1)}
		pt.clean = name == "stablelm2" || name == "megrez"
	case "qwen35":
		pt.chain = []splitter{splitQwen35()}
		pt.clean = false
	case "poro-chat", "bloom", "gpt3-finnish":
		pt.chain = []splitter{matches(optSpaceChar(notPoroStop))}
		pt.clean = name != "poro-chat"
	case "viking":
		pt.chain = []splitter{matches(optSpaceChar(notPoroStop)), matches(oneOf(isNumber))}
		pt.clean = false
	default:
		return nil, fmt.Errorf("tokenizer: unknown pre-tokenizer %q (tokenizer.ggml.pre)", name)
	}
	return pt, nil
}

// splitGPT2 is llama.cpp's scanner for
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(p *preText, s, e int, ends []int) []int {
	cps, cls := p.cps, p.cls
	at := func(i int) (uint8, bool) {
		if i < e {
			return cls[i], true
		}
		return 0, false
	}
	prev := s
	add := func(end int) int {
		n := end - prev
		if n > 0 {
			ends = append(ends, end)
		}
		prev = end
		return n
	}
	for pos := s; pos < e; {
		c := cps[pos]
		if c == '\'' && pos+1 < e {
			switch cps[pos+1] {
			case 's', 't', 'm', 'd':
				pos += add(pos + 2)
				continue
			}
			if pos+2 < e {
				a, b := cps[pos+1], cps[pos+2]
				if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
					pos += add(pos + 3)
					continue
				}
			}
		}
		f2, in2 := cls[pos], true
		if c == ' ' {
			f2, in2 = at(pos + 1)
		}
		switch {
		case f2&clLetter != 0:
			if c == ' ' {
				pos++
			}
			for pos < e && cls[pos]&clLetter != 0 {
				pos++
			}
			add(pos)
			continue
		case f2&clNumber != 0:
			if c == ' ' {
				pos++
			}
			for pos < e && cls[pos]&clNumber != 0 {
				pos++
			}
			add(pos)
			continue
		case in2 && f2&(clSpace|clLetter|clNumber) == 0:
			if c == ' ' {
				pos++
			}
			for pos < e && cls[pos]&(clSpace|clLetter|clNumber) == 0 {
				pos++
			}
			add(pos)
			continue
		}
		n := 0
		for pos+n < e && cls[pos+n]&clSpace != 0 {
			n++
		}
		switch {
		case n > 1 && pos+n < e: // \s+(?!\S): leave the last space to the next word
			pos += n - 1
		case n > 0:
			pos += n
		default:
			pos++
		}
		add(pos)
	}
	return ends
}

// splitLlama3 is llama.cpp's scanner for
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with maxDigits = 3; with maxDigits = 1 it is qwen2's regex, which differs
// only in \p{N}.
func splitLlama3(maxDigits int) splitter { return splitWords(maxDigits, clLetter) }

// splitQwen35 is llama.cpp's scanner for Qwen3.5's
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// qwen2's regex with combining marks counted as word characters: a mark
// stays with the letters around it (Khmer, Devanagari, a letter plus U+0301)
// instead of starting a punctuation run, and a mark on its own (after a
// space, a digit, an emoji) is a word of its own. The optional lead-in
// [^\r\n\p{L}\p{N}] is unchanged, so a mark may also be that lead-in.
func splitQwen35() splitter { return splitWords(1, clLetter|clMark) }

// splitWords is the scanner behind splitLlama3 and splitQwen35: word is the
// class set of the word runs ([\p{L}]+ or [\p{L}\p{M}]+), which the
// punctuation runs then exclude; digits come in groups of up to maxDigits.
func splitWords(maxDigits int, word uint8) splitter {
	return func(p *preText, s, e int, ends []int) []int {
		cps, cls := p.cps, p.cls
		prev := s
		add := func(end int) int {
			n := end - prev
			if n > 0 {
				ends = append(ends, end)
			}
			prev = end
			return n
		}
		for pos := s; pos < e; {
			c := cps[pos]
			f := cls[pos]
			if c == '\'' && pos+1 < e {
				switch lowerASCII(cps[pos+1]) {
				case 's', 't', 'm', 'd':
					pos += add(pos + 2)
					continue
				}
				if pos+2 < e {
					a, b := lowerASCII(cps[pos+1]), lowerASCII(cps[pos+2])
					if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}
			if !(c == '\r' || c == '\n' || f&clNumber != 0) {
				if f&word != 0 || (pos+1 < e && cls[pos+1]&word != 0) {
					pos++
					for pos < e && cls[pos]&word != 0 {
						pos++
					}
					add(pos)
					continue
				}
			}
			if f&clNumber != 0 {
				ini := pos
				for pos < e && cls[pos]&clNumber != 0 {
					pos++
					if pos-ini >= maxDigits {
						add(pos)
						ini = pos
					}
				}
				add(pos)
				continue
			}
			f2 := f
			if c == ' ' {
				f2 = 0
				if pos+1 < e {
					f2 = cls[pos+1]
				}
			}
			// llama.cpp tests the current codepoint's presence here, not the
			// next one's, so a lone trailing space takes this branch too (the
			// result is the same one-space word either way).
			if f2&(clSpace|word|clNumber) == 0 {
				if c == ' ' {
					pos++
				}
				for pos < e && cls[pos]&(clSpace|word|clNumber) == 0 {
					pos++
				}
				for pos < e && (cps[pos] == '\r' || cps[pos] == '\n') {
					pos++
				}
				add(pos)
				continue
			}
			n, lastNL := 0, 0
			for pos+n < e && cls[pos+n]&clSpace != 0 {
				if r := cps[pos+n]; r == '\r' || r == '\n' {
					lastNL = pos + n + 1
				}
				n++
			}
			switch {
			case lastNL > 0: // \s*[\r\n]+
				pos = lastNL
			case n > 1 && pos+n < e: // \s+(?!\S)
				pos += n - 1
			case n > 0:
				pos += n
			default:
				pos++
			}
			add(pos)
		}
		return ends
	}
}

// lowerASCII folds case for the contractions of (?i:'s|'t|...). Only ASCII
// needs folding: no other codepoint lowercases to one of those letters.
func lowerASCII(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// matcher returns the length of the match at pos (0: none), never reading
// past e.
type matcher func(p *preText, pos, e int) int

// matches turns a matcher into a splitter with std::regex_iterator's search:
// leftmost match, then continue after it; the gaps are pieces too.
func matches(m matcher) splitter {
	return func(p *preText, s, e int, ends []int) []int {
		gap := s
		for pos := s; pos < e; {
			n := m(p, pos, e)
			if n == 0 {
				pos++
				continue
			}
			if pos > gap {
				ends = append(ends, pos)
			}
			pos += n
			ends = append(ends, pos)
			gap = pos
		}
		if gap < e {
			ends = append(ends, e)
		}
		return ends
	}
}

// class predicates take the codepoint and its class.
type pred func(r rune, c uint8) bool

func isLetter(_ rune, c uint8) bool { return c&clLetter != 0 }
func isNumber(_ rune, c uint8) bool { return c&clNumber != 0 }
func isPunct(_ rune, c uint8) bool  { return c&clPunct != 0 }

// isDefaultPunct is [\p{P}\$\+<=>\^~\|]; isFalconPunct adds the backtick.
func isDefaultPunct(r rune, c uint8) bool {
	switch r {
	case '$', '+', '<', '=', '>', '^', '~', '|':
		return true
	}
	return c&clPunct != 0
}

func isFalconPunct(r rune, c uint8) bool { return r == '`' || isDefaultPunct(r, c) }

// notPoroStop is [^(\s|.,!?…。，、।۔،)].
func notPoroStop(r rune, c uint8) bool {
	if c&clSpace != 0 {
		return false
	}
	switch r {
	case '(', '|', '.', ',', '!', '?', '…', '。', '，', '、', '।', '۔', '،', ')':
		return false
	}
	return true
}

func runOf(f pred) matcher {
	return func(p *preText, pos, e int) int {
		n := 0
		for pos+n < e && f(p.cps[pos+n], p.cls[pos+n]) {
			n++
		}
		return n
	}
}

func oneOf(f pred) matcher {
	return func(p *preText, pos, e int) int {
		if f(p.cps[pos], p.cls[pos]) {
			return 1
		}
		return 0
	}
}

// optSpaceThen is \s?X+ where X never matches whitespace: a whitespace
// codepoint is taken only when a run of X follows it.
func optSpaceThen(f pred) matcher {
	run := runOf(f)
	return func(p *preText, pos, e int) int {
		if p.cls[pos]&clSpace != 0 {
			if pos+1 < e {
				if n := run(p, pos+1, e); n > 0 {
					return n + 1
				}
			}
			return 0
		}
		return run(p, pos, e)
	}
}

// optSpaceChar is " ?X+" with a literal space, where X may match the space
// itself only if X says so (for poro it does not: \s is excluded).
func optSpaceChar(f pred) matcher {
	run := runOf(f)
	return func(p *preText, pos, e int) int {
		if p.cps[pos] == ' ' && pos+1 < e {
			if n := run(p, pos+1, e); n > 0 {
				return n + 1
			}
		}
		return run(p, pos, e)
	}
}

func crlf(p *preText, pos, e int) int {
	if r := p.cps[pos]; r == '\r' || r == '\n' {
		return 1
	}
	return 0
}

func threeDigits(p *preText, pos, e int) int {
	if pos+3 <= e {
		for i := pos; i < pos+3; i++ {
			if r := p.cps[i]; r < '0' || r > '9' {
				return 0
			}
		}
		return 3
	}
	return 0
}

// trailingSpace is \s+$: the whitespace that ends the fragment.
func trailingSpace(p *preText, s, e int, ends []int) []int {
	t := e
	for t > s && p.cls[t-1]&clSpace != 0 {
		t--
	}
	if t > s && t < e {
		ends = append(ends, t)
	}
	return append(ends, e)
}

// runeTable is a sorted list of inclusive codepoint ranges.
type runeTable [][2]rune

func (t runeTable) has(r rune) bool {
	lo, hi := 0, len(t)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case r < t[m][0]:
			hi = m
		case r > t[m][1]:
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

// inTable matches codepoints of t. llama.cpp hands these regexes to
// std::wregex after replacing every non-ASCII whitespace codepoint with \v, so
// whitespace never matches a table even where a range covers it (U+3000 in
// the CJK ranges).
func inTable(t runeTable) pred {
	return func(r rune, c uint8) bool { return c&clSpace == 0 && t.has(r) }
}

// parseClass reads the body of a regex character class made only of single
// codepoints and a-b ranges, into a sorted table.
func parseClass(s string) runeTable {
	rs := []rune(s)
	var t runeTable
	for i := 0; i < len(rs); i++ {
		lo, hi := rs[i], rs[i]
		if i+2 < len(rs) && rs[i+1] == '-' {
			hi = rs[i+2]
			i += 2
		}
		t = append(t, [2]rune{lo, hi})
	}
	// insertion sort: the tables are small and mostly ordered
	for i := 1; i < len(t); i++ {
		for j := i; j > 0 && t[j][0] < t[j-1][0]; j-- {
			t[j], t[j-1] = t[j-1], t[j]
		}
	}
	// merge overlaps so the binary search sees disjoint ranges
	out := t[:0]
	for _, r := range t {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			if r[1] > out[n-1][1] {
				out[n-1][1] = r[1]
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// The character classes of DeepSeek LLM's pre-tokenizer (from its
// tokenizer.json, as llama.cpp lists them), escaped because several range
// ends are canonical singletons (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126,
// U+212A) that any Unicode normalization of this file would silently turn
// into other letters.
var (
	deepseekLetters = parseClass("A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943")
	deepseekPunct   = parseClass("!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002")
	cjkHangul       = parseClass("\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff")
)
