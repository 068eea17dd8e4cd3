package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"braid/internal/gguf"
)

// vocabDir holds llama.cpp's vocab-only GGUFs and their test pairs; it lives
// outside the repository (see its README.md).
const vocabDir = "../../../shared/testdata/vocab"

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// loadVocab returns the tokenizer of ggml-vocab-NAME.gguf, skipping the test
// when the shared test data is not there.
func loadVocab(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if tk, ok := loaded[name]; ok {
		return tk
	}
	path := filepath.Join(vocabDir, "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("vocab test data not available (%v); it lives in ../shared/testdata/vocab next to the repository", err)
	}
	m, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close()
	tk, err := FromGGUF(m)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	loaded[name] = tk
	return tk
}

type goldenCase struct {
	text string
	ids  []int32
}

// readGolden reads NAME.gguf.inp/.out as llama.cpp's test-tokenizer-0 does.
func readGolden(tb testing.TB, name string) []goldenCase {
	tb.Helper()
	base := filepath.Join(vocabDir, "ggml-vocab-"+name+".gguf")
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		tb.Skipf("vocab test data not available: %v", err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		tb.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(string(inp), sep)
	if strings.HasSuffix(string(inp), sep) {
		texts = texts[:len(texts)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		tb.Fatalf("%s: %d inputs but %d outputs", name, len(texts), len(lines))
	}
	cases := make([]goldenCase, len(texts))
	for i, text := range texts {
		cases[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				tb.Fatalf("%s.out line %d: %v", name, i+1, err)
			}
			cases[i].ids = append(cases[i].ids, int32(v))
		}
	}
	return cases
}

func goldenVocabs(tb testing.TB) []string {
	files, _ := filepath.Glob(filepath.Join(vocabDir, "ggml-vocab-*.gguf.inp"))
	if len(files) == 0 {
		tb.Skipf("no vocab test data under %s", vocabDir)
	}
	var names []string
	for _, f := range files {
		b := filepath.Base(f)
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(b, "ggml-vocab-"), ".gguf.inp"))
	}
	return names
}

func eqIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGolden checks every llama.cpp test case of every vocab: plain text,
// no BOS/EOS, no special-token parsing, as the .out files were made.
func TestGolden(t *testing.T) {
	var summary []string
	for _, name := range goldenVocabs(t) {
		tk := loadVocab(t, name)
		cases := readGolden(t, name)
		pass := 0
		t.Run(name, func(t *testing.T) {
			for i, c := range cases {
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					got := tk.Encode(c.text, false, false)
					if !eqIDs(got, c.ids) {
						t.Errorf("Encode(%q)\n got %v\nwant %v", c.text, got, c.ids)
						return
					}
					pass++
				})
			}
		})
		summary = append(summary, fmt.Sprintf("%s %d/%d", name, pass, len(cases)))
	}
	t.Logf("golden: %s", strings.Join(summary, ", "))
}
