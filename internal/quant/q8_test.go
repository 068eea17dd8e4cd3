package quant_test

import (
	"bytes"
	"math"
	"testing"

	"braid/internal/quant"
)

// TestActivationQuantRef checks that activation quantization produces the
// very bytes llama.cpp's x86 CPU backend produced for the same row.
func TestActivationQuantRef(t *testing.T) {
	ref := loadRef(t, "quants.gguf")
	src := ref.f32(t, "act_source")
	for _, tc := range []struct {
		name string
		typ  quant.Type
	}{
		{"act_q8_0", quant.Q8_0},
		{"act_q8_1", quant.Q8_1},
		{"act_q8_K", quant.Q8_K},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ref.data(t, tc.name)
			got := make([]byte, len(want))
			if err := quant.Quantize(tc.typ, src, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				bs := tc.typ.TypeSize()
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("first difference at byte %d (block %d, offset %d): got %#x want %#x", i, i/bs, i%bs, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestQ8KProductRounded checks that Q8_K rounds each value's product with
// the inverse scale to float32 before rounding it to an integer, as
// llama.cpp's x86 build does, on every architecture: a fused multiply-add
// (arm64, GOAMD64=v3) would round products just off a tie .5 the other
// way. The values are chosen so that the float32 product is a tie while
// the exact one is not.
func TestQ8KProductRounded(t *testing.T) {
	x := make([]float32, 256)
	x[0] = 381 // iscale = -127/381, about -1/3, not exact
	iscale := -127 / x[0]
	n := 1
	for k := 1; k < 120 && n < 256; k++ {
		// Float32 neighbours of (k+0.5)/iscale whose rounded product is
		// exactly the tie but whose exact product is not.
		v := float32(float64(k)+0.5) / iscale
		for _, c := range []float32{v, math.Nextafter32(v, 0), math.Nextafter32(v, -1000)} {
			exact := float64(iscale) * float64(c)
			if p := float32(exact); float64(p) == math.Floor(float64(p))+0.5 && exact != float64(p) && n < 256 {
				x[n] = c
				n++
			}
		}
	}
	if n < 8 {
		t.Fatalf("found only %d values with a tie product; the search is broken", n-1)
	}
	got := make([]byte, 292)
	if err := quant.Quantize(quant.Q8_K, x, got); err != nil {
		t.Fatal(err)
	}
	for j, v := range x {
		want := int8(min(127, math.RoundToEven(float64(float32(float64(iscale)*float64(v))))))
		if int8(got[4+j]) != want {
			t.Errorf("value %d (%g): quant %d, want %d (product %g)", j, v, int8(got[4+j]), want, float64(iscale)*float64(v))
		}
	}
}
