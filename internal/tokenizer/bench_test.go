package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"braid/internal/sharedtest"
)

// mixedText returns about n tokens' worth of mixed text for tk: prose, code,
// numbers, whitespace runs and the multilingual golden inputs.
func mixedText(tb testing.TB, tk *Tokenizer, n int) string {
	inp, err := os.ReadFile(filepath.Join(vocabDir, "ggml-vocab-llama-bpe.gguf.inp"))
	if err != nil {
		sharedtest.Missing(tb, "vocab test data not available: %v", err)
	}
	chunk := strings.ReplaceAll(string(inp), "__ggml_vocab_test__", "") +
		"The quick brown fox jumps over the lazy dog. It's 3:14 pm on 2024-03-14, and pi is 3.14159265358979.\n" +
		"func (t *Tokenizer) Encode(text string) []int32 {\n\tfor i := 0; i < len(text); i++ {\n\t\tif text[i] == ' ' { continue }\n\t}\n\treturn nil\n}\n" +
		"    indented    text   with     runs of    spaces\n\n\n" +
		"Съешь же ещё этих мягких французских булок, да выпей чаю. 我能吞下玻璃而不伤身体。 ¿Dónde está el baño? Ελληνικά!\n"
	per := len(tk.Encode(chunk, false, false))
	var sb strings.Builder
	for i := 0; i < n/per+1; i++ {
		sb.WriteString(chunk)
	}
	return sb.String()
}

// BenchmarkEncode32k encodes about 32k tokens of mixed text in one call, the
// size of a long prompt.
func BenchmarkEncode32k(b *testing.B) {
	for _, name := range []string{"llama-bpe", "qwen2", "deepseek-llm", "gpt-2", "llama-spm", "phi-3"} {
		b.Run(name, func(b *testing.B) {
			tk := loadVocab(b, name)
			text := mixedText(b, tk, 32000)
			ntok := len(tk.Encode(text, false, false))
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tk.Encode(text, true, true)
			}
			b.ReportMetric(float64(ntok), "tokens/op")
		})
	}
}

func BenchmarkDecode32k(b *testing.B) {
	tk := loadVocab(b, "llama-bpe")
	ids := tk.Encode(mixedText(b, tk, 32000), false, false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tk.Decode(ids)
	}
	b.ReportMetric(float64(len(ids)), "tokens/op")
}
