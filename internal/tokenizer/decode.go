package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// piece is llama.cpp's token_to_piece with special = true: the bytes a
// token stands for.
func (t *Tokenizer) piece(id int32) string {
	a := t.attrs[id]
	text := t.tokens[id]
	switch {
	case a&(attrUnknown|attrControl|attrUserDefined) != 0:
		return text
	case a&attrNormal != 0:
		if t.spm || t.wpm {
			return strings.ReplaceAll(text, "\u2581", " ")
		}
		return decodeByteText(text)
	case a&attrByte != 0:
		return string([]byte{tokenByte(text)})
	}
	return ""
}

// tokenByte reads the XX of a "<0xXX>" byte token.
func tokenByte(text string) byte {
	if len(text) < 4 {
		return 0
	}
	h := text[3:min(5, len(text))]
	// strtol stops at the first non-hex character
	for i := 0; i < len(h); i++ {
		if _, err := strconv.ParseUint(h[i:i+1], 16, 8); err != nil {
			h = h[:i]
			break
		}
	}
	v, _ := strconv.ParseUint(h, 16, 8)
	return byte(v)
}

// decodeByteText maps GPT-2 byte characters back to bytes. A character
// outside the table is written the way llama.cpp writes it, so it shows.
func decodeByteText(text string) string {
	var b []byte
	for i := 0; i < len(text); {
		r, n := decodeRune(text, i)
		if c, ok := runeBytes[r]; ok {
			b = append(b, c)
		} else {
			b = append(b, "[UNK_BYTE_0x"...)
			for _, c := range appendRune(nil, r) {
				b = append(b, fmt.Sprintf("%02x", c)...)
			}
			b = append(b, text...)
			b = append(b, ']')
		}
		i += n
	}
	return string(b)
}

// Piece returns the text of one token. Control and unknown tokens give ""
// unless special is set.
func (t *Tokenizer) Piece(id int32, special bool) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	if !special && t.attrs[id]&(attrUnknown|attrControl) != 0 {
		return ""
	}
	return t.pieces[id]
}

// DecodeOptions adjusts Decode to llama_detokenize's flags.
type DecodeOptions struct {
	// RemoveSpecial drops a leading BOS and trailing EOS that Encode would
	// have added.
	RemoveSpecial bool
	// RenderSpecial writes the text of control tokens.
	RenderSpecial bool
	// NoCleanSpaces skips llama.cpp's clean-up of spaces before punctuation
	// and contractions, which some BPE vocabularies ask for; without it the
	// output is exactly the concatenated pieces.
	NoCleanSpaces bool
}

// Decode turns ids into text as llama.cpp's llama_detokenize does with
// remove_special and unparse_special off: control tokens vanish, the space
// SentencePiece put before the text is dropped, and BPE vocabularies that
// ask for it get their spaces cleaned.
func (t *Tokenizer) Decode(ids []int32) string {
	return t.DecodeWith(ids, DecodeOptions{})
}

// DecodeWith is Decode with llama_detokenize's options.
func (t *Tokenizer) DecodeWith(ids []int32, o DecodeOptions) string {
	removeSpace := t.addSpace
	if o.RemoveSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if o.RemoveSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	var b []byte
	for _, id := range ids {
		p := t.Piece(id, o.RenderSpecial)
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		// llama.cpp strips only at the first token, even if it was empty.
		removeSpace = false
		b = append(b, p...)
	}
	// WordPiece cleans its spaces too (llama.cpp's clean_spaces is on for
	// WPM).
	if (t.wpm || t.pre != nil && t.pre.clean) && !o.NoCleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b)
}

// cleanSpaces is llama.cpp's clean_spaces pass, in place and byte for byte
// (including how its second pass blanks the space it skips).
func cleanSpaces(text []byte) []byte {
	total := len(text)
	if total == 0 {
		return text
	}
	// " ?", " !", " .", " ,"
	n := total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// " ' "
	n = total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if x == '\'' && i+1 < n && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// " 's", " 'm", " 're", " 've"
	n = total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := text[i+1]
			switch {
			case x1 == 't' || x1 == 'd':
			case x1 == 's' || x1 == 'm':
				total--
			case i+2 < n:
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// Decoder turns a stream of ids into text, one id at a time, and never
// returns half a UTF-8 character: bytes of a character split over several
// tokens (byte tokens, or byte-level BPE pieces) are held until it is
// complete. Pieces are as llama.cpp's token_to_piece gives them, without the
// whole-text clean-ups of Decode, so a continuation renders its leading
// space. A Decoder is not safe for concurrent use.
type Decoder struct {
	t *Tokenizer
	// RenderSpecial writes control tokens' text instead of dropping it.
	RenderSpecial bool
	pending       []byte
}

// NewDecoder returns a Decoder that drops control tokens.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add appends the piece of id and returns the text that is now complete.
func (d *Decoder) Add(id int32) string {
	d.pending = append(d.pending, d.t.Piece(id, d.RenderSpecial)...)
	n := completeUTF8(d.pending)
	if n == 0 {
		return ""
	}
	s := string(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return s
}

// Flush returns whatever is held back (an unfinished character, as raw
// bytes) and resets the Decoder.
func (d *Decoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	return s
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside a character that could still be completed. Bytes that can never
// form a character are not held: they would block the stream forever.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if b[i]&0xC0 != 0x80 {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
