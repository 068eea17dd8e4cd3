package kernels

import (
	"encoding/binary"
	"math"
	"testing"

	"braid/internal/quant"
)

// TestX8Q80Extremes: weights and activations at both ends of int8,
// -128 included (which VPMADDUBSW's sign trick gets wrong and Quantize
// never writes), keep the canonical bits in the x8 dots, and the
// canonical dot is the exact sum, rounded.
func TestX8Q80Extremes(t *testing.T) {
	g := x8Generic[quant.Q8_0]
	impls := []*x8Format{g}
	if f := x8Fast[quant.Q8_0]; f != nil {
		impls = append(impls, f)
	}
	const nb = 3
	rb := nb * q80Block
	for _, w := range []int8{-128, -1, 127} {
		for _, a := range []int8{-128, 127} {
			m := make([]byte, 8*rb)
			x := make([]byte, rb)
			for b := 0; b < nb; b++ {
				for r := 0; r < 8; r++ {
					blk := m[r*rb+b*q80Block : r*rb+(b+1)*q80Block]
					// d differs by row so that a row's lane cannot take
					// another's.
					binary.LittleEndian.PutUint16(blk, quant.F32ToF16(float32(r+1)/64))
					for i := 2; i < q80Block; i++ {
						blk[i] = byte(w)
					}
				}
				binary.LittleEndian.PutUint16(x[b*q80Block:], quant.F32ToF16(0.5))
				for i := 2; i < q80Block; i++ {
					x[b*q80Block+i] = byte(a)
				}
			}
			p := make([]byte, len(m))
			packQ80X8(p, m, nb)
			for r := 0; r < 8; r++ {
				want := g.ref(32*nb, m[r*rb:(r+1)*rb], x)
				exact := float64(nb) * 32 * float64(w) * float64(a) * 0.5 * float64(r+1) / 64
				if d := math.Abs(float64(want) - exact); d > 1e-6*math.Abs(exact) {
					t.Fatalf("w %d act %d row %d: canonical %v, exact %v", w, a, r, want, exact)
				}
				for _, f := range impls {
					var out [8]float32
					f.dot8(nb, p, x, &out)
					if math.Float32bits(out[r]) != math.Float32bits(want) {
						t.Fatalf("w %d act %d row %d (%s): %v, canonical %v", w, a, r, f.name, out[r], want)
					}
				}
			}
		}
	}
}
