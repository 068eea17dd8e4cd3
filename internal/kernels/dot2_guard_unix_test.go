//go:build unix

package kernels

import (
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// TestDotNoOverread runs every fast dot and prefill tile of this package's
// non-K formats on operands that end at a guard page (kqGuarded): vector
// loads and masked tails must stay inside the last block or value.
func TestDotNoOverread(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	for _, typ := range myTypes {
		g := generic[typ]
		sizes := []int{32, 64, 96}
		if typ.BlockSize() == 1 {
			sizes = []int{1, 7, 17, 33, 100}
		}
		for _, f := range fast[typ] {
			for _, n := range sizes {
				w := kqGuarded(t, randRow(rng, typ, n))
				_, xa := randAct(rng, g.act, n, 1)
				x := kqGuarded(t, xa)
				want, got := g.dot(n, w, x), f.dot(n, w, x)
				_, tol := refDot(t, typ, g.act, n, w, x)
				if !closeEnough(got, want, tol) {
					t.Errorf("%s %s n=%d guarded: %.9g, generic %.9g", typ, f.name, n, got, want)
				}
			}
			checkGuardedTile(t, rng, typ, g, f, sizes[len(sizes)-1])
		}
	}
}

// checkGuardedTile runs f's prefill tile (mm or mmWide) on one full-size
// tile whose last weight row and last activation vector end at guard pages.
func checkGuardedTile(t *testing.T, rng *rand.Rand, typ quant.Type, g, f *dotImpl, n int) {
	mm, conv := f.mm, func(xf []float32) []byte { return convAct(g.act, xf) }
	if f.mmWide != nil {
		mm, conv = f.mmWide, func(xf []float32) []byte {
			b := make([]byte, 4*len(xf))
			f.wideAct(b, xf)
			return b
		}
	}
	if mm == nil {
		return
	}
	rows, cols := min(f.mmRows, 4), min(f.mmCols, 6)
	if typ.BlockSize() > 1 && (n/32)%2 == 1 {
		n += 32 // the quantized tiles' assembly wants an even block count
	}
	rb, _ := typ.RowBytes(int64(n))
	var wb, xb []byte
	var xr [][]byte
	for r := 0; r < rows; r++ {
		wb = append(wb, randRow(rng, typ, n)...)
	}
	for c := 0; c < cols; c++ {
		xf, _ := randAct(rng, g.act, n, 1)
		xb = append(xb, conv(xf)...)
		xr = append(xr, convAct(g.act, xf))
	}
	ldx := len(xb) / cols
	w, x := kqGuarded(t, wb), kqGuarded(t, xb)
	dst := make([]float32, rows*cols)
	mm(n, w, int(rb), x, ldx, dst, rows, rows, cols)
	for c := 0; c < cols; c++ {
		for r := 0; r < rows; r++ {
			wr := w[r*int(rb) : (r+1)*int(rb)]
			want := g.dot(n, wr, xr[c])
			_, tol := refDot(t, typ, g.act, n, wr, xr[c])
			if got := dst[c*rows+r]; !closeEnough(got, want, tol) {
				t.Errorf("%s %s guarded tile n=%d [%d,%d]: %.9g, generic %.9g", typ, f.name, n, r, c, got, want)
			}
		}
	}
}
