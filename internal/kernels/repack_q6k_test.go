package kernels

import (
	"encoding/binary"
	"math"
	"testing"

	"braid/internal/quant"
)

// TestX8Q6KExtremes: at the ends of every range (codes 0 and 63, scales
// -128 and 127, activations -128 and 127) the x8 dots keep the canonical
// bits and the canonical dot is the exact integer sum, rounded: the int16
// sums of two chunks (2*2*63*128) are as far as they go without
// saturating, which random rows never reach.
func TestX8Q6KExtremes(t *testing.T) {
	g := x8Generic[quant.Q6_K]
	impls := []*x8Format{g}
	if f := x8Fast[quant.Q6_K]; f != nil {
		impls = append(impls, f)
	}
	const nb = 2
	rb := nb * kqQ6KSize
	for _, code := range []byte{0, 63} {
		for _, sc := range []int8{-128, 127} {
			for _, a := range []int8{-128, 127} {
				m := make([]byte, 8*rb)
				for r := 0; r < 8; r++ {
					for b := 0; b < nb; b++ {
						blk := m[r*rb+b*kqQ6KSize : r*rb+(b+1)*kqQ6KSize]
						for i := 0; i < 128; i++ {
							blk[i] = code&0x0f | code&0x0f<<4
						}
						for i := 128; i < 192; i++ {
							h := code >> 4
							blk[i] = h | h<<2 | h<<4 | h<<6
						}
						for i := 192; i < 208; i++ {
							blk[i] = byte(sc)
						}
						// d differs by row so that a row's lane cannot
						// take another's.
						binary.LittleEndian.PutUint16(blk[208:], quant.F32ToF16(float32(r+1)/64))
					}
				}
				x := make([]byte, nb*kqQ8KSize)
				for b := 0; b < nb; b++ {
					y := x[b*kqQ8KSize:]
					binary.LittleEndian.PutUint32(y, math.Float32bits(0.5))
					for i := 0; i < 256; i++ {
						y[kqQ8KQS+i] = byte(a)
					}
					for i := 0; i < 16; i++ {
						binary.LittleEndian.PutUint16(y[kqQ8KBsums+2*i:], uint16(int16(16*int(a))))
					}
				}
				p := make([]byte, len(m))
				packQ6KX8(p, m, nb)
				isum := 256 * (int64(code) - 32) * int64(a) * int64(sc)
				for r := 0; r < 8; r++ {
					want := g.ref(256*nb, m[r*rb:(r+1)*rb], x)
					exact := float64(nb) * float64(isum) * 0.5 * float64(r+1) / 64
					if d := math.Abs(float64(want) - exact); d > 1e-6*math.Abs(exact) {
						t.Fatalf("code %d scale %d act %d row %d: canonical %v, exact %v", code, sc, a, r, want, exact)
					}
					for _, f := range impls {
						var out [8]float32
						f.dot8(nb, p, x, &out)
						if math.Float32bits(out[r]) != math.Float32bits(want) {
							t.Fatalf("code %d scale %d act %d row %d (%s): %v, canonical %v", code, sc, a, r, f.name, out[r], want)
						}
					}
				}
			}
		}
	}
}
