//go:build amd64

package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// actCase is one activation format with its Go oracle and its assembly
// converter (through the wrapper act_amd64.go registers).
type actCase struct {
	t      quant.Type
	oracle func(dst []byte, src []float32)
	fast   func(dst []byte, src []float32)
	bs     int // values per block
}

func actCases(t *testing.T) []actCase {
	x := &cpu.X86
	if !x.HasAVX2 || !x.HasF16C {
		t.Skip("no AVX2 and F16C on this CPU: the assembly conversions are not used")
	}
	return []actCase{
		{quant.Q8_0, quantAct(quant.Q8_0), blockAct(quant.Q8_0, actQ8_0AVX2), 32},
		{quant.Q8_1, quantAct(quant.Q8_1), blockAct(quant.Q8_1, actQ8_1AVX2), 32},
		{quant.Q8_K, quantAct(quant.Q8_K), blockAct(quant.Q8_K, actQ8_KAVX2), 256},
		{quant.F16, toF16, elemAct(quant.F16, actF16AVX2, toF16), 1},
		{quant.BF16, toBF16, elemAct(quant.BF16, actBF16AVX2, toBF16), 1},
	}
}

// checkAct converts src with both and reports the first differing byte
// with the values of its block.
func checkAct(t *testing.T, c actCase, src []float32, what string) bool {
	t.Helper()
	rb, err := c.t.RowBytes(int64(len(src)))
	if err != nil {
		t.Fatalf("%s: %v", c.t, err)
	}
	want := make([]byte, rb)
	got := make([]byte, rb)
	for i := range got {
		got[i] = 0xa5 // a byte the conversion must overwrite
	}
	c.oracle(want, src)
	c.fast(got, src)
	if bytes.Equal(got, want) {
		return true
	}
	ts := int(rb) / max(1, len(src)/c.bs)
	for i := range got {
		if got[i] != want[i] {
			b := i / ts
			blk := src[b*c.bs : (b+1)*c.bs]
			bits := make([]string, len(blk))
			for j, v := range blk {
				bits[j] = fmt.Sprintf("%#08x", math.Float32bits(v))
			}
			t.Errorf("%s %s, %d values: byte %d (block %d, offset %d) is %#02x, Go gives %#02x; block bits %v",
				c.t, what, len(src), i, b, i%ts, got[i], want[i], bits)
			return false
		}
	}
	return false
}

// Bit patterns that stress the conversions: NaNs (quiet, signalling,
// either sign, payloads high and low), infinities, the largest and
// smallest normals and denormals, zeros of both signs.
var actSpecial = []uint32{
	0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0xffffffff,
	0x7fc00001, 0x7fffe000, 0x7f801fff, 0xffa5a5a5, 0x7f800000, 0xff800000,
	0x7f7fffff, 0xff7fffff, 0x00800000, 0x80800000, 0x00000001, 0x80000001,
	0x007fffff, 0x807fffff, 0x00000000, 0x80000000, 0x3f800000, 0xbf800000,
}

// actBlock fills x (one block) with values of the given kind.
func actBlock(r *rand.Rand, x []float32, kind int) {
	n := len(x)
	scale := float32(math.Ldexp(1, r.IntN(250)-125))
	switch kind {
	case 0: // ordinary activations at one magnitude
		for j := range x {
			x[j] = float32(r.NormFloat64()) * scale
		}
	case 1: // all +0, or a mix of +0 and -0
		for j := range x {
			x[j] = 0
			if r.IntN(2) == 0 {
				x[j] = float32(math.Copysign(0, -1))
			}
		}
	case 2: // all equal
		v := float32(r.NormFloat64()) * scale
		for j := range x {
			x[j] = v
		}
	case 3: // ties at .5 after scaling: max 127 (scale 1) or -127 (Q8_K's iscale 1), times a power of 2
		p := float32(math.Ldexp(1, r.IntN(40)-20))
		for j := range x {
			x[j] = (float32(r.IntN(255)-127) + 0.5) * p
		}
		x[r.IntN(n)] = 127 * p
		if r.IntN(2) == 0 {
			x[r.IntN(n)] = -127 * p
		}
	case 4: // huge and tiny together, denormals
		for j := range x {
			switch r.IntN(4) {
			case 0:
				x[j] = math.Float32frombits(r.Uint32() & 0x807fffff) // denormal
			case 1:
				x[j] = float32(r.NormFloat64()) * 1e38
			case 2:
				x[j] = float32(r.NormFloat64()) * 1e-38
			default:
				x[j] = float32(r.NormFloat64())
			}
		}
	case 5: // denormals only: the inverse scale overflows to infinity
		for j := range x {
			x[j] = math.Float32frombits(r.Uint32() & 0x800000ff)
		}
	case 6: // specials sprinkled into ordinary values
		for j := range x {
			x[j] = float32(r.NormFloat64()) * scale
			if r.IntN(4) == 0 {
				x[j] = math.Float32frombits(actSpecial[r.IntN(len(actSpecial))])
			}
		}
	case 7: // the largest magnitude negative
		for j := range x {
			x[j] = float32(r.Float64()) * scale
		}
		x[r.IntN(n)] = -2 * scale
	case 8: // the largest magnitude both positive and negative, either first
		for j := range x {
			x[j] = float32(r.NormFloat64()) * scale
		}
		a, b := r.IntN(n), r.IntN(n)
		x[a], x[b] = 8*scale, -8*scale
	case 9: // any bits at all
		for j := range x {
			x[j] = math.Float32frombits(r.Uint32())
		}
	case 10: // NaNs only, or NaNs and zeros (amax 0)
		for j := range x {
			x[j] = math.Float32frombits(0x7f800001 | r.Uint32()&0x807fffff)
			if r.IntN(3) == 0 {
				x[j] = 0
			}
		}
	case 11: // an infinity leads: the inverse scale is 0
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		x[r.IntN(n)] = float32(math.Inf(1 - 2*r.IntN(2)))
	case 12: // small integers: ties in magnitude and exact products
		for j := range x {
			x[j] = float32(r.IntN(9) - 4)
		}
	}
}

const actKinds = 13

// actVector makes n values in blocks of bs, each block of a random kind.
func actVector(r *rand.Rand, n, bs int) []float32 {
	x := make([]float32, n)
	for b := 0; b < n; b += bs {
		actBlock(r, x[b:min(n, b+bs)], r.IntN(actKinds))
	}
	return x
}

// TestActConvExact checks the assembly conversions against the Go ones,
// byte for byte: every whole-block length up to several KiB, every kind
// of block (zeros, ties, NaNs, infinities, denormals, a negative maximum)
// in each position.
func TestActConvExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range actCases(t) {
		maxLen := 4096
		if c.bs == 256 {
			maxLen = 16384
		}
		step := max(c.bs, 1)
		if c.bs == 1 {
			maxLen = 600 // every length, so every tail
		}
		for n := step; n <= maxLen; n += step {
			if !checkAct(t, c, actVector(r, n, max(c.bs, 32)), "random") {
				break
			}
		}
		// Each kind alone, many times, in every block of a few blocks.
		bs := max(c.bs, 32)
	kinds:
		for kind := 0; kind < actKinds; kind++ {
			for rep := 0; rep < 200; rep++ {
				x := make([]float32, 4*bs)
				for b := 0; b < 4; b++ {
					actBlock(r, x[b*bs:(b+1)*bs], kind)
				}
				if !checkAct(t, c, x, fmt.Sprintf("kind %d", kind)) {
					break kinds
				}
			}
		}
	}
}

// TestActConvF16Rounding checks the F16 and BF16 conversions on the
// values where rounding decides: every F16 value, the midpoints between
// neighbours and their float32 neighbours (the ties and just off them),
// every BF16 tie pattern, NaN payloads, and a stride through all bits.
func TestActConvF16Rounding(t *testing.T) {
	cases := actCases(t)
	var x []float32
	for h := 0; h < 1<<16; h++ {
		v := math.Float32bits(quant.F16ToF32(uint16(h)))
		x = append(x, math.Float32frombits(v))
		if h&0x7fff < 0x7c00 { // finite: the midpoint to the next half up
			next := math.Float32bits(quant.F16ToF32(uint16(h + 1)))
			mid := math.Float32bits(float32((float64(math.Float32frombits(v)) + float64(math.Float32frombits(next))) / 2))
			x = append(x, math.Float32frombits(mid), math.Float32frombits(mid-1), math.Float32frombits(mid+1))
		}
	}
	for b := uint32(0); b < 1<<16; b++ { // BF16 ties: low half exactly 0x8000
		x = append(x, math.Float32frombits(b<<16|0x8000), math.Float32frombits(b<<16|0x7fff))
	}
	for b := uint64(0); b < 1<<32; b += 65521 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	for _, b := range actSpecial {
		x = append(x, math.Float32frombits(b))
	}
	for _, c := range cases {
		if c.t == quant.F16 || c.t == quant.BF16 {
			checkAct(t, c, x, "rounding")
		}
	}
}

// TestActConvRegistered checks that MatMul's converters are the assembly
// ones on a CPU that has the features (a silent fallback to the Go loops
// would only be slow), and the Go ones under BRAID_KERNELS=generic.
func TestActConvRegistered(t *testing.T) {
	want := "avx2"
	if forcedGeneric {
		want = "generic"
	} else if !cpu.X86.HasAVX2 || !cpu.X86.HasF16C {
		t.Skip("no AVX2 and F16C on this CPU")
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q8_1, quant.Q8_K, quant.F16, quant.BF16} {
		if got := actNames[typ]; got != want {
			t.Errorf("%s activations: %q converter registered, want %q", typ, got, want)
		}
	}
}

// TestActConvBadLength checks that a wrong length is refused as the Go
// converter refuses it, naming the lengths, instead of the assembly
// reading or writing past a slice.
func TestActConvBadLength(t *testing.T) {
	for _, c := range actCases(t) {
		for _, tc := range []struct{ n, nb int }{{c.bs + 1, 64}, {256, 3}, {2 * c.bs, 1}} {
			if c.bs == 1 && tc.n == 2 {
				continue // one-value "blocks": only a short dst is wrong
			}
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				c.fast(make([]byte, tc.nb), make([]float32, tc.n))
				return ""
			}()
			if msg == "" || msg == "<nil>" {
				t.Errorf("%s: %d values into %d bytes: accepted", c.t, tc.n, tc.nb)
			} else if !bytes.Contains([]byte(msg), []byte(fmt.Sprint(tc.n))) {
				t.Errorf("%s: %d values into %d bytes: %q does not name the length", c.t, tc.n, tc.nb, msg)
			}
		}
	}
}

// FuzzActConv compares the assembly conversions with the Go ones on
// arbitrary float32 bit patterns (the first byte chooses between raw bits
// and small half-integers, which make ties and equal magnitudes).
func FuzzActConv(f *testing.F) {
	seed := func(vals ...uint32) []byte {
		b := []byte{0}
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	f.Add(seed(actSpecial...))
	f.Add(seed(0x42fe0000, 0xc2fe0000, 0x3f000000, 0xbfc00000)) // 127, -127, 0.5, -1.5
	f.Add(seed(0x00000001, 0x80000000, 0x7fc00000))
	f.Add([]byte{1, 0xff, 0x01, 0x80, 0x7f, 0x00, 0x03, 0xfd})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		var vals []float32
		if data[0]&1 == 0 {
			for b := data[1:]; len(b) >= 4; b = b[4:] {
				vals = append(vals, math.Float32frombits(binary.LittleEndian.Uint32(b)))
			}
		} else {
			for _, b := range data[1:] {
				vals = append(vals, float32(int8(b))/2)
			}
		}
		if len(vals) == 0 {
			return
		}
		x := &cpu.X86
		if !x.HasAVX2 || !x.HasF16C {
			t.Skip("no AVX2 and F16C on this CPU")
		}
		for _, c := range actCases(t) {
			// Repeat the values to at least a block, then cut to whole blocks.
			src := vals
			for len(src) < c.bs {
				src = append(src, vals...)
			}
			checkAct(t, c, src[:len(src)/c.bs*c.bs], "fuzz")
		}
	})
}

// BenchmarkActConv times one conversion of n activations (ns/op is per
// n values), the Go oracle against the assembly:
//
//	go test ./internal/kernels/ -run XXX -bench ActConv -count 5
func BenchmarkActConv(b *testing.B) {
	x := &cpu.X86
	if !x.HasAVX2 || !x.HasF16C {
		b.Skip("no AVX2 and F16C on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		t        quant.Type
		goF, asm func(dst []byte, src []float32)
	}{
		{quant.Q8_0, quantAct(quant.Q8_0), blockAct(quant.Q8_0, actQ8_0AVX2)},
		{quant.Q8_1, quantAct(quant.Q8_1), blockAct(quant.Q8_1, actQ8_1AVX2)},
		{quant.Q8_K, quantAct(quant.Q8_K), blockAct(quant.Q8_K, actQ8_KAVX2)},
		{quant.F16, toF16, elemAct(quant.F16, actF16AVX2, toF16)},
		{quant.BF16, toBF16, elemAct(quant.BF16, actBF16AVX2, toBF16)},
	} {
		for _, n := range []int{4096, 16384} {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			rb, _ := c.t.RowBytes(int64(n))
			dst := make([]byte, rb)
			for _, impl := range []struct {
				name string
				fn   func(dst []byte, src []float32)
			}{{"go", c.goF}, {"avx2", c.asm}} {
				b.Run(fmt.Sprintf("%s/n=%d/%s", c.t, n, impl.name), func(b *testing.B) {
					b.SetBytes(int64(4 * n))
					for b.Loop() {
						impl.fn(dst, src)
					}
				})
			}
		}
	}
}
