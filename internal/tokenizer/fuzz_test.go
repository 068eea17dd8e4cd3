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
	"កាន់តែពិសេសអាចខលចេញ", "e\u0301 \u0301x 1\u0301 .\u0301\n", "'\u0301s a'\u0301 ⃝⃝ !\ufe0f\r\n", "\U0002ebf0\U0002ee5d",
	"\xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf",
}

// prePerFamily names one pre-tokenizer of every splitter chain lookupPre
// builds.
var prePerFamily = []string{
	"default", "llama3", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "falcon",
	"starcoder", "gpt-2", "poro-chat", "viking",
}

// FuzzPreTokenizers: no input may panic a pre-tokenizer, and its words
// cover the text exactly: end offsets strictly increasing up to the last
// codepoint, so every codepoint (every byte, as decodeRune reads them) lies
// in exactly one word, and the words' bytes put back together are the text
// when it is valid UTF-8 (llama.cpp turns an unreadable byte into U+FFFD). The
// word-regex pre-tokenizers (llama3, qwen2, qwen35) must also split as their
// regex does, run by the backtracking reference refSplit.
func FuzzPreTokenizers(f *testing.F) {
	var pts []*preTokenizer
	for _, name := range prePerFamily {
		pt, err := lookupPre(name)
		if err != nil {
			f.Fatal(err)
		}
		pts = append(pts, pt)
	}
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var p preText
		p.reset(s)
		var whole []byte
		for _, r := range p.cps {
			whole = appendRune(whole, r)
		}
		if utf8.ValidString(s) && string(whole) != s {
			t.Fatalf("codepoints of %q re-encode to %q", s, whole)
		}
		sc := &scratch{}
		for _, pt := range pts {
			ends := pt.split(&p, sc)
			var got []byte
			prev := 0
			for _, e := range ends {
				if e <= prev || e > len(p.cps) {
					t.Fatalf("%s: split(%q) ends %v: not increasing within [1, %d]", pt.name, s, ends, len(p.cps))
				}
				for _, r := range p.cps[prev:e] {
					got = appendRune(got, r)
				}
				prev = e
			}
			if prev != len(p.cps) {
				t.Fatalf("%s: split(%q) ends %v stop before %d", pt.name, s, ends, len(p.cps))
			}
			if string(got) != string(whole) {
				t.Fatalf("%s: words of %q put together give %q", pt.name, s, got)
			}
		}
		if len(p.cps) <= 4096 {
			if name, got, want := checkPreRef(s); name != "" {
				t.Fatalf("%s: split(%q) ends %v, the regex gives %v", name, s, got, want)
			}
		}
	})
}

// FuzzBPE: no input may panic any BPE pre-tokenizer, and valid UTF-8 must
// come back exactly from the ids, streamed or not.
func FuzzBPE(f *testing.F) {
	var tks []*Tokenizer
	for _, name := range []string{"llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "falcon", "starcoder"} {
		tks = append(tks, loadVocab(f, name))
	}
	if path, _ := findVocab("qwen35"); path != "" { // optional: see TestGoldenQwen35
		tks = append(tks, loadVocab(f, "qwen35"))
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
