package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRoundTrip decodes the golden ids back. Without llama.cpp's
// clean_spaces pass every golden text comes back exactly; with it (Decode),
// texts differ exactly where the pass changes them (" !" and the like in
// gpt-2, falcon, starcoder and llama-bpe).
func TestRoundTrip(t *testing.T) {
	for _, name := range goldenVocabs(t) {
		tk := loadVocab(t, name)
		cases := readGolden(t, name)
		exact, cleaned := 0, 0
		t.Run(name, func(t *testing.T) {
			for i, c := range cases {
				raw := tk.DecodeWith(c.ids, DecodeOptions{NoCleanSpaces: true})
				if raw != c.text {
					t.Errorf("case %d: DecodeWith(NoCleanSpaces) = %q, want %q", i, raw, c.text)
					continue
				}
				exact++
				want := c.text
				if tk.pre != nil && tk.pre.clean {
					want = string(cleanSpaces([]byte(want)))
				}
				got := tk.Decode(c.ids)
				if got != want {
					t.Errorf("case %d: Decode = %q, want %q", i, got, want)
					continue
				}
				if got == c.text {
					cleaned++
				}
			}
		})
		t.Logf("%s: %d/%d exact without clean_spaces, %d/%d unchanged by Decode", name, exact, len(cases), cleaned, len(cases))
	}
}

func TestDecodeSPMLeadingSpace(t *testing.T) {
	tk := loadVocab(t, "llama-spm")
	ids := tk.Encode("Hello world", true, false)
	if ids[0] != tk.BOS() {
		t.Fatalf("Encode with addSpecial: %v, want BOS %d first", ids, tk.BOS())
	}
	// llama.cpp strips the prefix space only when the text starts the
	// sequence; after a BOS it is kept unless RemoveSpecial drops the BOS.
	if got := tk.Decode(ids); got != " Hello world" {
		t.Errorf("Decode(with BOS) = %q", got)
	}
	if got := tk.DecodeWith(ids, DecodeOptions{RemoveSpecial: true}); got != " Hello world" {
		t.Errorf("DecodeWith(RemoveSpecial) = %q", got)
	}
	if got := tk.Decode(ids[1:]); got != "Hello world" {
		t.Errorf("Decode(without BOS) = %q", got)
	}
	if got := tk.DecodeWith(ids, DecodeOptions{RenderSpecial: true}); got != "<s> Hello world" {
		t.Errorf("DecodeWith(RenderSpecial) = %q", got)
	}
}

// TestDecoderStreaming feeds multi-byte characters split over several tokens
// one id at a time: nothing may come out until a character is whole, and the
// stream must add up to the full decode.
func TestDecoderStreaming(t *testing.T) {
	for _, tc := range []struct{ vocab, text string }{
		{"llama-spm", "🦙 llama and Cửa Việt 😁"},
		{"phi-3", "a 🦙 b"},
		{"llama-bpe", " this is 🦙.cpp 😶‍🌫️ 我想在apple工作"},
		{"qwen2", "កាន់តែពិសេសអាច 🚀"},
		{"gpt-2", "Äpfel und 🦙"},
	} {
		tk := loadVocab(t, tc.vocab)
		ids := tk.Encode(tc.text, false, false)
		d := tk.NewDecoder()
		var sb strings.Builder
		held := 0
		for _, id := range ids {
			s := d.Add(id)
			if !utf8.ValidString(s) {
				t.Errorf("%s: Add(%d) returned invalid UTF-8 %q", tc.vocab, id, s)
			}
			if s == "" && tk.Piece(id, false) != "" {
				held++
			}
			sb.WriteString(s)
		}
		sb.WriteString(d.Flush())
		want := tk.DecodeWith(ids, DecodeOptions{NoCleanSpaces: true})
		if tk.spm {
			want = " " + want // the stream keeps the prefix space
		}
		if sb.String() != want {
			t.Errorf("%s: streamed %q, want %q", tc.vocab, sb.String(), want)
		}
		if held == 0 {
			t.Errorf("%s: no token was held back; the test text should split characters", tc.vocab)
		}
	}
}

func TestDecoderByteTokens(t *testing.T) {
	tk := loadVocab(t, "llama-spm")
	d := tk.NewDecoder()
	llama := "🦙"
	for i := 0; i < len(llama); i++ {
		id := tk.byteTok[llama[i]]
		if id < 0 {
			t.Fatalf("no byte token for %#x", llama[i])
		}
		got := d.Add(id)
		if i < len(llama)-1 && got != "" {
			t.Fatalf("byte %d: got %q before the character was complete", i, got)
		}
		if i == len(llama)-1 && got != llama {
			t.Fatalf("last byte: got %q, want %q", got, llama)
		}
	}
	// A byte that can never start a character is not held back.
	if got := d.Add(tk.byteTok[0xFF]); got != "\xff" {
		t.Errorf("Add(<0xFF>) = %q, want it passed through", got)
	}
	// An unfinished character comes out on Flush.
	d.Add(tk.byteTok[0xE2])
	if got := d.Flush(); got != "\xe2" {
		t.Errorf("Flush = %q", got)
	}
}

func TestCleanSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"Hello , world !": "Hello, world!",
		"a ' b":           "a'b",
		"it 's I 'm":      "it's I'm",
		"we 're they 've": "we're they've",
		"don 't you 'll":  "don 't you 'll",
		"":                "",
		" ?":              "?",
		"x ' ' y":         "x'' y",
	} {
		if got := string(cleanSpaces([]byte(in))); got != want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}
