package kernels

import (
	"fmt"
	"math"
	"testing"
)

// TestKQuantDotOrderBits: the dot-order kernels (dotImpl.mmDot) give every
// row and column the bits of the row dot they follow, for every column
// count they take and row counts around their loop, on random, raw
// (-128 included), zero, extreme-scale and exactly representable data;
// nothing is written outside the product.
func TestKQuantDotOrderBits(t *testing.T) {
	tested := false
	for _, typ := range kqTypes {
		for _, impl := range fast[typ] {
			if impl.mmDot == nil {
				continue
			}
			tested = true
			for _, c := range kqCases(true) {
				for _, rows := range []int{1, 2, 3, 17, 64} {
					for cols := 1; cols <= impl.mmDotCols; cols++ {
						name := fmt.Sprintf("%s/%s/%s/%dx%d", typ, impl.name, c.name, rows, cols)
						r := kqRand(name)
						nb := c.n / 256
						ldw, ldx, ldd := nb*typ.TypeSize(), nb*kqQ8KSize, rows+2
						w := kqRandWeights(r, typ, rows*nb, c.wmode)
						x := make([]byte, 0, cols*ldx)
						for j := 0; j < cols; j++ {
							x = append(x, kqRandActs(r, c.n, c.xmode)...)
						}
						dst := make([]float32, cols*ldd)
						for i := range dst {
							dst[i] = float32(math.NaN())
						}
						impl.mmDot(c.n, w, ldw, x, ldx, dst, ldd, rows, cols)
						for j := 0; j < cols; j++ {
							for i := 0; i < ldd; i++ {
								got := dst[j*ldd+i]
								if i >= rows {
									if !math.IsNaN(float64(got)) {
										t.Fatalf("%s: wrote dst[%d,%d] outside the product", name, j, i)
									}
									continue
								}
								want := impl.dot(c.n, w[i*ldw:(i+1)*ldw], x[j*ldx:(j+1)*ldx])
								if math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("%s: [%d,%d] = %.9g (%#x), the row dot gives %.9g (%#x)", name, j, i, got, math.Float32bits(got), want, math.Float32bits(want))
								}
							}
						}
					}
				}
			}
		}
	}
	if !tested {
		t.Skip("no dot-order K-quant kernel on this CPU")
	}
}
