package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// WordPiece (tokenizer.ggml.model = "bert") as llama.cpp's WPM tokenizer
// runs it. The GGUF converter stores BERT's word-initial pieces with a "▁"
// prefix and its "##" continuations bare, so a word is "▁" + word matched
// greedily, longest piece first, from left to right; a word with any
// position that no piece starts at becomes one [UNK].

// wpmPhantom is the word-initial marker the converted vocabularies carry.
const wpmPhantom = "\u2581"

// wpmWords is llama.cpp's WPM pre-processing: BERT's BasicTokenizer as
// llama.cpp has it. It appends each word (lowercased and stripped of accents
// when the vocabulary says so) to sc.word, its end to ends, and returns
// ends.
func (t *Tokenizer) wpmWords(sc *scratch, text string, ends []int) []int {
	w := sc.word[:0]
	ends = ends[:0]
	cut := func() {
		if len(ends) == 0 && len(w) > 0 || len(ends) > 0 && len(w) > ends[len(ends)-1] {
			ends = append(ends, len(w))
		}
	}
	for i := 0; i < len(text); {
		r, n := decodeRune(text, i)
		i += n
		if r > unicode.MaxRune {
			// llama.cpp decodes 4-byte sequences up to 0x1FFFFF but throws
			// when it writes one back out; such a codepoint names no
			// character, so it is dropped like U+FFFD.
			continue
		}
		if t.stripAccents {
			r = nfdFirst(r)
		}
		c := classOf(r)
		if c&clSpace != 0 {
			cut()
			continue
		}
		if r == 0 || r == utf8.RuneError || isOtherC(r) {
			continue
		}
		if t.stripAccents && c&clMark != 0 {
			continue
		}
		lr := r
		if t.lowercase {
			lr = unicode.ToLower(r)
		}
		if c&clPunct != 0 || (r < 0x7F && unicode.IsSymbol(r)) || isCJKIdeograph(r) {
			cut()
			w = appendRune(w, lr)
			ends = append(ends, len(w))
			continue
		}
		w = appendRune(w, lr)
	}
	cut()
	sc.word = w
	return ends
}

// nfdFirst is llama.cpp's unicode_cpts_normalize_nfd: each codepoint is
// replaced by the first codepoint of its canonical decomposition (what is
// left of "Ä" once its combining mark is gone), one for one.
func nfdFirst(r rune) rune {
	if r < 0xC0 || (r >= 0xD800 && r <= 0xDFFF) {
		return r
	}
	var buf [32]byte
	d := norm.NFD.Append(buf[:0], appendRune(nil, r)...)
	f, _ := utf8.DecodeRune(d)
	return f
}

// isOtherC is \p{C} as llama.cpp's flags have it: control, format, private
// use and surrogates, but not unassigned codepoints.
func isOtherC(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// isCJKIdeograph is the set BERT splits into single-character words. It
// keeps llama.cpp's bounds, including its start of Extension E at U+2B920
// (as Hugging Face's Rust code has it) rather than U+2B820.
func isCJKIdeograph(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

// encodeWPM appends the pieces of one text fragment.
func (t *Tokenizer) encodeWPM(sc *scratch, frag string, out []int32) []int32 {
	sc.ends = t.wpmWords(sc, frag, sc.ends)
	start := 0
	for _, end := range sc.ends {
		buf := append(sc.text[:0], wpmPhantom...)
		buf = append(buf, sc.word[start:end]...)
		sc.text = buf
		start = end
		mark := len(out)
		ok := true
		for i := 0; i < len(buf); {
			j := min(len(buf), i+t.maxTokLen+1)
			for ; j > i; j-- {
				if id, hit := t.index[string(buf[i:j])]; hit {
					out = append(out, id)
					break
				}
			}
			if j == i {
				ok = false
				break
			}
			i = j
		}
		if !ok {
			out = out[:mark]
		}
		// llama.cpp pushes its unknown id even when there is none (-1); a
		// vocabulary without one loses the word instead of carrying an id
		// that indexes nothing.
		if len(out) == mark && t.unk >= 0 {
			out = append(out, t.unk)
		}
	}
	return out
}
