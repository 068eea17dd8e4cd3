package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// TestFloatTiles checks the float prefill tiles (mm, and mmWide with its
// activation widening) at every tile size they have (each is its own
// function) and at row lengths with every tail length, against the
// reference dot.
func TestFloatTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	sizes := []int{1, 7, 15, 16, 17, 33, 100, 1024 + 5, 2048 + 1024 + 17}
	if testing.Short() {
		sizes = []int{1, 17, 100}
	}
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		g := generic[typ]
		for _, f := range fast[typ] {
			type tileFn = func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int)
			var tiles []tileFn
			var convs []func(f []float32) []byte
			if f.mm != nil {
				tiles = append(tiles, f.mm)
				convs = append(convs, func(xf []float32) []byte { return convAct(g.act, xf) })
			}
			if f.mmWide != nil {
				tiles = append(tiles, f.mmWide)
				convs = append(convs, func(xf []float32) []byte {
					b := make([]byte, 4*len(xf))
					f.wideAct(b, xf)
					return b
				})
			}
			for i, mm := range tiles {
				for _, n := range sizes {
					for _, rows := range []int{1, 2, 3, 4, 5, 8, 13, 64} {
						for _, cols := range []int{1, 2, 3, 4, 5, 6, 7, 13} {
							if rows <= f.mmRows && cols <= f.mmCols {
								checkTile(t, rng, typ, g, f.name, mm, convs[i], n, rows, cols)
							}
						}
					}
				}
			}
		}
	}
}

// checkTile runs mm on one random rows x cols tile with padded strides,
// activations converted for it by conv, and compares every element with the
// reference dot on the activations converted to the reference's format.
func checkTile(t *testing.T, rng *rand.Rand, typ quant.Type, g *dotImpl, name string,
	mm func(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int),
	conv func([]float32) []byte, n, rows, cols int) {
	t.Helper()
	rb, _ := typ.RowBytes(int64(n))
	ldw := int(rb) + rng.IntN(3)*typ.TypeSize()
	w := make([]byte, ldw*rows) // whole strides, as MatMul's row slices have
	for r := 0; r < rows; r++ {
		copy(w[r*ldw:], randRow(rng, typ, n))
	}
	var xs, xr [][]byte
	for c := 0; c < cols; c++ {
		xf, _ := randAct(rng, g.act, n, 1)
		xs = append(xs, conv(xf))
		xr = append(xr, convAct(g.act, xf))
	}
	ab := len(xs[0])
	ldx, ldd := ab+rng.IntN(2)*4, rows+rng.IntN(3)
	x := make([]byte, ldx*cols)
	for c := range xs {
		copy(x[c*ldx:], xs[c])
	}
	dst := make([]float32, ldd*cols)
	mm(n, w, ldw, x, ldx, dst, ldd, rows, cols)
	for c := 0; c < cols; c++ {
		for r := 0; r < rows; r++ {
			wr := w[r*ldw : r*ldw+int(rb)]
			want := g.dot(n, wr, xr[c])
			_, tol := refDot(t, typ, g.act, n, wr, xr[c])
			if got := dst[c*ldd+r]; !closeEnough(got, want, tol) {
				t.Errorf("%s %s tile %dx%d n=%d [%d,%d]: %.9g, generic %.9g", typ, name, rows, cols, n, r, c, got, want)
			}
		}
	}
}

// TestPrefillMatchesDecode checks that a product over several activation
// vectors (the tiles) gives each vector the result of the one-vector product
// (the dot), up to summation order: both see the same rounded activations.
func TestPrefillMatchesDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	p := NewPool(2)
	defer p.Close()
	for _, typ := range myTypes {
		const rows, cols, n = 9, 96, 7
		w := randMatrix(rng, typ, rows, cols)
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		all := make([]float32, n*rows)
		p.MatMul(all, w, x, n)
		one := make([]float32, rows)
		for v := 0; v < n; v++ {
			p.MatMul(one, w, x[v*cols:(v+1)*cols], 1)
			for r := range one {
				rb, _ := typ.RowBytes(int64(cols))
				xa := convAct(implFor(typ).act, x[v*cols:(v+1)*cols])
				_, tol := refDot(t, typ, implFor(typ).act, cols, w.Data[r*int(rb):(r+1)*int(rb)], xa)
				if !closeEnough(all[v*rows+r], one[r], 2*tol) {
					t.Errorf("%s [%d,%d]: n=%d gives %.9g, n=1 gives %.9g", typ, r, v, n, all[v*rows+r], one[r])
				}
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
	if want[quant.MXFP4] == "avx512vnni" && x.HasAVX512VBMI {
		want[quant.MXFP4] = "avx512vbmi"
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

// TestWideAct checks each fast wideAct against the Go rounding it stands
// for, bit for bit (NaNs only as NaNs), on random, tiny, huge and special
// values and on lengths with every tail.
func TestWideAct(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	specials := []float32{0, float32(math.Copysign(0, -1)), 65504, 65519, 65520, -65520, 1e-8, -6e-8, 3e-8, 2.98e-8,
		6.1e-5, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1 + 1.0/2048, 1 + 3.0/2048, 1e38}
	for _, typ := range []quant.Type{quant.F16, quant.BF16, quant.F32} {
		for _, f := range fast[typ] {
			if f.wideAct == nil {
				continue
			}
			for _, n := range []int{1, 15, 16, 17, 100, 1000} {
				src := make([]float32, n)
				for i := range src {
					switch rng.IntN(4) {
					case 0:
						src[i] = specials[rng.IntN(len(specials))]
					case 1:
						src[i] = math.Float32frombits(rng.Uint32())
					default:
						src[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-8)))
					}
				}
				got, want := make([]byte, 4*n), make([]byte, 4*n)
				f.wideAct(got, src)
				roundTo(typ, want, src)
				for i := 0; i < n; i++ {
					g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
					w := math.Float32frombits(binary.LittleEndian.Uint32(want[4*i:]))
					if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
						t.Fatalf("%s %s: %g rounds to %g, want %g", typ, f.name, src[i], g, w)
					}
				}
			}
		}
	}
}

// roundTo is the pure-Go definition of wideAct for typ.
func roundTo(typ quant.Type, dst []byte, src []float32) {
	for i, v := range src {
		switch typ {
		case quant.F16:
			v = quant.F16ToF32(quant.F32ToF16(v))
		case quant.BF16:
			v = quant.BF16ToF32(quant.F32ToBF16(v))
		}
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

// TestQuantTiles runs the quantized prefill tiles on full tiles (the
// assembly) and on ragged ones and odd block counts (the row-dot fallback).
func TestQuantTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, typ := range []quant.Type{quant.Q5_0, quant.IQ4_NL, quant.MXFP4, quant.Q4_1, quant.Q5_1} {
		g := generic[typ]
		conv := func(xf []float32) []byte { return convAct(g.act, xf) }
		for _, f := range fast[typ] {
			if f.mm == nil {
				continue
			}
			for _, n := range []int{64, 96, 256, 4096 + 64} {
				for _, rc := range [][2]int{{f.mmRows, f.mmCols}, {f.mmRows, f.mmCols}, {1, f.mmCols}, {f.mmRows, 1}, {3, 2}} {
					checkTile(t, rng, typ, g, f.name, f.mm, conv, n, rc[0], rc[1])
				}
			}
		}
	}
}
