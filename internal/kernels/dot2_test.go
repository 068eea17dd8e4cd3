package kernels

import (
	"math/rand/v2"
	"testing"

	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// TestFloatTiles checks the float prefill tiles at every tile size they
// have (each is its own function) and at row lengths with every tail
// length, against the reference dot.
func TestFloatTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	sizes := []int{1, 7, 15, 16, 17, 33, 100, 1024 + 5}
	if testing.Short() {
		sizes = []int{1, 17, 100}
	}
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		g := generic[typ]
		for _, f := range fast[typ] {
			if f.mm == nil {
				continue
			}
			for _, n := range sizes {
				for rows := 1; rows <= f.mmRows; rows++ {
					for cols := 1; cols <= f.mmCols; cols++ {
						checkTile(t, rng, typ, g, f, n, rows, cols)
					}
				}
			}
		}
	}
}

// checkTile runs f.mm on one random rows x cols tile with padded strides
// and compares every element with the reference dot.
func checkTile(t *testing.T, rng *rand.Rand, typ quant.Type, g, f *dotImpl, n, rows, cols int) {
	t.Helper()
	rb, _ := typ.RowBytes(int64(n))
	ab := len(convAct(g.act, make([]float32, n)))
	ldw, ldx, ldd := int(rb)+rng.IntN(3)*typ.TypeSize(), ab+rng.IntN(2)*4, rows+rng.IntN(3)
	w := make([]byte, ldw*(rows-1)+int(rb))
	for r := 0; r < rows; r++ {
		copy(w[r*ldw:], randRow(rng, typ, n))
	}
	x := make([]byte, ldx*(cols-1)+ab)
	for c := 0; c < cols; c++ {
		_, xa := randAct(rng, g.act, n, 1)
		copy(x[c*ldx:], xa)
	}
	dst := make([]float32, ldd*cols)
	f.mm(n, w, ldw, x, ldx, dst, ldd, rows, cols)
	for c := 0; c < cols; c++ {
		for r := 0; r < rows; r++ {
			wr, xc := w[r*ldw:r*ldw+int(rb)], x[c*ldx:c*ldx+ab]
			want := g.dot(n, wr, xc)
			_, tol := refDot(t, typ, g.act, n, wr, xc)
			if got := dst[c*ldd+r]; !closeEnough(got, want, tol) {
				t.Errorf("%s %s tile %dx%d n=%d [%d,%d]: %.9g, generic %.9g", typ, f.name, rows, cols, n, r, c, got, want)
			}
		}
	}
}

// TestSelectionMore extends TestSelection to the formats of dot2_*.s: on a
// CPU with the features, their assembly must be what runs.
func TestSelectionMore(t *testing.T) {
	if ForcedGeneric() {
		t.Skip("BRAID_KERNELS=generic")
	}
	sel := map[quant.Type]string{}
	for _, c := range Selected() {
		sel[c.Type] = c.Impl
	}
	want := map[quant.Type]string{}
	q := []quant.Type{quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_NL, quant.MXFP4}
	set := func(impl string) {
		for _, typ := range q {
			want[typ] = impl
		}
	}
	x, a := &cpu.X86, &cpu.ARM64
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasF16C && x.HasFMA:
		set("avx512vnni")
	case x.HasAVX2 && x.HasFMA && x.HasF16C:
		set("avx2")
	case a.HasASIMDDP:
		set("neon-dotprod")
	}
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512BF16:
		want[quant.BF16] = "avx512bf16"
	case x.HasAVX512F && x.HasAVX512BW:
		want[quant.BF16] = "avx512"
	case x.HasAVX2 && x.HasFMA:
		want[quant.BF16] = "avx2"
	case a.HasASIMD:
		want[quant.BF16] = "neon"
	}
	for typ, impl := range want {
		if sel[typ] != impl {
			t.Errorf("%s: selected %q, want %q (features %v)", typ, sel[typ], impl, Features())
		}
	}
}
