package quant

import (
	"math"
	"testing"
)

func TestRoundEven(t *testing.T) {
	for _, f := range []float32{0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 126.5, -127.5, 127.49, 3.7, -3.7, 4194303} {
		if got, want := roundEven(f), int32(math.RoundToEven(float64(f))); got != want {
			t.Errorf("roundEven(%v) = %d, want %d", f, got, want)
		}
	}
}

func TestAbsMax(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		x    []float32
		want float32
	}{
		{[]float32{0, 0}, 0},
		{[]float32{1, -3, 2}, 3},
		{[]float32{float32(math.Copysign(0, -1))}, 0},
		{[]float32{nan, -2, 1}, 2},
		{[]float32{1e-45, -2e-45}, 2e-45},
	} {
		if got := absMax(tc.x); got != tc.want {
			t.Errorf("absMax(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestScaleDecoders(t *testing.T) {
	for e := 0; e < 255; e++ {
		if got, want := float64(E8M0ToF32Half(uint8(e))), math.Ldexp(1, e-128); got != want {
			t.Errorf("E8M0ToF32Half(%d) = %g, want %g", e, got, want)
		}
	}
	for _, tc := range []struct {
		x    uint8
		want float64
	}{
		{0x00, 0}, {0x7f, 0}, {0x01, 1.0 / 1024}, {0x07, 7.0 / 1024},
		{0x38, 0.5},       // exp 7, man 0: 1.0, halved
		{0x3c, 0.75},      // 1.5, halved
		{0x7e, 224},       // exp 15, man 6: 1.75*2^8, halved
		{0xb8, 0.5},       // bit 7 ignored
		{0x08, 1.0 / 128}, // exp 1: 2^-6, halved
	} {
		if got := float64(UE4M3ToF32Half(tc.x)); got != tc.want {
			t.Errorf("UE4M3ToF32Half(%#x) = %g, want %g", tc.x, got, tc.want)
		}
	}
}

// TestScalesMinsK4 packs every (scale, min) pair position the way the Q4_K
// quantizer does and reads it back.
func TestScalesMinsK4(t *testing.T) {
	for seed := 0; seed < 64; seed++ {
		var ls, lm [8]int
		var s [12]byte
		for j := 0; j < 8; j++ {
			ls[j], lm[j] = (seed*7+j*13)%64, (seed*11+j*5+3)%64
			if j < 4 {
				s[j] |= byte(ls[j])
				s[j+4] |= byte(lm[j])
			} else {
				s[j+4] = byte(ls[j]&15 | (lm[j]&15)<<4)
				s[j-4] |= byte(ls[j]>>4) << 6
				s[j] |= byte(lm[j]>>4) << 6
			}
		}
		sc, m := ScalesMinsK4(&s)
		for j := 0; j < 8; j++ {
			if int(sc[j]) != ls[j] || int(m[j]) != lm[j] {
				t.Fatalf("pair %d: got (%d,%d), want (%d,%d)", j, sc[j], m[j], ls[j], lm[j])
			}
		}
	}
}

func TestNearestLevel(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want int
	}{{-200, 0}, {-127, 0}, {-116, 0}, {-115, 1}, {-5, 7}, {0, 8}, {7, 8} /* tie: lower */, {8, 9}, {113, 15}, {500, 15}} {
		if got := nearestLevel(&IQ4NLValues, tc.x); got != tc.want {
			t.Errorf("nearestLevel(%v) = %d (%d), want %d (%d)", tc.x, got, IQ4NLValues[got], tc.want, IQ4NLValues[tc.want])
		}
	}
}
