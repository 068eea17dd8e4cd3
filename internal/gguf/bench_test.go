package gguf

import (
	"os"
	"path/filepath"
	"testing"

	"braid/internal/sharedtest"
)

// BenchmarkParseVocab measures header parsing of a large vocabulary, the
// bulk of the work Open does before any tensor is touched.
func BenchmarkParseVocab(b *testing.B) {
	path := filepath.Join(sharedTestdata, "vocab/ggml-vocab-qwen2.gguf")
	data, err := os.ReadFile(path)
	if err != nil {
		sharedtest.Missing(b, "%s absent: %v", path, err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(path, data); err != nil {
			b.Fatal(err)
		}
	}
}
