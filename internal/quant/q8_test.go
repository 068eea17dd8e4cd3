package quant_test

import (
	"bytes"
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
