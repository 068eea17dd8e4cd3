package server

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"braid/internal/gguf"
	"braid/internal/model"
	"braid/internal/sharedtest"
)

// TestEmbeddingsEveryArchitecture: the embedder runs on every architecture
// braid supports (attention with sinks and windows, MLA, sparse attention,
// MoE, recurrent DeltaNet layers): unit vectors, the same for the same
// input whatever came before, different for different inputs, equal to the
// one-token-at-a-time mean of ForwardHidden.
func TestEmbeddingsEveryArchitecture(t *testing.T) {
	dir := "../../../shared/testdata/models"
	for _, name := range []string{"tiny-llama/tiny-llama-Q8_0.gguf", "tiny-qwen2/tiny-qwen2-F32.gguf", "tiny-qwen3/tiny-qwen3-F32.gguf",
		"tiny-qwen3moe/tiny-qwen3moe-F32.gguf", "gpt-oss/tiny-gpt-oss-F32.gguf", "glm4moe/tiny-glm4moe-F32.gguf",
		"deepseek2/tiny-deepseek2-F32.gguf", "glm-dsa/tiny-glm-dsa-F32.gguf", "qwen35/tiny-qwen35-F32.gguf", "qwen35moe/tiny-qwen35moe-F32.gguf"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, name))
			if err != nil {
				sharedtest.Missing(t, "shared model absent: %v", err)
			}
			defer f.Close()
			e := NewLocalEmbedder(f, 2, 64, 5, true)
			defer e.Close()
			a, b := []int32{1, 5, 9, 13, 17, 21, 25, 29}, []int32{1, 40, 41, 42}
			v1, err := e.Embed(context.Background(), [][]int32{a, b, a})
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range v1 {
				var n float64
				for _, x := range v {
					n += float64(x) * float64(x)
				}
				if len(v) != e.Dim() || math.Abs(n-1) > 1e-4 {
					t.Errorf("vector %d: %d values, norm² %g", i, len(v), n)
				}
			}
			if !closeVec(v1[0], v1[2], 1e-5) || closeVec(v1[0], v1[1], 1e-3) {
				t.Errorf("the same input gave different vectors, or different inputs the same")
			}
			pool := e.pool
			m, err := model.New(f, pool, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if want := oracleEmbedding(t, m, a); !closeVec(v1[0], want, 1e-3) {
				t.Errorf("differs from the one-token-at-a-time mean of ForwardHidden")
			}
		})
	}
}
