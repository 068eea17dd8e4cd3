package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Character classes as llama.cpp's pre-tokenizers see them. The regexes only
// ever ask about letters, numbers, whitespace, punctuation and marks, so one
// byte of bits per codepoint is enough.
const (
	clLetter = 1 << iota
	clNumber
	clSpace
	clPunct
	clMark // \p{M}: Mn, Mc, Me (qwen35 keeps combining marks with letters)
)

var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		asciiClass[c] = classOfSlow(rune(c))
	}
}

func classOfSlow(r rune) uint8 {
	var c uint8
	// unicode.IsSpace is exactly the Unicode White_Space property (plus NEL
	// and NBSP, which are in it anyway), the same set llama.cpp's tables use.
	if unicode.IsSpace(r) {
		c |= clSpace
	}
	if unicode.IsLetter(r) {
		c |= clLetter
	}
	if unicode.IsNumber(r) {
		c |= clNumber
	}
	if unicode.IsPunct(r) {
		c |= clPunct
	}
	if unicode.IsMark(r) {
		c |= clMark
	}
	return c
}

func classOf(r rune) uint8 {
	if r >= 0 && r < 128 {
		return asciiClass[r]
	}
	if r > unicode.MaxRune {
		return 0
	}
	if r >= 0x2EBF0 && r <= 0x2EE5D {
		// CJK Unified Ideographs Extension I (Lo), new in Unicode 15.1:
		// Go's tables are Unicode 15.0 and lack it, llama.cpp's have it. It
		// is the only codepoint range where the two disagree on these
		// classes (compared over every codepoint at llama.cpp de3ff81).
		return clLetter
	}
	return classOfSlow(r)
}

// decodeRune reads one codepoint the way llama.cpp's unicode_cpt_from_utf8
// does, which is laxer than Go's decoder: it accepts overlong forms and
// surrogates, and replaces each byte it cannot read with U+FFFD. Matching it
// keeps fragment boundaries and re-encoded bytes identical to llama.cpp's.
func decodeRune(s string, i int) (rune, int) {
	b0 := s[i]
	if b0 < 0x80 {
		return rune(b0), 1
	}
	n := len(s) - i
	cont := func(k int) bool { return s[i+k]&0xC0 == 0x80 }
	switch {
	case b0&0x40 == 0:
	case b0&0x20 == 0:
		if n >= 2 && cont(1) {
			return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
		}
	case b0&0x10 == 0:
		if n >= 3 && cont(1) && cont(2) {
			return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
		}
	case b0&0x08 == 0:
		if n >= 4 && cont(1) && cont(2) && cont(3) {
			return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
		}
	}
	return utf8.RuneError, 1
}

// appendRune is llama.cpp's unicode_cpt_to_utf8: unlike utf8.AppendRune it
// writes surrogates as they are, so lax-decoded text re-encodes to the same
// bytes.
func appendRune(b []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(b, byte(r))
	case r < 0x800:
		return append(b, 0xC0|byte(r>>6), 0x80|byte(r)&0x3F)
	case r < 0x10000:
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	default:
		return append(b, 0xF0|byte(r>>18)&0x07, 0x80|byte(r>>12)&0x3F, 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by a
// lead byte, with stray continuation bytes counted as one.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// byteRunes is GPT-2's byte-to-unicode table: printable Latin-1 bytes stand
// for themselves and the rest are moved up to U+0100 and beyond, so every
// byte becomes a visible character that a vocab file can store.
var (
	byteRunes [256]rune
	runeBytes = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRunes[b] = rune(b)
		} else {
			byteRunes[b] = rune(256 + n)
			n++
		}
		runeBytes[byteRunes[b]] = byte(b)
	}
}
