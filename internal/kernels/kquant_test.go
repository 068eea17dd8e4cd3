package kernels

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"

	"braid/internal/gguf"
	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// kqTypes are the weight types whose dot products kquant*.go implement.
var kqTypes = []quant.Type{quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS}

// kqImpls returns the reference and every assembly candidate this CPU runs.
func kqImpls(t quant.Type) []*dotImpl {
	out := []*dotImpl{generic[t]}
	return append(out, fast[t]...)
}

// kqDequant expands one row of weight type t into float64, written straight
// from the block layouts (not through the dot code), and is itself checked
// against llama.cpp's dequantization in TestKQuantDequantGolden.
func kqDequant(t quant.Type, w []byte, n int) []float64 {
	out := make([]float64, 0, n)
	for i := 0; i < n/256; i++ {
		b := w[i*t.TypeSize() : (i+1)*t.TypeSize()]
		switch t {
		case quant.Q2_K:
			d, dm := float64(kqF16(b[80:])), float64(kqF16(b[82:]))
			for e := 0; e < 256; e++ {
				q := float64((b[16+32*(e/128)+e%32] >> (2 * ((e / 32) % 4))) & 3)
				sc := b[e/16]
				out = append(out, d*float64(sc&15)*q-dm*float64(sc>>4))
			}
		case quant.Q3_K:
			d := float64(kqF16(b[108:]))
			var sc [16]int
			for g := range sc {
				lo := int(b[96+g%8]) >> (4 * (g / 8)) & 15
				sc[g] = lo | int(b[104+g%4])>>(2*(g/4))&3<<4 - 32
			}
			for e := 0; e < 256; e++ {
				l, k, s := e%32, e/128, (e/32)%4
				q := int(b[32+32*k+l]) >> (2 * s) & 3
				if b[l]>>(4*k+s)&1 == 0 {
					q -= 4
				}
				out = append(out, d*float64(sc[e/16]*q))
			}
		case quant.Q4_K, quant.Q5_K:
			d, dm := float64(kqF16(b[0:])), float64(kqF16(b[2:]))
			for e := 0; e < 256; e++ {
				j := e / 32
				sc, m := kqScaleMinK4(j, b[4:16])
				var q int
				if t == quant.Q4_K {
					q = int(b[16+32*(j/2)+e%32]) >> (4 * (j % 2)) & 15
				} else {
					q = int(b[48+32*(j/2)+e%32])>>(4*(j%2))&15 | int(b[16+e%32])>>j&1<<4
				}
				out = append(out, d*float64(int(sc)*q)-dm*float64(m))
			}
		case quant.Q6_K:
			d := float64(kqF16(b[208:]))
			for e := 0; e < 256; e++ {
				h, s, l := e/128, (e/32)%4, e%32
				q := int(b[64*h+32*(s%2)+l])>>(4*(s/2))&15 | int(b[128+32*h+l])>>(2*s)&3<<4 - 32
				out = append(out, d*float64(int(int8(b[192+e/16]))*q))
			}
		case quant.IQ4_XS:
			d := float64(kqF16(b[0:]))
			sh := int(b[2]) | int(b[3])<<8
			for e := 0; e < 256; e++ {
				j, l := e/32, e%32
				ls := int(b[4+j/2])>>(4*(j%2))&15 | sh>>(2*j)&3<<4 - 32
				q := b[8+16*j+l%16] >> (4 * (l / 16)) & 15
				out = append(out, d*float64(ls*int(kqIQ4Values[q])))
			}
		default:
			panic("kqDequant: " + t.String())
		}
	}
	return out
}

func kqDequantQ8K(x []byte, n int) []float64 {
	out := make([]float64, n)
	for e := range out {
		y := x[(e/256)*kqQ8KSize:]
		out[e] = float64(kqF32(y)) * float64(int8(y[kqQ8KQS+e%256]))
	}
	return out
}

// kqMagnitude bounds the size of the partial sums any summation order meets:
// sum |w_e x_e| where w_e is split into its scaled-quant and min parts, since
// the two are summed separately and may cancel. Float error is relative to it.
func kqMagnitude(t quant.Type, w, x []byte, n int) float64 {
	wd := kqDequant(t, w, n)
	xd := kqDequantQ8K(x, n)
	var mag float64
	for e := range wd {
		m := math.Abs(wd[e])
		b := w[(e/256)*t.TypeSize():]
		switch t {
		case quant.Q2_K:
			m += 2 * math.Abs(float64(kqF16(b[82:]))) * 15
		case quant.Q4_K, quant.Q5_K:
			m += 2 * math.Abs(float64(kqF16(b[2:]))) * 63
		}
		mag += m * math.Abs(xd[e])
	}
	return mag
}

func kqDot64(t quant.Type, w, x []byte, n int) float64 {
	wd, xd := kqDequant(t, w, n), kqDequantQ8K(x, n)
	var s float64
	for e := range wd {
		s += wd[e] * xd[e]
	}
	return s
}

// kqRandF16 returns a half in ±[lo, hi) as bytes.
func kqRandF16(r *rand.Rand, lo, hi float64) uint16 {
	v := lo + r.Float64()*(hi-lo)
	if r.IntN(2) == 0 {
		v = -v
	}
	return quant.F32ToF16(float32(v))
}

// kqRandWeights fills nb blocks of type t with random bytes (every bit
// pattern is a valid block) and sane half-precision scales; mode "zero"
// makes all-zero blocks, "extreme" uses the largest finite scales of a
// realistic model (about 2^-1) and the smallest normal halves, "exact" uses
// d = dmin = 1 so that every float operation in any kernel is exact.
func kqRandWeights(r *rand.Rand, t quant.Type, nb int, mode string) []byte {
	ts := t.TypeSize()
	w := make([]byte, nb*ts)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	for i := 0; i < nb; i++ {
		b := w[i*ts : (i+1)*ts]
		var dOff, mOff = -1, -1
		switch t {
		case quant.Q2_K:
			dOff, mOff = 80, 82
		case quant.Q3_K:
			dOff = 108
		case quant.Q4_K, quant.Q5_K:
			dOff, mOff = 0, 2
		case quant.Q6_K:
			dOff = 208
		case quant.IQ4_XS:
			dOff = 0
		}
		put := func(off int, lo, hi float64) {
			if off >= 0 {
				binary.LittleEndian.PutUint16(b[off:], kqRandF16(r, lo, hi))
			}
		}
		switch mode {
		case "zero":
			clear(b)
		case "extreme":
			if r.IntN(2) == 0 {
				put(dOff, 0.25, 0.5)
				put(mOff, 0.25, 0.5)
			} else {
				put(dOff, 6.2e-5, 6.2e-5)
				put(mOff, 6.2e-5, 6.2e-5)
			}
		case "exact":
			if dOff >= 0 {
				binary.LittleEndian.PutUint16(b[dOff:], 0x3c00)
			}
			if mOff >= 0 {
				binary.LittleEndian.PutUint16(b[mOff:], 0x3c00)
			}
		default:
			put(dOff, 1e-4, 2e-3)
			put(mOff, 1e-4, 2e-3)
		}
	}
	return w
}

// kqRandActs returns n activations as Q8_K: "quantized" goes through
// quant.Quantize (values in -127..127, as llama.cpp produces), "raw" writes
// random int8 including -128 with consistent bsums, "exact" is raw with d=1
// and smaller values.
func kqRandActs(r *rand.Rand, n int, mode string) []byte {
	x := make([]byte, n/256*kqQ8KSize)
	if mode == "quantized" {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(r.NormFloat64())
		}
		src[r.IntN(n)] = 40 // an outlier, as real activations have
		if err := quant.Quantize(quant.Q8_K, src, x); err != nil {
			panic(err)
		}
		return x
	}
	for i := 0; i < n/256; i++ {
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		d := float32(0.001 + r.Float64()*0.05)
		if mode == "exact" {
			d = 1
		}
		binary.LittleEndian.PutUint32(y, math.Float32bits(d))
		for g := 0; g < 16; g++ {
			var s int16
			for l := 0; l < 16; l++ {
				v := int8(r.Uint32())
				if mode == "exact" {
					// Small enough that every lane partial sum of any
					// kernel stays below 2^24, so float32 adds are exact.
					v >>= 2
				}
				if r.IntN(8) == 0 {
					v = -128
				}
				y[kqQ8KQS+16*g+l] = byte(v)
				s += int16(v)
			}
			binary.LittleEndian.PutUint16(y[kqQ8KBsums+2*g:], uint16(s))
		}
	}
	return x
}

// kqRand seeds a generator from a test's name, so that each case sees the
// same data however many kernels or cases are added around it.
func kqRand(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(h.Sum64(), 1))
}

type kqCase struct {
	name  string
	n     int
	wmode string
	xmode string
}

func kqCases(short bool) []kqCase {
	var cs []kqCase
	sizes := []int{256, 512, 4096, 14336}
	if short {
		sizes = []int{256, 512, 4096}
	}
	for _, n := range sizes {
		cs = append(cs,
			kqCase{fmt.Sprintf("n%d/rand/quantized", n), n, "rand", "quantized"},
			kqCase{fmt.Sprintf("n%d/rand/raw", n), n, "rand", "raw"})
	}
	cs = append(cs,
		kqCase{"n512/zero/raw", 512, "zero", "raw"},
		kqCase{"n1024/extreme/raw", 1024, "extreme", "raw"},
		kqCase{"n1024/extreme/quantized", 1024, "extreme", "quantized"},
		kqCase{"n2048/exact/exact", 2048, "exact", "exact"},
	)
	return cs
}

// TestKQuantRefVsFloat64 checks each reference against a float64 dot of the
// dequantized operands. The references sum integers exactly per block and
// round only when combining blocks in float32, so the error is a few float32
// ulps of the magnitude of the terms.
func TestKQuantRefVsFloat64(t *testing.T) {
	for _, typ := range kqTypes {
		for _, c := range kqCases(testing.Short()) {
			t.Run(typ.String()+"/"+c.name, func(t *testing.T) {
				r := kqRand(t.Name())
				w := kqRandWeights(r, typ, c.n/256, c.wmode)
				x := kqRandActs(r, c.n, c.xmode)
				got := float64(generic[typ].dot(c.n, w, x))
				want := kqDot64(typ, w, x, c.n)
				tol := 1e-6*kqMagnitude(typ, w, x, c.n) + 1e-30
				if math.Abs(got-want) > tol {
					t.Errorf("got %.9g, float64 dot %.9g (diff %.3g > tol %.3g)", got, want, got-want, tol)
				}
			})
		}
	}
}

// TestKQuantFastVsRef checks every assembly kernel this CPU runs against the
// reference. The kernels compute the same exact per-block integer sums but
// combine them in float32 in another order (vector lanes, fused
// multiply-adds), so the results agree to a few float32 ulps of the terms'
// magnitude; with unit scales every float operation is exact and the results
// must be identical, which pins down the integer arithmetic.
func TestKQuantFastVsRef(t *testing.T) {
	for _, typ := range kqTypes {
		for _, impl := range fast[typ] {
			for _, c := range kqCases(testing.Short()) {
				t.Run(typ.String()+"/"+impl.name+"/"+c.name, func(t *testing.T) {
					r := kqRand(t.Name())
					w := kqRandWeights(r, typ, c.n/256, c.wmode)
					x := kqRandActs(r, c.n, c.xmode)
					want := generic[typ].dot(c.n, w, x)
					got := impl.dot(c.n, w, x)
					if c.wmode == "exact" || c.wmode == "zero" {
						if got != want {
							t.Fatalf("got %.9g, reference %.9g: must be identical", got, want)
						}
						return
					}
					tol := 1e-6*kqMagnitude(typ, w, x, c.n) + 1e-30
					if math.Abs(float64(got)-float64(want)) > tol {
						t.Errorf("got %.9g, reference %.9g (diff %.3g > tol %.3g)", got, want, got-want, tol)
					}
				})
			}
		}
	}
}

// TestKQuantSelected pins which kernel each K-quant type runs on this CPU,
// so that a registration mistake cannot fall back to the slow reference
// without a failing test.
func TestKQuantSelected(t *testing.T) {
	if ForcedGeneric() {
		t.Skip("BRAID_KERNELS=generic")
	}
	x, a := &cpu.X86, &cpu.ARM64
	amd64, arm64 := runtime.GOARCH == "amd64", runtime.GOARCH == "arm64"
	want := "generic"
	switch {
	case amd64 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasFMA && x.HasF16C && x.HasBMI2:
		want = "avx512vnni"
	case amd64 && x.HasAVX2 && x.HasFMA && x.HasF16C && x.HasBMI2:
		want = "avx2"
	case arm64 && a.HasASIMD && a.HasASIMDDP:
		want = "neon-dotprod"
	}
	for _, typ := range kqTypes {
		if got := implFor(typ); got == nil || got.name != want {
			t.Errorf("%s: selected %v, want %q (features %v)", typ, got, want, Features())
		}
	}
}

// TestKQuantFastOffsets runs the assembly on sub-slices at every byte
// offset, so that no kernel assumes aligned operands.
func TestKQuantFastOffsets(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range kqTypes {
		for _, impl := range fast[typ] {
			n := 768
			w0 := kqRandWeights(r, typ, n/256, "exact")
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

const kqTestdata = "../../../shared/testdata/quants"

// kqGGUF returns the tensors of a reference GGUF file by name; it skips the
// test when the shared test data is not there.
func kqGGUF(t *testing.T, path string) map[string][]byte {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		sharedtest.Missing(t, "reference data not available (%v); it lives in ../shared/testdata/quants", err)
	}
	m, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	out := map[string][]byte{}
	for _, tn := range m.Tensors {
		out[tn.Name] = tn.Data
	}
	return out
}

var kqGoldenNames = map[quant.Type]string{
	quant.Q2_K: "q2_K", quant.Q3_K: "q3_K", quant.Q4_K: "q4_K",
	quant.Q5_K: "q5_K", quant.Q6_K: "q6_K", quant.IQ4_XS: "iq4_xs",
}

// TestKQuantDequantGolden pins the test's own dequantizers (the float64
// oracle above) to llama.cpp's to_float output.
func TestKQuantDequantGolden(t *testing.T) {
	q := kqGGUF(t, filepath.Join(kqTestdata, "quants.gguf"))
	f := kqGGUF(t, filepath.Join(kqTestdata, "quants-dequant-f32.gguf"))
	for typ, name := range kqGoldenNames {
		got := kqDequant(typ, q[name], 4*512)
		want := f[name]
		for e := range got {
			wv := float64(math.Float32frombits(binary.LittleEndian.Uint32(want[4*e:])))
			if math.Abs(got[e]-wv) > 1e-6*math.Abs(wv)+1e-12 {
				t.Fatalf("%s: value %d: got %.9g, llama.cpp %.9g", name, e, got[e], wv)
			}
		}
	}
}

// TestKQuantVecDotGolden compares every implementation with llama.cpp's
// vec_dot on quants.gguf. llama.cpp's SIMD kernels sum in yet another
// order, so agreement is to float32 rounding of the terms, not bit-exact.
func TestKQuantVecDotGolden(t *testing.T) {
	q := kqGGUF(t, filepath.Join(kqTestdata, "quants.gguf"))
	jf, err := os.Open(filepath.Join(kqTestdata, "quants-vec_dot.json"))
	if err != nil {
		sharedtest.Missing(t, "reference data not available: %v", err)
	}
	defer jf.Close()
	raw, err := io.ReadAll(jf)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Types map[string]struct {
			VecDotType string    `json:"vec_dot_type"`
			Dot        []float64 `json:"dot"`
		} `json:"types"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	x := q["act_q8_K"]
	// Our Q8_K quantizer must reproduce llama.cpp's activation bytes.
	src := q["act_source"]
	xs := make([]float32, 512)
	for i := range xs {
		xs[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	mine := make([]byte, len(x))
	if err := quant.Quantize(quant.Q8_K, xs, mine); err != nil {
		t.Fatal(err)
	}
	if string(mine) != string(x) {
		t.Errorf("quant.Quantize(Q8_K) differs from llama.cpp's act_q8_K")
	}
	for typ, name := range kqGoldenNames {
		want := ref.Types[name]
		if want.VecDotType != "q8_K" {
			t.Fatalf("%s: vec_dot_type %q", name, want.VecDotType)
		}
		rs := 512 / 256 * typ.TypeSize()
		for _, impl := range kqImpls(typ) {
			for row := 0; row < 4; row++ {
				w := q[name][row*rs : (row+1)*rs]
				got := float64(impl.dot(512, w, x))
				tol := 2e-6 * kqMagnitude(typ, w, x, 512)
				if math.Abs(got-want.Dot[row]) > tol {
					t.Errorf("%s/%s row %d: got %.9g, llama.cpp %.9g (tol %.3g)", name, impl.name, row, got, want.Dot[row], tol)
				}
			}
		}
	}
}

// kqBench times each implementation of typ's dot product on one row of 4096
// values (everything in L1/L2: the kernel's compute speed) and as a
// matrix-vector sweep over 4096x4096 and 14336x4096 weights on one thread
// (mostly memory speed; compare BenchmarkMemRead). SetBytes counts weight
// bytes, so MB/s is weight bandwidth.
func kqBench(b *testing.B, typ quant.Type) {
	for _, impl := range kqImpls(typ) {
		for _, shape := range [][2]int{{1, 4096}, {4096, 4096}, {14336, 4096}} {
			rows, n := shape[0], shape[1]
			if impl.name == "generic" && rows > 1 {
				continue // seconds per iteration, and not what is being tuned
			}
			b.Run(fmt.Sprintf("%s/%dx%d", impl.name, rows, n), func(b *testing.B) {
				r := rand.New(rand.NewPCG(7, 8))
				row := kqRandWeights(r, typ, n/256, "rand")
				rs := len(row)
				// Copies of one row: the content does not change the speed.
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

func BenchmarkDotQ2_K(b *testing.B)   { kqBench(b, quant.Q2_K) }
func BenchmarkDotQ3_K(b *testing.B)   { kqBench(b, quant.Q3_K) }
func BenchmarkDotQ4_K(b *testing.B)   { kqBench(b, quant.Q4_K) }
func BenchmarkDotQ5_K(b *testing.B)   { kqBench(b, quant.Q5_K) }
func BenchmarkDotQ6_K(b *testing.B)   { kqBench(b, quant.Q6_K) }
func BenchmarkDotIQ4_XS(b *testing.B) { kqBench(b, quant.IQ4_XS) }
