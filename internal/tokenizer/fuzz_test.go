package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"", " ", "\n\n \t", "Hello, y'all! How're you 😁 ?我想在apple工作1314151天～",
	"3333333 3.3 3..3", "'S 'll 'VE", "<|im_start|>x<|im_end|></s>", "\xe2\x96", "\xff\xfe a",
	"😶\u200d🌫️", "  \u3000 x\u00a0\u2029y  ", "ø À ö", "\r\n\r\n  \r ",
}

// FuzzBPE: no input may panic any BPE pre-tokenizer, and valid UTF-8 must
// come back exactly from the ids, streamed or not.
func FuzzBPE(f *testing.F) {
	var tks []*Tokenizer
	for _, name := range []string{"llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "falcon", "starcoder"} {
		tks = append(tks, loadVocab(f, name))
	}
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range tks {
			tk.Encode(s, true, true)
			ids := tk.Encode(s, false, false)
			if !utf8.ValidString(s) || !hasAllBytes(tk, s) {
				tk.Decode(ids)
				continue
			}
			if got := tk.DecodeWith(ids, DecodeOptions{NoCleanSpaces: true}); got != s {
				t.Fatalf("%s: round trip %q -> %v -> %q", tk.PreName(), s, ids, got)
			}
			d := tk.NewDecoder()
			var sb strings.Builder
			for _, id := range ids {
				sb.WriteString(d.Add(id))
			}
			sb.WriteString(d.Flush())
			if sb.String() != s {
				t.Fatalf("%s: streamed %q, want %q", tk.PreName(), sb.String(), s)
			}
		}
	})
}

// hasAllBytes reports whether every byte of s has a token: some
// vocabularies (falcon) lack a few control bytes, and llama.cpp drops them.
func hasAllBytes(tk *Tokenizer, s string) bool {
	for i := 0; i < len(s); i++ {
		if id := tk.byteSym[s[i]]; id < 0 || int(id) >= len(tk.tokens) {
			return false
		}
	}
	return true
}

// FuzzSPM: SentencePiece never panics and gives valid UTF-8 back exactly,
// unless the text itself contains "▁", which decodes to a space.
func FuzzSPM(f *testing.F) {
	tk := loadVocab(f, "llama-spm")
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tk.Encode(s, true, true)
		ids := tk.Encode(s, false, false)
		got := tk.Decode(ids)
		if utf8.ValidString(s) && !strings.Contains(s, "\u2581") && got != s {
			t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
		}
	})
}
