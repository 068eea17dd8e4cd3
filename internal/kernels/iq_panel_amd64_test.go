package kernels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"braid/internal/quant"
)

// BenchmarkIQPanel is a prefill product of the grid formats with panel
// tiles (8192x2048, an FFN gate of a 1B model, by 64 vectors) on one
// thread, beside its two parts: decoding the panels and the four-column
// kernel over them.
func BenchmarkIQPanel(b *testing.B) {
	const rows, cols, n = 8192, 2048, 64
	for _, typ := range []quant.Type{quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S} {
		var impl *dotImpl
		for _, f := range fast[typ] {
			if f.mm != nil {
				impl = f
			}
		}
		if impl == nil {
			b.Skipf("%s: no panel tiles on this CPU", typ)
		}
		rng := rand.New(rand.NewPCG(3, uint64(typ)))
		w := headsRows(rng, typ, rows, cols)
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		dst := make([]float32, n*rows)
		b.Run(fmt.Sprintf("%s/matmul", typ), func(b *testing.B) {
			p := NewPool(1)
			defer p.Close()
			for i := 0; i < b.N; i++ {
				p.matMulWith(impl, dst, &w, x, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*cols/256*n), "ns/block-col")
		})
		nb := cols / 256
		dec := iqPanelDecoders[typ].decode
		size := len(w.Data) / rows / nb
		panel := make([]byte, nb*iqPanelBlock)
		b.Run(fmt.Sprintf("%s/decode", typ), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := i % rows
				if row := iqPanelDecoders[typ].decodeRow; row != nil {
					row(&panel[0], &w.Data[r*nb*size], nb)
					continue
				}
				for j := 0; j < nb; j++ {
					dec(panel[j*iqPanelBlock:], w.Data[(r*nb+j)*size:(r*nb+j+1)*size])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nb), "ns/block")
		})
		xq := make([]byte, 4*nb*kqQ8KSize)
		for c := 0; c < 4; c++ {
			actQuantizers[quant.Q8_K](xq[c*nb*kqQ8KSize:(c+1)*nb*kqQ8KSize], x[c*cols:(c+1)*cols])
		}
		out := make([]float32, 4)
		b.Run(fmt.Sprintf("%s/dot4", typ), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				iqPanelDot4(&panel[0], nb, &xq[0], nb*kqQ8KSize, &out[0], 1, 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(4*nb), "ns/block-col")
		})
	}
}

// TestIQPanelDecode: the assembly panel decoders write the Go decoders'
// bytes, block for block.
func TestIQPanelDecode(t *testing.T) {
	for typ, d := range iqPanelDecoders {
		if d.decodeRow == nil || !iqHasPanel(typ) {
			continue
		}
		rng := rand.New(rand.NewPCG(5, uint64(typ)))
		const nb = 9
		w := iqRandWeights(rng, typ, nb, "rand")
		size := len(w) / nb
		want, got := make([]byte, nb*iqPanelBlock), make([]byte, nb*iqPanelBlock)
		for i := 0; i < nb; i++ {
			d.decode(want[i*iqPanelBlock:], w[i*size:(i+1)*size])
		}
		d.decodeRow(&got[0], &w[0], nb)
		for i := range want {
			// Bytes 356-383 of a block are padding.
			if i%iqPanelBlock < 356 && got[i] != want[i] {
				t.Fatalf("%s: byte %d of block %d: %#x, want %#x", typ, i%iqPanelBlock, i/iqPanelBlock, got[i], want[i])
			}
		}
	}
}

// iqHasPanel says this CPU runs typ's panel tiles.
func iqHasPanel(typ quant.Type) bool {
	for _, f := range fast[typ] {
		if f.mm != nil {
			return true
		}
	}
	return false
}

// TestPromptPathPanels: doctor's prompt path names the panel tiles where
// this CPU has them, and says for every type how a prompt runs.
func TestPromptPathPanels(t *testing.T) {
	for _, c := range Selected() {
		if c.Prompt == "" {
			t.Errorf("%s: no prompt path", c.Type)
		}
		if _, ok := iqPanelDecoders[c.Type]; ok && iqHasPanel(c.Type) && c.Impl == "avx2" {
			if !strings.Contains(c.Prompt, "tiles") || !strings.Contains(c.Prompt, "one-vector bits") {
				t.Errorf("%s (%s): prompt path %q, want its exact panel tiles", c.Type, c.Impl, c.Prompt)
			}
		}
	}
}
