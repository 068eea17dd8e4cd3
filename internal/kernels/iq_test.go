package kernels

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// iqTypes are the grid and ternary formats of iq_*.go.
var iqTypes = []quant.Type{quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S,
	quant.IQ1_S, quant.IQ1_M, quant.TQ1_0, quant.TQ2_0}

// iqScaleOff is the byte offset of a block's f16 scale (-1 for IQ1_M, whose
// scale is spread over the top nibbles of its scale words).
func iqScaleOff(t quant.Type) int {
	switch t {
	case quant.TQ1_0:
		return 52
	case quant.TQ2_0:
		return 64
	case quant.IQ1_M:
		return -1
	}
	return 0
}

// iqPutScale stores the half h as the block scale of b.
func iqPutScale(t quant.Type, b []byte, h uint16) {
	if off := iqScaleOff(t); off >= 0 {
		binary.LittleEndian.PutUint16(b[off:], h)
		return
	}
	for k := 0; k < 4; k++ {
		s := b[48+2*k:]
		w := binary.LittleEndian.Uint16(s)&0x0fff | (h>>(4*k)&15)<<12
		binary.LittleEndian.PutUint16(s, w)
	}
}

// iqRandWeights fills nb blocks of t with random bytes (every bit pattern
// decodes: the grid indices cover their grids exactly, and any TQ byte
// reads as digits) and scales as kqRandWeights does for each mode.
func iqRandWeights(r *rand.Rand, t quant.Type, nb int, mode string) []byte {
	ts := t.TypeSize()
	w := make([]byte, nb*ts)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	for i := 0; i < nb; i++ {
		b := w[i*ts : (i+1)*ts]
		switch mode {
		case "zero":
			clear(b)
		case "extreme":
			if r.IntN(2) == 0 {
				iqPutScale(t, b, kqRandF16(r, 0.25, 0.5))
			} else {
				iqPutScale(t, b, kqRandF16(r, 6.2e-5, 6.2e-5))
			}
		case "exact":
			iqPutScale(t, b, 0x3c00)
		default:
			iqPutScale(t, b, kqRandF16(r, 1e-4, 2e-3))
		}
	}
	return w
}

// iqDot64 is the float64 dot of the dequantized operands (quant.Dequantize
// is llama.cpp's to_float bit for bit) and sum |w_e x_e|, the size of the
// terms any summation order meets. IQ1's grid and delta parts are summed
// separately and may cancel, by at most |g|+|delta| over |g+delta| =
// 9/7 of a term, which the tolerances below absorb.
func iqDot64(t *testing.T, typ quant.Type, w, x []byte, n int) (dot, mag float64) {
	t.Helper()
	wf := make([]float32, n)
	if err := quant.Dequantize(typ, w[:n/256*typ.TypeSize()], wf); err != nil {
		t.Fatal(err)
	}
	xd := kqDequantQ8K(x, n)
	for e, v := range wf {
		p := float64(v) * xd[e]
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}

// TestIQVecDotGolden compares every implementation with llama.cpp's vec_dot
// on quants-iq.gguf, every row of every tensor that takes Q8_K activations
// (a tensor of the reference missing here, or the reverse, fails). The
// activations are our own Q8_K conversion of act_source, which must be
// llama.cpp's act_q8_K bytes. llama.cpp's SIMD kernels sum in another
// order, so agreement is to float32 rounding of the terms.
func TestIQVecDotGolden(t *testing.T) {
	gb, err := os.ReadFile(refIQDir + "quants-iq.gguf")
	if err != nil {
		sharedtest.Missing(t, "llama.cpp reference data not available (%v): it lives in the shared checkout next to the repository", err)
	}
	jb, err := os.ReadFile(refIQDir + "quants-iq-vec_dot.json")
	if err != nil {
		sharedtest.Missing(t, "llama.cpp reference data not available (%v)", err)
	}
	tensors, err := readGGUF(gb)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Types map[string]struct {
			VecDotType string    `json:"vec_dot_type"`
			Dot        []float64 `json:"dot"`
		} `json:"types"`
	}
	if err := json.Unmarshal(jb, &ref); err != nil {
		t.Fatal(err)
	}
	const n = 512
	x := convAct(quant.Q8_K, bytesF32(tensors["act_source"].data))
	if string(x) != string(tensors["act_q8_K"].data) {
		t.Fatal("act_q8_K: activation conversion differs from llama.cpp's bytes")
	}
	seen := map[quant.Type]bool{}
	for name, r := range ref.Types {
		if r.VecDotType != "q8_K" {
			continue // Q1_0, Q2_0: TestReferenceDotsLowBit
		}
		w, ok := tensors[name]
		if !ok {
			t.Errorf("%s: in the vec_dot reference but not in quants-iq.gguf", name)
			continue
		}
		typ, err := quant.ParseType(strings.SplitN(name, ".", 2)[0])
		if err != nil || typ != w.typ {
			t.Errorf("%s: tensor type %s, name says %v (%v)", name, w.typ, typ, err)
			continue
		}
		seen[typ] = true
		g := generic[typ]
		if g == nil || g.act != quant.Q8_K {
			t.Errorf("%s: no generic kernel taking Q8_K", name)
			continue
		}
		rb, _ := typ.RowBytes(n)
		if len(r.Dot) != 5 || len(w.data) != 5*int(rb) {
			t.Fatalf("%s: %d reference dots and %d bytes, want 5 rows of %d", name, len(r.Dot), len(w.data), rb)
		}
		for _, impl := range kqImpls(typ) {
			for row := 0; row < 5; row++ {
				wr := w.data[row*int(rb) : (row+1)*int(rb)]
				got := float64(impl.dot(n, wr, x))
				_, mag := iqDot64(t, typ, wr, x, n)
				if tol := 2e-6 * mag; math.Abs(got-r.Dot[row]) > tol {
					t.Errorf("%s/%s row %d: got %.9g, llama.cpp %.9g (tol %.3g)", name, impl.name, row, got, r.Dot[row], tol)
				}
			}
		}
	}
	for _, typ := range iqTypes {
		if !seen[typ] {
			t.Errorf("%s: no vec_dot reference", typ)
		}
	}
}

// iqCases are kqCases with the lengths of real models' rows and a few odd
// block counts: every kernel must handle any whole number of blocks.
func iqCases(short bool) []kqCase {
	cs := kqCases(short)
	for _, n := range []int{768, 1280, 2816} {
		cs = append(cs, kqCase{fmt.Sprintf("n%d/rand/raw", n), n, "rand", "raw"})
	}
	return cs
}

// TestIQRefVsFloat64 checks each reference against a float64 dot of the
// dequantized operands: only the float combination of exact integer block
// sums (and the rounding of the dequantized weights) differs.
func TestIQRefVsFloat64(t *testing.T) {
	for _, typ := range iqTypes {
		for _, c := range iqCases(testing.Short()) {
			t.Run(typ.String()+"/"+c.name, func(t *testing.T) {
				r := kqRand(t.Name())
				w := iqRandWeights(r, typ, c.n/256, c.wmode)
				x := kqRandActs(r, c.n, c.xmode)
				got := float64(generic[typ].dot(c.n, w, x))
				want, mag := iqDot64(t, typ, w, x, c.n)
				if tol := 2e-6*mag + 1e-30; math.Abs(got-want) > tol {
					t.Errorf("got %.9g, float64 dot %.9g (diff %.3g > tol %.3g)", got, want, got-want, tol)
				}
			})
		}
	}
}

// TestIQFastVsRef checks every assembly kernel this CPU runs against the
// reference, as TestKQuantFastVsRef does for the K-quants: identical
// results with unit scales (every float operation exact), a few float32
// ulps of the terms otherwise.
func TestIQFastVsRef(t *testing.T) {
	for _, typ := range iqTypes {
		for _, impl := range fast[typ] {
			for _, c := range iqCases(testing.Short()) {
				t.Run(typ.String()+"/"+impl.name+"/"+c.name, func(t *testing.T) {
					r := kqRand(t.Name())
					w := iqRandWeights(r, typ, c.n/256, c.wmode)
					x := kqRandActs(r, c.n, c.xmode)
					want := generic[typ].dot(c.n, w, x)
					got := impl.dot(c.n, w, x)
					if c.wmode == "exact" || c.wmode == "zero" {
						if got != want {
							t.Fatalf("got %.9g, reference %.9g: must be identical", got, want)
						}
						return
					}
					_, mag := iqDot64(t, typ, w, x, c.n)
					if tol := 2e-6*mag + 1e-30; math.Abs(float64(got)-float64(want)) > tol {
						t.Errorf("got %.9g, reference %.9g (diff %.3g > tol %.3g)", got, want, got-want, tol)
					}
				})
			}
		}
	}
}

// TestIQFastOffsets runs the assembly on operands at every byte offset.
func TestIQFastOffsets(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range iqTypes {
		for _, impl := range fast[typ] {
			n := 768
			w0 := iqRandWeights(r, typ, n/256, "exact")
			x0 := kqRandActs(r, n, "exact")
			want := generic[typ].dot(n, w0, x0)
			for off := 0; off < 8; off++ {
				w := make([]byte, len(w0)+off)[off:]
				x := make([]byte, len(x0)+off)[off:]
				copy(w, w0)
				copy(x, x0)
				if got := impl.dot(n, w, x); got != want {
					t.Errorf("%s/%s offset %d: got %.9g, want %.9g", typ, impl.name, off, got, want)
				}
			}
		}
	}
}

// TestIQShortOperands: a length that is not whole blocks, or operands
// shorter than n values, are caller bugs and must panic in Go, before any
// assembly reads past a slice.
func TestIQShortOperands(t *testing.T) {
	for _, typ := range iqTypes {
		for _, impl := range kqImpls(typ) {
			w := make([]byte, typ.TypeSize())
			x := make([]byte, kqQ8KSize)
			for _, c := range []struct {
				n    int
				w, x []byte
			}{{256, w[:len(w)-1], x}, {256, w, x[:len(x)-1]}, {128, w, x}, {512, w, x}} {
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("%s/%s n=%d len(w)=%d len(x)=%d: no panic", typ, impl.name, c.n, len(c.w), len(c.x))
						}
					}()
					impl.dot(c.n, c.w, c.x)
				}()
			}
		}
	}
}

// iqBench is kqBench for the grid and ternary formats.
func iqBench(b *testing.B, typ quant.Type) {
	for _, impl := range kqImpls(typ) {
		for _, shape := range [][2]int{{1, 4096}, {4096, 4096}, {14336, 4096}} {
			rows, n := shape[0], shape[1]
			if impl.name == "generic" && rows > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/%dx%d", impl.name, rows, n), func(b *testing.B) {
				r := rand.New(rand.NewPCG(7, 8))
				row := iqRandWeights(r, typ, n/256, "rand")
				rs := len(row)
				w := make([]byte, rows*rs)
				for k := 0; k < rows; k++ {
					copy(w[k*rs:], row)
				}
				x := kqRandActs(r, n, "quantized")
				b.SetBytes(int64(len(w)))
				b.ResetTimer()
				var sink float32
				for i := 0; i < b.N; i++ {
					for k := 0; k < rows; k++ {
						sink += impl.dot(n, w[k*rs:(k+1)*rs], x)
					}
				}
				_ = sink
			})
		}
	}
}

func BenchmarkDotIQ2_XXS(b *testing.B) { iqBench(b, quant.IQ2_XXS) }
func BenchmarkDotIQ2_XS(b *testing.B)  { iqBench(b, quant.IQ2_XS) }
func BenchmarkDotIQ2_S(b *testing.B)   { iqBench(b, quant.IQ2_S) }
func BenchmarkDotIQ3_XXS(b *testing.B) { iqBench(b, quant.IQ3_XXS) }
func BenchmarkDotIQ3_S(b *testing.B)   { iqBench(b, quant.IQ3_S) }
func BenchmarkDotIQ1_S(b *testing.B)   { iqBench(b, quant.IQ1_S) }
func BenchmarkDotIQ1_M(b *testing.B)   { iqBench(b, quant.IQ1_M) }
func BenchmarkDotTQ1_0(b *testing.B)   { iqBench(b, quant.TQ1_0) }
func BenchmarkDotTQ2_0(b *testing.B)   { iqBench(b, quant.TQ2_0) }
