package tokenizer

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestPreTokenizerOracle compares every pre-tokenizer with splits made by
// Python's regex module running llama.cpp's patterns the way llama.cpp runs
// them (one regex after the other, gaps kept, \s as llama.cpp's whitespace
// set, non-ASCII whitespace as \v for the patterns std::wregex sees), on
// random strings of letters, digits, marks, CJK, emoji, controls and odd
// whitespace. The vocab goldens cover only four of these pre-tokenizers.
func TestPreTokenizerOracle(t *testing.T) {
	b, err := os.ReadFile("testdata/pretok_oracle.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string][]struct {
		Text  string
		Words []string
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for name, cs := range cases {
		pt, err := lookupPre(name)
		if err != nil {
			t.Fatal(err)
		}
		var p preText
		sc := &scratch{}
		for _, c := range cs {
			p.reset(c.Text)
			var words []string
			prev := 0
			for _, e := range pt.split(&p, sc) {
				words = append(words, string(p.cps[prev:e]))
				prev = e
			}
			if len(words) == 0 && len(c.Words) == 0 {
				continue
			}
			if !reflect.DeepEqual(words, c.Words) {
				t.Errorf("%s: split(%q) = %q, want %q", name, c.Text, words, c.Words)
			}
		}
	}
}

// TestClassCJKExtI: CJK Extension I (U+2EBF0..U+2EE5D, Unicode 15.1) is
// letters, as in llama.cpp's tables, though Go's unicode package (15.0) does
// not know it; its neighbours are unassigned in both.
func TestClassCJKExtI(t *testing.T) {
	for _, c := range []struct {
		r    rune
		want uint8
	}{{0x2EBEF, 0}, {0x2EBF0, clLetter}, {0x2ED00, clLetter}, {0x2EE5D, clLetter}, {0x2EE5E, 0}} {
		if got := classOf(c.r); got != c.want {
			t.Errorf("classOf(%U) = %d, want %d", c.r, got, c.want)
		}
	}
	for _, name := range []string{"qwen2", "qwen35", "llama3"} {
		pt, _ := lookupPre(name)
		var p preText
		p.reset("x\U0002EBF0\U0002EE5D!")
		if ends := pt.split(&p, &scratch{}); !reflect.DeepEqual(ends, []int{3, 4}) {
			t.Errorf("%s: ends %v, want [3 4]", name, ends)
		}
	}
}
