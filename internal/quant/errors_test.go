package quant_test

import (
	"strings"
	"testing"

	"braid/internal/quant"
)

func TestLengthErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"quantize partial block", func() error { return quant.Quantize(quant.Q8_0, make([]float32, 33), make([]byte, 68)) }, "33 values"},
		{"quantize short dst", func() error { return quant.Quantize(quant.Q8_0, make([]float32, 64), make([]byte, 67)) }, "dst holds 67"},
		{"quantize unsupported", func() error { return quant.Quantize(quant.IQ2_XXS, make([]float32, 256), make([]byte, 66)) }, "IQ2_XXS"},
		{"dequantize partial block", func() error { return quant.Dequantize(quant.Q8_0, make([]byte, 35), make([]float32, 32)) }, "35 bytes"},
		{"dequantize short dst", func() error { return quant.Dequantize(quant.Q8_0, make([]byte, 34), make([]float32, 31)) }, "dst holds 31"},
		{"dequantize unknown", func() error { return quant.Dequantize(quant.Type(99), nil, nil) }, "type(99)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestQ8ZeroBlock checks that an all-zero block encodes to zero bytes rather
// than dividing by zero.
func TestQ8ZeroBlock(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q8_1, quant.Q8_K} {
		src := make([]float32, typ.BlockSize())
		dst := make([]byte, typ.TypeSize())
		for i := range dst {
			dst[i] = 0xAA
		}
		if err := quant.Quantize(typ, src, dst); err != nil {
			t.Fatal(err)
		}
		for i, b := range dst {
			if b != 0 {
				t.Fatalf("%s: byte %d = %#x, want 0", typ, i, b)
			}
		}
	}
}
