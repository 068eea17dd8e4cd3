package kernels

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"braid/internal/quant"
)

func mxfp4Impls() []*x8Format {
	impls := []*x8Format{x8Generic[quant.MXFP4]}
	if f := x8Fast[quant.MXFP4]; f != nil {
		impls = append(impls, f)
	}
	return impls
}

// mxfp4Act is nb Q8_0 blocks of dx 0.5 and every value a.
func mxfp4Act(nb int, a int8) []byte {
	x := make([]byte, nb*q80Block)
	for b := 0; b < nb; b++ {
		binary.LittleEndian.PutUint16(x[b*q80Block:], quant.F32ToF16(0.5))
		for i := 2; i < q80Block; i++ {
			x[b*q80Block+i] = byte(a)
		}
	}
	return x
}

// TestX8MXFP4Extremes: every code at every position, activations at both
// ends of int8 (-128 included, which VPMADDUBSW's sign trick gets wrong
// and Quantize never writes) and exponents from the subnormal scales up
// keep the canonical bits in the x8 dots, and the canonical dot is the
// exact sum, rounded.
func TestX8MXFP4Extremes(t *testing.T) {
	g := x8Generic[quant.MXFP4]
	const nb = 3
	rb := nb * mxfp4Block
	for _, e0 := range []uint8{0, 120, 200} {
		for _, a := range []int8{-128, -127, 1, 127} {
			m := make([]byte, 8*rb)
			var exact [8]float64
			for r := 0; r < 8; r++ {
				for b := 0; b < nb; b++ {
					blk := m[r*rb+b*mxfp4Block : r*rb+(b+1)*mxfp4Block]
					// The exponent differs by row so that a row's lane
					// cannot take another's.
					e := e0 + uint8(r)
					blk[0] = e
					var isum int64
					for j := 0; j < 16; j++ {
						lo, hi := byte(j+r+b)&15, byte(j+3*r+5*b+7)&15
						blk[1+j] = lo | hi<<4
						isum += int64(quant.MXFP4Values[lo]) + int64(quant.MXFP4Values[hi])
					}
					exact[r] += float64(isum) * float64(a) * 0.5 * math.Ldexp(1, int(e)-128)
				}
			}
			x := mxfp4Act(nb, a)
			p := make([]byte, len(m))
			packMXFP4X8(p, m, nb)
			for r := 0; r < 8; r++ {
				want := g.ref(32*nb, m[r*rb:(r+1)*rb], x)
				if d := math.Abs(float64(want) - exact[r]); d > 1e-6*math.Abs(exact[r]) {
					t.Fatalf("exponent %d act %d row %d: canonical %v, exact %v", e0+uint8(r), a, r, want, exact[r])
				}
				for _, f := range mxfp4Impls() {
					var out [8]float32
					f.dot8(nb, p, x, &out)
					if math.Float32bits(out[r]) != math.Float32bits(want) {
						t.Fatalf("exponent %d act %d row %d (%s): %v, canonical %v", e0+uint8(r), a, r, f.name, out[r], want)
					}
				}
			}
		}
	}
}

// TestX8MXFP4Exponents: the x8 dots turn every one of the 256 exponents
// into the scale the canonical dot takes (one block a row, non-negative
// codes and activations, so that the largest exponents give +Inf and
// never NaN).
func TestX8MXFP4Exponents(t *testing.T) {
	g := x8Generic[quant.MXFP4]
	x := mxfp4Act(1, 3)
	for e0 := 0; e0 < 256; e0 += 8 {
		m := make([]byte, 8*mxfp4Block)
		for r := 0; r < 8; r++ {
			blk := m[r*mxfp4Block : (r+1)*mxfp4Block]
			blk[0] = uint8(e0 + r)
			for j := 0; j < 16; j++ {
				blk[1+j] = byte(j+r)&7 | byte(j+2*r+1)&7<<4
			}
		}
		p := make([]byte, len(m))
		packMXFP4X8(p, m, 1)
		for _, f := range mxfp4Impls() {
			var out [8]float32
			f.dot8(1, p, x, &out)
			for r := 0; r < 8; r++ {
				want := g.ref(32, m[r*mxfp4Block:(r+1)*mxfp4Block], x)
				if want == 0 {
					t.Fatalf("exponent %d: canonical 0 from non-zero codes", e0+r)
				}
				if math.Float32bits(out[r]) != math.Float32bits(want) {
					t.Fatalf("exponent %d (%s): %v, canonical %v", e0+r, f.name, out[r], want)
				}
			}
		}
	}
}

// TestX8MXFP4PlainBits: where the plain row dot is the AVX2 one, the
// canonical MXFP4 dot (and so a repacked matrix) gives its bits.
func TestX8MXFP4PlainBits(t *testing.T) {
	impl := implFor(quant.MXFP4)
	if impl.name != "avx2" {
		t.Skipf("the row dot here is %s", impl.name)
	}
	rng := rand.New(rand.NewSource(8))
	for _, cols := range []int{32, 256, 2880, 4096} {
		m := randomMatrix(t, quant.MXFP4, 8, cols, rng)
		rb := m.rowBytes()
		for trial := 0; trial < 5; trial++ {
			_, x := randomAct(t, quant.Q8_0, cols, rng)
			for r := 0; r < 8; r++ {
				w := m.Data[r*rb : (r+1)*rb]
				if a, b := dotMXFP4Canon(cols, w, x), impl.dot(cols, w, x); math.Float32bits(a) != math.Float32bits(b) {
					t.Fatalf("cols %d row %d: canonical %v, AVX2 row dot %v", cols, r, a, b)
				}
			}
		}
	}
}
