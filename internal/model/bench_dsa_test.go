package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"braid/internal/gguf"
	"braid/internal/kernels"
	"braid/internal/kvcache"
	"braid/internal/sharedtest"
)

// BenchmarkDSADecode times a decode step of a glm-dsa model at contexts
// longer than its indexer's top-k: "sparse" attends to the positions the
// indexer selects, "dense" runs the same step (indexer included) with
// attention over every position. The gap grows with the context: the
// indexer's scoring pass stays linear in it, the attention no longer is.
//
// The model is the shared tiny glm-dsa (top-k 8), or the GGUF named by
// BRAID_DSA_MODEL, e.g. `braid genmodel --preset glm5-small` (GLM-5's
// geometry, top-k 2048). BRAID_DSA_DEPTHS lists the contexts (default
// 1024,8192) and BRAID_DSA_THREADS the threads (default 2). The cache is
// filled by a real prefill of the first 512 positions, whose rows (latent
// rows and indexer keys) are then repeated up to the depth: an 8k prefill
// of the real geometry would take minutes, and a step's cost depends on how
// many rows it reads, not on their values.
func BenchmarkDSADecode(b *testing.B) {
	path := os.Getenv("BRAID_DSA_MODEL")
	if path == "" {
		path = filepath.Join(sharedModels, "glm-dsa", "tiny-glm-dsa-F32.gguf")
	}
	f, err := gguf.Open(path)
	if err != nil {
		if os.Getenv("BRAID_DSA_MODEL") != "" {
			b.Fatal(err)
		}
		sharedtest.Missing(b, "%v", err)
	}
	defer f.Close()
	depths, threads := []int{1024, 8192}, 2
	if v := os.Getenv("BRAID_DSA_DEPTHS"); v != "" {
		depths = nil
		for _, s := range strings.Split(v, ",") {
			d, err := strconv.Atoi(s)
			if err != nil || d < 1 {
				b.Fatalf("BRAID_DSA_DEPTHS: %q is not a context length", s)
			}
			depths = append(depths, d)
		}
	}
	if v := os.Getenv("BRAID_DSA_THREADS"); v != "" {
		if threads, err = strconv.Atoi(v); err != nil || threads < 1 {
			b.Fatalf("BRAID_DSA_THREADS: %q is not a thread count", v)
		}
	}
	pool := kernels.NewPool(threads)
	defer pool.Close()
	m, err := New(f, pool, Options{MaxBatch: 512})
	if err != nil {
		b.Fatal(err)
	}
	if m.Cfg.MLA == nil || m.Cfg.MLA.Indexer == nil {
		b.Fatalf("%s is not a DSA model", path)
	}
	for _, depth := range depths {
		cache, err := m.NewCache(CacheSize{Positions: depth + 64})
		if err != nil {
			b.Fatal(err)
		}
		logits := make([]float32, 512*m.Cfg.Vocab)
		if err := fillDSACache(m, cache, depth, logits); err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"sparse", "dense"} {
			b.Run(fmt.Sprintf("ctx%d/%s", depth, mode), func(b *testing.B) {
				m.denseDSA = mode == "dense"
				defer func() { m.denseDSA = false }()
				var bt Batch
				for i := 0; i < b.N; i++ {
					pos := depth + i%32
					if pos == depth && i > 0 {
						if err := cache.Truncate(0, depth); err != nil {
							b.Fatal(err)
						}
					}
					bt.Reset()
					bt.Add(int32(pos%500+3), int32(pos), 0, true)
					if err := m.Forward(cache, &bt, logits); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := cache.Truncate(0, depth); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// fillDSACache gives sequence 0 of cache depth positions: a prefill of the
// first min(depth, 512), then those rows repeated.
func fillDSACache(m *Model, cache *kvcache.Cache, depth int, logits []float32) error {
	fill := min(depth, 512)
	var bt Batch
	for i := 0; i < fill; i++ {
		bt.Add(int32(i*7%500+3), int32(i), 0, false)
	}
	if err := m.Forward(cache, &bt, logits); err != nil {
		return err
	}
	if depth == fill {
		return nil
	}
	if err := cache.Reserve(0, depth); err != nil {
		return err
	}
	for l := 0; l < cache.Config().Layers; l++ {
		for p := fill; p < depth; p++ {
			if cache.Config().F32 {
				dst, _ := cache.RowF32(l, 0, p)
				src, _ := cache.RowF32(l, 0, p%fill)
				copy(dst, src)
			} else {
				dst, _ := cache.RowF16(l, 0, p)
				src, _ := cache.RowF16(l, 0, p%fill)
				copy(dst, src)
			}
		}
	}
	return cache.Commit(0, depth)
}
