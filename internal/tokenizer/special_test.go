package tokenizer

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseSpecial(t *testing.T) {
	tk := loadVocab(t, "qwen2")
	start, _ := tk.TokenID("<|im_start|>")
	end, _ := tk.TokenID("<|im_end|>")
	got := tk.Encode("<|im_start|>user\nHi<|im_end|>", false, true)
	mid := tk.Encode("user\nHi", false, false)
	want := append(append([]int32{start}, mid...), end)
	if !eqIDs(got, want) {
		t.Errorf("parseSpecial: got %v, want %v", got, want)
	}
	for _, id := range tk.Encode("<|im_start|>user", false, false) {
		if id == start {
			t.Errorf("control token text became the token without parseSpecial")
		}
	}
	if !tk.IsEOG(end) || !tk.IsEOG(tk.EOS()) || tk.IsEOG(start) {
		t.Errorf("IsEOG: im_end %v eos %v im_start %v", tk.IsEOG(end), tk.IsEOG(tk.EOS()), tk.IsEOG(start))
	}
	if got := tk.DecodeWith(want, DecodeOptions{RenderSpecial: true}); got != "<|im_start|>user\nHi<|im_end|>" {
		t.Errorf("DecodeWith(RenderSpecial) = %q", got)
	}
	if got := tk.Decode(want); got != "user\nHi" {
		t.Errorf("Decode = %q", got)
	}
}

// TestUserDefinedSplit: user-defined tokens are split out of plain text too
// (deepseek-llm stores some accented letters that way).
func TestUserDefinedSplit(t *testing.T) {
	tk := loadVocab(t, "deepseek-llm")
	o, ok := tk.TokenID("ö")
	if !ok || tk.attrs[o]&attrUserDefined == 0 {
		t.Skip("vocab has no user-defined ö")
	}
	ids := tk.Encode("Köln", false, false)
	found := false
	for _, id := range ids {
		found = found || id == o
	}
	if !found {
		t.Errorf("Encode(Köln) = %v, want the user-defined token %d", ids, o)
	}
	if got := tk.Decode(ids); got != "Köln" {
		t.Errorf("Decode = %q", got)
	}
}

// TestPhi3Strip: llama.cpp makes phi-3's special tokens eat the whitespace
// after them, and SentencePiece puts a space before text that follows one.
func TestPhi3Strip(t *testing.T) {
	tk := loadVocab(t, "phi-3")
	id := func(s string) int32 {
		v, ok := tk.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return v
	}
	got := tk.Encode("<|user|>\nHello<|end|>\n<|assistant|>", true, true)
	want := []int32{tk.BOS(), id("<|user|>"), id("▁Hello"), id("<|end|>"), id("<|assistant|>")}
	if !eqIDs(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestAddSpecial(t *testing.T) {
	for _, tc := range []struct {
		vocab    string
		bos, eos bool
	}{
		{"llama-spm", true, false},
		{"llama-bpe", true, false}, // llama.cpp's default for the llama3 pre-tokenizer
		{"deepseek-llm", true, false},
		{"gpt-2", false, false},
		{"qwen2", false, false},
	} {
		tk := loadVocab(t, tc.vocab)
		plain := tk.Encode("Hello", false, false)
		got := tk.Encode("Hello", true, false)
		want := plain
		if tc.bos {
			want = append([]int32{tk.BOS()}, want...)
		}
		if tc.eos {
			want = append(want, tk.EOS())
		}
		if !eqIDs(got, want) || tk.AddBOS() != tc.bos || tk.AddEOS() != tc.eos {
			t.Errorf("%s: Encode(addSpecial) = %v, want %v", tc.vocab, got, want)
		}
	}
	if got := loadVocab(t, "llama-spm").Encode("", true, false); len(got) != 1 {
		t.Errorf("empty text with addSpecial: %v, want just BOS", got)
	}
	if got := loadVocab(t, "llama-spm").Encode("", false, false); len(got) != 0 {
		t.Errorf("empty text: %v", got)
	}
}

func TestEOG(t *testing.T) {
	tk := loadVocab(t, "llama-bpe")
	for _, s := range []string{"<|end_of_text|>", "<|eot_id|>"} {
		if id, ok := tk.TokenID(s); !ok || !tk.IsEOG(id) {
			t.Errorf("%s (%d) is not EOG", s, id)
		}
	}
	if tk.IsEOG(tk.BOS()) || tk.IsEOG(-1) {
		t.Errorf("BOS or -1 is EOG")
	}
	if eot, _ := tk.TokenID("<|eot_id|>"); tk.EOT() != eot {
		t.Errorf("EOT = %d, want %d", tk.EOT(), eot)
	}
}

func TestVocabErrors(t *testing.T) {
	toks := []string{"a", "b", "ab"}
	if _, err := New(&Vocab{Model: "gpt2", Pre: "no-such-pre", Tokens: toks, BOS: -1, EOS: -1}); err == nil || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("unknown pre: err = %v", err)
	}
	if _, err := New(&Vocab{Model: "t5", Tokens: toks, BOS: -1, EOS: -1}); err == nil || !strings.Contains(err.Error(), "t5") {
		t.Errorf("unknown model: err = %v", err)
	}
	if _, err := New(&Vocab{Model: "gpt2", Tokens: []string{"a", "a"}, BOS: -1, EOS: -1}); err == nil {
		t.Errorf("duplicate tokens accepted")
	}
	if _, err := New(&Vocab{Model: "gpt2", Tokens: toks, BOS: -1, EOS: -1, AddBOS: true}); err == nil {
		t.Errorf("add_bos without a BOS accepted")
	}
	tk, err := New(&Vocab{Model: "gpt2", Tokens: toks, Merges: []string{"a b"}, BOS: -1, EOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	if tk.PreName() != "default" {
		t.Errorf("PreName = %q, want default", tk.PreName())
	}
	if got := tk.Encode("ab", false, false); !eqIDs(got, []int32{2}) {
		t.Errorf("Encode(ab) = %v", got)
	}
	// characters without a token are dropped, as llama.cpp drops them
	if got := tk.Encode("abc", false, false); !eqIDs(got, []int32{2}) {
		t.Errorf("Encode(abc) = %v", got)
	}
}

// TestMergeThroughNonToken: a merge whose result is not a token still
// merges (llama.cpp works on strings), and the result is spelled in bytes.
func TestMergeThroughNonToken(t *testing.T) {
	tk, err := New(&Vocab{Model: "gpt2", Pre: "gpt-2", Tokens: []string{"a", "b", "c", "abc"},
		Merges: []string{"a b", "ab c"}, BOS: -1, EOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("abc", false, false); !eqIDs(got, []int32{3}) {
		t.Errorf("Encode(abc) = %v, want [3]", got)
	}
	if got := tk.Encode("ab", false, false); !eqIDs(got, []int32{0, 1}) {
		t.Errorf("Encode(ab) = %v, want [0 1]", got)
	}
}

// TestConcurrentEncode: one Tokenizer serves many requests at once.
func TestConcurrentEncode(t *testing.T) {
	for _, name := range []string{"llama-bpe", "llama-spm"} {
		tk := loadVocab(t, name)
		cases := readGolden(t, name)
		done := make(chan error, 4)
		for g := 0; g < 4; g++ {
			go func() {
				for i := 0; i < 5; i++ {
					for _, c := range cases {
						if got := tk.Encode(c.text, false, false); !eqIDs(got, c.ids) {
							done <- fmt.Errorf("%s: Encode(%q) = %v, want %v", name, c.text, got, c.ids)
							return
						}
					}
				}
				done <- nil
			}()
		}
		for g := 0; g < 4; g++ {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
}
