package kernels

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"braid/internal/quant"
)

// TestRowsKernels: every kernel with a rows form gives each row the bits of
// its row dot, for odd and even block counts, rows packed and ldw bytes
// apart, and writes nothing past the rows it was given.
func TestRowsKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	found := 0
	for _, typ := range append(append([]quant.Type(nil), myTypes...), kqTypes...) {
		for _, impl := range fast[typ] {
			if impl.rows == nil {
				continue
			}
			found++
			for _, cols := range []int{256, 512, 768, 2048, 4096 + 256} {
				for _, pad := range []int{0, 64} {
					const rows = 23
					m := headsRows(rng, typ, rows, cols)
					rb := len(m.Data) / rows
					ldw := rb + pad
					w := make([]byte, rows*ldw)
					for r := 0; r < rows; r++ {
						copy(w[r*ldw:], m.Data[r*rb:(r+1)*rb])
					}
					xf := make([]float32, cols)
					for i := range xf {
						xf[i] = float32(rng.NormFloat64())
					}
					x := convAct(impl.act, xf)
					dst := make([]float32, rows+1)
					dst[rows] = 7.5
					impl.rows(cols, w, ldw, x, dst[:rows])
					for r := 0; r < rows; r++ {
						want := impl.dot(cols, w[r*ldw:r*ldw+rb], x)
						if math.Float32bits(dst[r]) != math.Float32bits(want) {
							t.Fatalf("%s %s %d values, ldw %d: row %d = %g, row dot %g", typ, impl.name, cols, ldw, r, dst[r], want)
						}
					}
					if dst[rows] != 7.5 {
						t.Fatalf("%s %s: wrote past the last row", typ, impl.name)
					}
				}
			}
			// Operands too short for the rows asked are refused, naming
			// the sizes, before the assembly reads them.
			func() {
				defer func() {
					if r, _ := recover().(string); !strings.Contains(r, "rows") {
						t.Fatalf("%s %s: short weights: panic %q, want one naming the rows", typ, impl.name, r)
					}
				}()
				m := headsRows(rng, typ, 2, 256)
				impl.rows(256, m.Data, len(m.Data)/2, convAct(impl.act, make([]float32, 256)), make([]float32, 3))
			}()
		}
	}
	if found == 0 {
		t.Skip("no kernel with a rows form on this CPU")
	}
	t.Logf("%d kernels with a rows form on this CPU", found)
}
