//go:build amd64

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// TestKQuantTileSpans checks that kqTiles' passes over long rows (spans of
// kqSpanBlocks blocks, the accumulators kept between them) give the bits
// of one pass over all the blocks, for row counts around kqSpanRows and
// every column count (the columns that fit in one span take one pass
// anyway): the float sums run in the same order.
func TestKQuantTileSpans(t *testing.T) {
	tiled := false
	for _, d := range kqTiled(quant.Q4_K) {
		tiled = tiled || d.mmWide != nil
	}
	if !tiled {
		t.Skip("this CPU has no AVX-512 VNNI: no K-quant tiles to test")
	}
	tabs := []struct {
		typ quant.Type
		f   int
	}{
		{quant.Q4_K, kqmmQ4K},
		{quant.Q5_K, kqmmQ5K},
		{quant.Q6_K, kqmmQ6K},
	}
	for _, tc := range tabs {
		for _, nb := range []int{kqSpanBlocks + 1, 2*kqSpanBlocks + 3, 4 * kqSpanBlocks} {
			for _, rows := range []int{1, kqSpanRows - 1, kqSpanRows + 5, 3 * kqSpanRows} {
				for cols := 1; cols <= kqmmShape[tc.f][1]; cols++ {
					name := fmt.Sprintf("%s/nb=%d/%dx%d", tc.typ, nb, rows, cols)
					r := rand.New(rand.NewPCG(uint64(nb*1000+rows), uint64(cols)))
					n, ws := 256*nb, tc.typ.TypeSize()
					ldw, ldx, ldd := nb*ws, 4*n, rows+1
					w := kqRandWeights(r, tc.typ, rows*nb, "rand")
					src := make([]float32, n)
					x := make([]byte, cols*ldx)
					for c := 0; c < cols; c++ {
						for i := range src {
							src[i] = float32(r.NormFloat64())
						}
						kqTileAct(x[c*ldx:(c+1)*ldx], src)
					}
					got := make([]float32, cols*ldd)
					want := make([]float32, cols*ldd)
					kqTiles(tc.f, ws, kqTileSize, n, w, ldw, x, ldx, got, ldd, rows, cols)
					kqTileRows(tc.f, w, ldw, x, ldx, want, ldd, nb, rows, cols, nil, 0, 3072)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: dst[%d] = %.9g in spans, %.9g in one pass", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
