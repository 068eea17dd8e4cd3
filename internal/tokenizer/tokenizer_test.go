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
	"braid/internal/sharedtest"
)

// vocabDir holds llama.cpp's vocab-only GGUFs and their test pairs; it lives
// outside the repository (see its README.md).
const vocabDir = "../../../shared/testdata/vocab"

// llamaModelsEnv names a second place to look for a vocab missing from
// vocabDir: the models/ folder of a llama.cpp source tree, which ships
// ggml-vocab-NAME.gguf with the same .inp/.out pairs (qwen35's among them).
// Nothing from it is copied into this repository.
const llamaModelsEnv = "BRAID_LLAMACPP_MODELS"

// findVocab returns the path of ggml-vocab-NAME.gguf in vocabDir or else in
// $BRAID_LLAMACPP_MODELS, and every path it tried.
func findVocab(name string) (string, []string) {
	dirs := []string{vocabDir}
	if d := os.Getenv(llamaModelsEnv); d != "" {
		dirs = append(dirs, d)
	}
	var tried []string
	for _, d := range dirs {
		path := filepath.Join(d, "ggml-vocab-"+name+".gguf")
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		tried = append(tried, path)
	}
	return "", tried
}

// skipNoVocab skips a test whose vocab findVocab did not find, naming where
// it looked and how to point it at a llama.cpp checkout; it fails it under
// BRAID_REQUIRE_TESTDATA=1, since the vocabs it is reached for are the
// shared folder's (the optional qwen35 one is checked before).
func skipNoVocab(tb testing.TB, name string, tried []string) {
	tb.Helper()
	hint := ""
	if os.Getenv(llamaModelsEnv) == "" {
		hint = fmt.Sprintf("; set %s to a llama.cpp source tree's models/ folder to use its copy", llamaModelsEnv)
	}
	sharedtest.Missing(tb, "vocab test data ggml-vocab-%s.gguf not available (looked for %s)%s", name, strings.Join(tried, ", "), hint)
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// loadVocab returns the tokenizer of ggml-vocab-NAME.gguf, skipping the test
// when the test data is not there.
func loadVocab(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if tk, ok := loaded[name]; ok {
		return tk
	}
	path, tried := findVocab(name)
	if path == "" {
		skipNoVocab(tb, name, tried)
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
	base, tried := findVocab(name)
	if base == "" {
		skipNoVocab(tb, name, tried)
	}
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		sharedtest.Missing(tb, "vocab test data not available: %v", err)
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
		sharedtest.Missing(tb, "no vocab test data under %s", vocabDir)
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
		summary = append(summary, runGolden(t, name))
	}
	t.Logf("golden: %s", strings.Join(summary, ", "))
}

// runGolden runs the test pairs of one vocab as subtest NAME and returns
// "NAME passed/total".
func runGolden(t *testing.T, name string) string {
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
	return fmt.Sprintf("%s %d/%d", name, pass, len(cases))
}

// TestGoldenQwen35 checks the Qwen3.5 vocabulary (pre-tokenizer qwen35)
// against llama.cpp's models/ggml-vocab-qwen35.gguf.inp/.out, read from
// ../shared/testdata/vocab or $BRAID_LLAMACPP_MODELS; skipped, naming both,
// when neither has it.
func TestGoldenQwen35(t *testing.T) {
	// Optional data, not part of ../shared: a plain skip, whatever the
	// shared-data policy, when neither place has it.
	if path, tried := findVocab("qwen35"); path == "" {
		t.Skipf("qwen35 vocab not available: looked for %s; set %s to the models/ folder of a llama.cpp source tree (it ships ggml-vocab-qwen35.gguf with .inp/.out)",
			strings.Join(tried, ", "), llamaModelsEnv)
	}
	tk := loadVocab(t, "qwen35")
	if got := tk.PreName(); got != "qwen35" {
		t.Fatalf("pre-tokenizer %q, want qwen35", got)
	}
	t.Logf("golden: %s", runGolden(t, "qwen35"))
}

// TestGoldenBertBGE checks WordPiece (tokenizer.ggml.model = bert) against
// llama.cpp's models/ggml-vocab-bert-bge.gguf.inp/.out, which ../shared does
// not carry: read from $BRAID_LLAMACPP_MODELS (a llama.cpp source tree's
// models/ folder), skipped naming it when unset.
func TestGoldenBertBGE(t *testing.T) {
	if path, tried := findVocab("bert-bge"); path == "" {
		t.Skipf("bert-bge vocab not available: looked for %s; set %s to the models/ folder of a llama.cpp source tree (it ships ggml-vocab-bert-bge.gguf with .inp/.out)",
			strings.Join(tried, ", "), llamaModelsEnv)
	}
	tk := loadVocab(t, "bert-bge")
	if got := tk.Model(); got != "wpm" {
		t.Fatalf("model %q, want wpm", got)
	}
	t.Logf("golden: %s", runGolden(t, "bert-bge"))
}
