package kernels

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// refDir holds llama.cpp's reference quantizations and vec_dot results; see
// its README.md.
const refDir = "../../../shared/testdata/quants/"

// myTypes are the weight types whose dot products live in this file's
// package half (the K-quants have their own tests).
var myTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1,
	quant.Q5_0, quant.Q5_1, quant.IQ4_NL, quant.MXFP4}

// lowBitTypes have only generic dots, and blocks longer than 32 values, so
// they stay out of myTypes, whose tests use 32-value multiples throughout.
var lowBitTypes = []quant.Type{quant.Q1_0, quant.Q2_0}

// ggufTensor is one tensor of a reference file.
type ggufTensor struct {
	typ  quant.Type
	data []byte
}

// readGGUF is a minimal GGUF v3 reader, enough for the reference files
// (kernels must not depend on the gguf package).
func readGGUF(b []byte) (map[string]ggufTensor, error) {
	if len(b) < 24 || string(b[:4]) != "GGUF" {
		return nil, fmt.Errorf("not a GGUF file")
	}
	p := 8
	u32 := func() uint32 { v := binary.LittleEndian.Uint32(b[p:]); p += 4; return v }
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(b[p:]); p += 8; return v }
	str := func() string { n := int(u64()); s := string(b[p : p+n]); p += n; return s }
	nt, nkv := u64(), u64()
	fixed := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	align := 32
	var skip func(typ uint32)
	skip = func(typ uint32) {
		switch typ {
		case 8:
			str()
		case 9:
			et, n := u32(), u64()
			for i := uint64(0); i < n; i++ {
				skip(et)
			}
		default:
			p += fixed[typ]
		}
	}
	for i := uint64(0); i < nkv; i++ {
		k, typ := str(), u32()
		if k == "general.alignment" {
			align = int(binary.LittleEndian.Uint32(b[p:]))
		}
		skip(typ)
	}
	type info struct {
		name string
		n    int64
		typ  quant.Type
		off  int
	}
	var infos []info
	for i := uint64(0); i < nt; i++ {
		in := info{name: str(), n: 1}
		for d := u32(); d > 0; d-- {
			in.n *= int64(u64())
		}
		in.typ = quant.Type(u32())
		in.off = int(u64())
		infos = append(infos, in)
	}
	base := (p + align - 1) / align * align
	out := map[string]ggufTensor{}
	for _, in := range infos {
		nb, err := in.typ.RowBytes(in.n)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", in.name, err)
		}
		out[in.name] = ggufTensor{in.typ, b[base+in.off : base+in.off+int(nb)]}
	}
	return out, nil
}

func bytesF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestReferenceDots checks the generic dots against llama.cpp's vec_dot on
// its own quantized rows, and that activation conversion reproduces
// llama.cpp's quantized activation bytes exactly.
func TestReferenceDots(t *testing.T) {
	gb, err := os.ReadFile(refDir + "quants.gguf")
	if err != nil {
		sharedtest.Missing(t, "llama.cpp reference data not available (%v): it lives in the shared checkout next to the repository", err)
	}
	jb, err := os.ReadFile(refDir + "quants-vec_dot.json")
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
	act := bytesF32(tensors["act_source"].data)
	const n = 512
	for _, actName := range []string{"act_q8_0", "act_q8_1"} {
		want := tensors[actName]
		got := make([]byte, len(want.data))
		actQuantizers[want.typ](got, act)
		if string(got) != string(want.data) {
			t.Errorf("%s: activation conversion differs from llama.cpp's bytes", actName)
		}
	}
	for _, typ := range myTypes {
		if typ == quant.F32 {
			continue // not in the reference set
		}
		name := map[quant.Type]string{quant.F16: "f16", quant.BF16: "bf16", quant.Q8_0: "q8_0", quant.Q4_0: "q4_0",
			quant.Q4_1: "q4_1", quant.Q5_0: "q5_0", quant.Q5_1: "q5_1", quant.IQ4_NL: "iq4_nl", quant.MXFP4: "mxfp4"}[typ]
		r, ok := ref.Types[name]
		w, ok2 := tensors[name]
		if !ok || !ok2 {
			t.Errorf("%s: missing from the reference data", name)
			continue
		}
		g := generic[typ]
		if g.act.String() != map[string]string{"f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q8_1": "Q8_1"}[r.VecDotType] {
			t.Errorf("%s: activation type %s, llama.cpp uses %s", name, g.act, r.VecDotType)
		}
		rb, _ := typ.RowBytes(n)
		ab, _ := g.act.RowBytes(n)
		x := make([]byte, ab)
		actQuantizers[g.act](x, act)
		for row := 0; row < 4; row++ {
			got := float64(g.dot(n, w.data[row*int(rb):(row+1)*int(rb)], x))
			want := r.Dot[row]
			// llama.cpp's SIMD sums in another order; a few ulps of the
			// largest partial sums is all that may differ.
			if math.Abs(got-want) > 2e-5*math.Max(1, math.Abs(want)) {
				t.Errorf("%s row %d: generic dot %.9g, llama.cpp %.9g", name, row, got, want)
			}
		}
	}
}

// randRow fills one weight row of n values of type typ with random content:
// random quant bits, and block scales drawn so that products stay finite.
func randRow(rng *rand.Rand, typ quant.Type, n int) []byte {
	rb, _ := typ.RowBytes(int64(n))
	b := make([]byte, rb)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	scale := func(off int) { binary.LittleEndian.PutUint16(b[off:], quant.F32ToF16(float32(rng.NormFloat64()*0.02))) }
	bs, ts := typ.BlockSize(), typ.TypeSize()
	switch typ {
	case quant.F32:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
	case quant.F16:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], quant.F32ToF16(float32(rng.NormFloat64())))
		}
	case quant.BF16:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], quant.F32ToBF16(float32(rng.NormFloat64())))
		}
	case quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q1_0, quant.Q2_0:
		for o := 0; o < n/bs*ts; o += ts {
			scale(o)
		}
	case quant.Q4_1, quant.Q5_1:
		for o := 0; o < n/bs*ts; o += ts {
			scale(o)
			scale(o + 2)
		}
	case quant.MXFP4:
		for o := 0; o < n/bs*ts; o += ts {
			b[o] = byte(118 + rng.IntN(12))
		}
	}
	return b
}

// randAct returns n random activations converted to format act the way
// MatMul converts them (so quantized ones stay in [-127, 127]).
func randAct(rng *rand.Rand, act quant.Type, n int, scale float64) ([]float32, []byte) {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(rng.NormFloat64() * scale)
	}
	if rng.IntN(4) == 0 {
		f[rng.IntN(n)] *= 30 // an outlier, as real activations have
	}
	return f, convAct(act, f)
}

func convAct(act quant.Type, f []float32) []byte {
	if act == quant.F32 {
		b := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	rb, _ := act.RowBytes(int64(len(f)))
	b := make([]byte, rb)
	actQuantizers[act](b, f)
	return b
}

// refDot returns the float64 dot of the dequantized operands, and the
// tolerance a float32 kernel may differ from it by: a few ulps of
// sum |w_i*x_i| (any summation order is within that), plus, for Q8_1
// activations, the rounding of the block sums s = d*sum(q) to f16, which the
// offset formats use in place of the exact sum.
func refDot(t *testing.T, wt, at quant.Type, n int, w, x []byte) (dot, tol float64) {
	t.Helper()
	wf, xf := dequant(t, wt, w, n), dequant(t, at, x, n)
	var abs float64
	for i := range wf {
		dot += float64(wf[i]) * float64(xf[i])
		abs += math.Abs(float64(wf[i]) * float64(xf[i]))
	}
	tol = 1e-5 * abs
	if at == quant.Q8_1 {
		ts := wt.TypeSize()
		for b := 0; b < n/32; b++ {
			tol += math.Abs(float64(f16(w[b*ts+2:]))*float64(f16(x[b*36+2:]))) / 256
		}
	}
	return dot, tol
}

func dequant(t *testing.T, typ quant.Type, b []byte, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := quant.Dequantize(typ, b, out); err != nil {
		t.Fatalf("dequantize %s: %v", typ, err)
	}
	return out
}

// close reports whether a fast kernel's result matches the reference. Exact
// equality is impossible: the SIMD kernels keep several partial sums in
// vector lanes and add them in another order, and fuse multiply-adds, so
// float32 rounding differs. The integer block sums are exact in both; only
// the float combination differs, by at most a few ulps of sum |terms|.
func closeEnough(got, want float32, tol float64) bool {
	if math.IsNaN(float64(want)) || math.IsNaN(float64(got)) {
		return math.IsNaN(float64(want)) && math.IsNaN(float64(got))
	}
	if math.IsInf(float64(want), 0) || math.IsInf(float64(got), 0) {
		return got == want
	}
	return math.Abs(float64(got)-float64(want)) <= tol+1e-30
}

var testSizes = []int{32, 64, 96, 128, 160, 256, 288, 512, 4096 + 32}

// TestFastMatchesGeneric runs every fast candidate this CPU supports (not
// only the chosen one) against the reference.
func TestFastMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := testSizes
	if testing.Short() {
		sizes = []int{32, 64, 96, 288, 1024 + 32}
	}
	for _, typ := range myTypes {
		g := generic[typ]
		for _, f := range fast[typ] {
			t.Logf("%s: testing %s", typ, f.name)
			sz := sizes
			if typ.BlockSize() == 1 {
				// float rows may have any length: exercise the tails
				sz = append([]int{1, 7, 8, 15, 17, 33, 63, 65, 100}, sz...)
			}
			for _, n := range sz {
				for trial := 0; trial < 4; trial++ {
					w := randRow(rng, typ, n)
					_, x := randAct(rng, g.act, n, 1)
					want := g.dot(n, w, x)
					got := f.dot(n, w, x)
					_, tol := refDot(t, typ, g.act, n, w, x)
					if !closeEnough(got, want, tol) {
						t.Errorf("%s %s n=%d: %.9g, generic %.9g (tolerance %.3g)", typ, f.name, n, got, want, tol)
					}
				}
			}
			edgeCases(t, rng, typ, g, f)
		}
	}
}

// edgeCases covers the values where an integer trick could overflow or a
// conversion could go wrong: zeros, the extreme int8 values in weights,
// the extremes of the activation range, and subnormal, huge, infinite and
// NaN scales.
func edgeCases(t *testing.T, rng *rand.Rand, typ quant.Type, g, f *dotImpl) {
	const n = 256
	bs, ts := typ.BlockSize(), typ.TypeSize()
	type cse struct {
		name string
		w    func([]byte)
		x    func([]float32)
	}
	setScales := func(w []byte, h uint16) {
		if bs == 1 {
			return
		}
		for o := 0; o < len(w); o += ts {
			if typ == quant.MXFP4 {
				w[o] = byte(h)
			} else {
				binary.LittleEndian.PutUint16(w[o:], h)
			}
		}
	}
	fill := func(v byte) func([]byte) {
		return func(w []byte) {
			if bs == 1 {
				return // float formats: no integer trick to break
			}
			// quant bytes follow the block's scale fields
			off := map[quant.Type]int{quant.Q4_1: 4, quant.Q5_1: 4, quant.MXFP4: 1}[typ]
			if off == 0 {
				off = 2
			}
			for o := 0; o < len(w); o += ts {
				for i := o + off; i < o+ts; i++ {
					w[i] = v
				}
			}
		}
	}
	cases := []cse{
		{"zero weights", func(w []byte) { clear(w) }, nil},
		{"zero activations", nil, func(x []float32) { clear(x) }},
		{"quants 0x7f", fill(0x7f), nil},
		{"quants 0x80", fill(0x80), nil},
		{"quants 0xff", fill(0xff), nil},
		{"activations at +-127", nil, func(x []float32) {
			for i := range x {
				x[i] = float32(1 - 2*(i&1))
			}
		}},
		{"activations all -max", fill(0x80), func(x []float32) {
			for i := range x {
				x[i] = -1
			}
		}},
		{"subnormal scales", func(w []byte) { setScales(w, 0x0001) }, nil},
		{"huge scales", func(w []byte) { setScales(w, 0x7bff) }, nil},
		{"infinite scales", func(w []byte) { setScales(w, 0x7c00) }, nil},
		{"NaN scales", func(w []byte) { setScales(w, 0x7e00) }, nil},
	}
	if typ == quant.MXFP4 {
		cases = cases[:len(cases)-2]
		cases = append(cases, cse{"max exponent", func(w []byte) { setScales(w, 254) }, nil},
			cse{"min exponent", func(w []byte) { setScales(w, 0) }, nil})
	}
	for _, c := range cases {
		w := randRow(rng, typ, n)
		xf, _ := randAct(rng, g.act, n, 1)
		if c.w != nil {
			c.w(w)
		}
		if c.x != nil {
			c.x(xf)
		}
		x := convAct(g.act, xf)
		want, got := g.dot(n, w, x), f.dot(n, w, x)
		tol := 0.0
		if !math.IsNaN(float64(want)) && !math.IsInf(float64(want), 0) {
			_, tol = refDot(t, typ, g.act, n, w, x)
		}
		if !closeEnough(got, want, tol) {
			t.Errorf("%s %s %s: %.9g, generic %.9g", typ, f.name, c.name, got, want)
		}
	}
}

// TestGenericMatchesFloat64 checks each reference dot against a float64 dot
// of the dequantized operands (independent of the block arithmetic).
func TestGenericMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range append(myTypes[:len(myTypes):len(myTypes)], lowBitTypes...) {
		g := generic[typ]
		for _, n := range []int{32, 96, 128, 384, 1024} {
			if n%typ.BlockSize() != 0 {
				continue
			}
			w := randRow(rng, typ, n)
			_, x := randAct(rng, g.act, n, 1)
			want, tol := refDot(t, typ, g.act, n, w, x)
			got := g.dot(n, w, x)
			if math.Abs(float64(got)-want) > tol {
				t.Errorf("%s n=%d: generic %.9g, float64 %.9g", typ, n, got, want)
			}
		}
	}
}

// TestFastTiles checks the register-blocked prefill tiles against the
// reference dot, on full tiles (the assembly) and ragged ones (the
// fallback), with random and extreme quants.
func TestFastTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range myTypes {
		g := generic[typ]
		for _, f := range fast[typ] {
			if f.mm == nil {
				continue
			}
			for _, n := range []int{64, 96, 128, 4096} {
				for _, extreme := range []bool{false, true} {
					rows, cols := f.mmRows, f.mmCols
					if rng.IntN(3) == 0 {
						rows, cols = 1+rng.IntN(rows), 1+rng.IntN(cols)
					}
					rb, _ := typ.RowBytes(int64(n))
					ab, _ := g.act.RowBytes(int64(n))
					ldw, ldx, ldd := int(rb)+rng.IntN(3)*int(typ.TypeSize()), int(ab), rows+rng.IntN(3)
					w := make([]byte, ldw*rows)
					for r := 0; r < rows; r++ {
						row := randRow(rng, typ, n)
						if extreme {
							for i := range row {
								if rng.IntN(2) == 0 && i%typ.TypeSize() >= 2 {
									row[i] = []byte{0x80, 0x7f, 0xff, 0}[rng.IntN(4)]
								}
							}
						}
						copy(w[r*ldw:], row)
					}
					x := make([]byte, ldx*cols)
					for c := 0; c < cols; c++ {
						xf, _ := randAct(rng, g.act, n, 1)
						if extreme {
							for i := range xf {
								xf[i] = float32(rng.IntN(3) - 1)
							}
						}
						copy(x[c*ldx:], convAct(g.act, xf))
					}
					dst := make([]float32, ldd*cols)
					f.mm(n, w, ldw, x, ldx, dst, ldd, rows, cols)
					for c := 0; c < cols; c++ {
						for r := 0; r < rows; r++ {
							wr, xc := w[r*ldw:r*ldw+int(rb)], x[c*ldx:(c+1)*ldx]
							want := g.dot(n, wr, xc)
							_, tol := refDot(t, typ, g.act, n, wr, xc)
							if got := dst[c*ldd+r]; !closeEnough(got, want, tol) {
								t.Errorf("%s %s tile %dx%d n=%d extreme=%v [%d,%d]: %.9g, generic %.9g", typ, f.name, rows, cols, n, extreme, r, c, got, want)
							}
						}
					}
				}
			}
		}
	}
}
