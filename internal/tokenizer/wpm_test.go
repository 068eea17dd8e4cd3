package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"braid/internal/gguf"
	"braid/internal/modelgen"
)

// testWPMVocab is a WordPiece vocabulary in the converted form: BERT's
// specials first, then every lowercase letter as a word start ("▁a") and
// as a continuation ("a"), a few longer pieces, punctuation and two CJK
// characters. Every word of lowercase ASCII letters tokenizes.
func testWPMVocab(lower bool) *Vocab {
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	types := []int32{TypeControl, TypeControl, TypeControl, TypeControl, TypeControl}
	add := func(s string) {
		toks = append(toks, s)
		types = append(types, TypeNormal)
	}
	for c := 'a'; c <= 'z'; c++ {
		add("\u2581" + string(c))
		add(string(c))
	}
	for _, s := range []string{"\u2581hello", "\u2581hell", "lo", "\u2581world", "ing", "\u2581!", "\u2581,", "\u2581.", "\u2581'", "\u2581中", "\u2581文", "\u2581A"} {
		add(s)
	}
	return &Vocab{Model: "bert", Tokens: toks, Types: types, BOS: 2, EOS: -1, EOT: -1, EOM: -1, UNK: 1, PAD: 0, SEP: 3,
		Lowercase: lower, StripAccents: lower}
}

func newTestWPM(tb testing.TB, lower bool) *Tokenizer {
	tb.Helper()
	tk, err := New(testWPMVocab(lower))
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

func pieces(tk *Tokenizer, ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tk.TokenText(id))
	}
	return out
}

// TestWPMRules checks the WPM rules of llama.cpp's llm_tokenizer_wpm_session
// one by one, on texts whose pieces follow from those rules by hand.
func TestWPMRules(t *testing.T) {
	tk := newTestWPM(t, true)
	for _, c := range []struct {
		text string
		want []string
	}{
		// Longest piece first from the left: "▁hello", not "▁hell" + "o".
		{"hello", []string{"▁hello"}},
		{"hellolo", []string{"▁hello", "lo"}},
		// Lowercased; accents go (NFD's first codepoint, marks dropped).
		{"HÉLLO Wörld", []string{"▁hello", "▁world"}},
		// Punctuation and CJK ideographs are words of their own; runs of
		// whitespace of any kind separate words and vanish.
		{"hi,\u3000中文!", []string{"▁h", "i", "▁,", "▁中", "▁文", "▁!"}},
		// A word with a position no piece starts at is one [UNK] whole
		// (the "9" here).
		{"ab9c d", []string{"[UNK]", "▁d"}},
		// Control and format characters and NUL are dropped, not split on.
		{"he\x00l\u200blo", []string{"▁hello"}},
		// A symbol below 0x7F is a word of its own (then [UNK] here).
		{"a+b", []string{"▁a", "[UNK]", "▁b"}},
	} {
		if got := pieces(tk, tk.Encode(c.text, false, false)); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	// Without lowercasing, accents stay and "A" is its own piece.
	cased := newTestWPM(t, false)
	for _, c := range []struct {
		text string
		want []string
	}{
		{"A é", []string{"▁A", "[UNK]"}},
		{"Hello", []string{"[UNK]"}},
	} {
		if got := pieces(cased, cased.Encode(c.text, false, false)); !slices.Equal(got, c.want) {
			t.Errorf("cased Encode(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	// add_special: [CLS] first, [SEP] last; parse_special finds [MASK].
	if got := pieces(tk, tk.Encode("hi [MASK]", true, true)); !slices.Equal(got, []string{"[CLS]", "▁h", "i", "[MASK]", "[SEP]"}) {
		t.Errorf("Encode with specials = %q", got)
	}
	// Detokenizing: "▁" is a space, control tokens vanish, and the spaces
	// before punctuation are cleaned as llama.cpp's WPM does.
	if got := tk.Decode(tk.Encode("hello , world !", true, false)); got != " hello, world!" {
		t.Errorf("Decode = %q, want %q", got, " hello, world!")
	}
}

// TestWPMRefusesMissingSpecials: a bert vocabulary needs [CLS] and [SEP].
func TestWPMRefusesMissingSpecials(t *testing.T) {
	v := testWPMVocab(true)
	v.SEP = -1
	if _, err := New(v); err == nil || !strings.Contains(err.Error(), "separator") {
		t.Errorf("no SEP: err = %v, want one naming the separator", err)
	}
	v = testWPMVocab(true)
	v.BOS = 99999
	if _, err := New(v); err == nil || !strings.Contains(err.Error(), "[CLS]") {
		t.Errorf("BOS out of range: err = %v, want one naming [CLS]", err)
	}
}

// FuzzWPM: no input panics WordPiece, every id is in range, add_special
// wraps the plain ids in [CLS] ... [SEP], and text made only of lowercase
// ASCII words (which all tokenize in this vocabulary) decodes back to its
// words, each after one space.
func FuzzWPM(f *testing.F) {
	tk := newTestWPM(f, true)
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add("hello world")
	f.Add("  hellolo \t x ")
	f.Fuzz(func(t *testing.T, s string) {
		plain := tk.Encode(s, false, false)
		for _, id := range plain {
			if id < 0 || int(id) >= tk.VocabSize() {
				t.Fatalf("Encode(%q): id %d out of range", s, id)
			}
		}
		wrapped := tk.Encode(s, true, false)
		if len(wrapped) != len(plain)+2 || wrapped[0] != tk.BOS() || wrapped[len(wrapped)-1] != tk.SEP() || !slices.Equal(wrapped[1:len(wrapped)-1], plain) {
			t.Fatalf("Encode(%q, addSpecial) = %v, want [CLS] %v [SEP]", s, wrapped, plain)
		}
		_ = tk.Encode(s, true, true)
		d := tk.Decode(plain)
		if utf8.ValidString(s) && !utf8.ValidString(d) {
			t.Fatalf("Decode(Encode(%q)) = %q: not UTF-8", s, d)
		}
		if strings.Trim(s, "abcdefghijklmnopqrstuvwxyz ") != "" {
			return
		}
		want := ""
		for _, w := range strings.Fields(s) {
			want += " " + w
		}
		if d != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, d, want)
		}
	})
}

// TestWPMReference compares braid's WordPiece ids with llama.cpp's
// llama-tokenize on the vocabulary of modelgen's encoder variant bert-mean
// (written here as scripts/ref-wpm.sh wrote it), for texts of our own:
// testdata/wpm/ids.json, made by scripts/ref-wpm.sh.
func TestWPMReference(t *testing.T) {
	raw, err := os.ReadFile("testdata/wpm/ids.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Variant string
		Cases   []struct {
			Text           string
			Special, Plain []int32
		}
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("testdata/wpm/ids.json: %v", err)
	}
	cfg, err := modelgen.Variant(ref.Variant, "F32")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := modelgen.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tk, err := FromGGUF(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 20 {
		t.Fatalf("%d reference cases, want the 20 and more scripts/ref-wpm.sh writes", len(ref.Cases))
	}
	for i, c := range ref.Cases {
		if got := tk.Encode(c.Text, true, true); !slices.Equal(got, c.Special) {
			t.Errorf("case %d: Encode(%q, special) = %v, llama.cpp %v", i, c.Text, got, c.Special)
		}
		if got := tk.Encode(c.Text, false, false); !slices.Equal(got, c.Plain) {
			t.Errorf("case %d: Encode(%q) = %v, llama.cpp %v", i, c.Text, got, c.Plain)
		}
	}
}
