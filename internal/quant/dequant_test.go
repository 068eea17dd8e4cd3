package quant_test

import (
	"math"
	"testing"

	"braid/internal/quant"
)

// refTypes are the tensors of the reference files, named as ggml names types.
var refTypes = []string{"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K",
	"q5_K", "q6_K", "iq4_nl", "iq4_xs", "mxfp4", "nvfp4", "act_q8_0"}

// TestDequantizeRef compares every value bit for bit with llama.cpp's
// to_float of the same blocks.
func TestDequantizeRef(t *testing.T) {
	q := loadRef(t, "quants.gguf")
	f := loadRef(t, "quants-dequant-f32.gguf")
	for _, name := range append([]string{"source", "act_source"}, refTypes...) {
		t.Run(name, func(t *testing.T) {
			typ, data, ok := q.tensor(name)
			if !ok {
				t.Skipf("tensor %s not in quants.gguf", name)
			}
			want := f.f32(t, name)
			if len(want) == 0 {
				t.Fatal("empty reference tensor")
			}
			got := make([]float32, len(want))
			if err := quant.Dequantize(typ, data, got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("value %d (row %d col %d): got %g (%#x) want %g (%#x)", i, i/512, i%512,
						got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

// TestFloatQuantizeRef checks that F16 and BF16 conversion of the source rows
// gives the bytes ggml wrote.
func TestFloatQuantizeRef(t *testing.T) {
	q := loadRef(t, "quants.gguf")
	src := q.f32(t, "source")
	for _, tc := range []struct {
		name string
		typ  quant.Type
	}{{"f16", quant.F16}, {"bf16", quant.BF16}} {
		t.Run(tc.name, func(t *testing.T) {
			want := q.data(t, tc.name)
			got := make([]byte, len(want))
			if err := quant.Quantize(tc.typ, src, got); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s bytes differ from ggml's", tc.typ)
			}
		})
	}
}
