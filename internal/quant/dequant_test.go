package quant_test

import (
	"math"
	"testing"

	"braid/internal/quant"
	"braid/internal/sharedtest"
)

// refTypes are the tensors of the reference files, named as ggml names types.
var refTypes = []string{"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K",
	"q5_K", "q6_K", "iq4_nl", "iq4_xs", "mxfp4", "nvfp4", "act_q8_0"}

// refIQTypes are the tensors of quants-iq.gguf this package dequantizes;
// the file's README documents every one, so a missing one is an error.
var refIQTypes = []string{"q1_0", "q2_0", "act_q8_0",
	"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "tq1_0", "tq2_0",
	"iq1_m.no_imatrix", "iq2_s.no_imatrix", "iq3_xxs.no_imatrix", "iq3_s.imatrix"}

// TestDequantizeRef compares every value bit for bit with llama.cpp's
// to_float of the same blocks.
func TestDequantizeRef(t *testing.T) {
	q := loadRef(t, "quants.gguf")
	f := loadRef(t, "quants-dequant-f32.gguf")
	for _, name := range append([]string{"source", "act_source"}, refTypes...) {
		t.Run(name, func(t *testing.T) {
			if _, _, ok := q.tensor(name); !ok {
				sharedtest.Missing(t, "tensor %s not in quants.gguf", name)
			}
			compareDequant(t, q, f, name)
		})
	}
}

// TestDequantizeRefIQ is TestDequantizeRef for the low-bit reference file.
func TestDequantizeRefIQ(t *testing.T) {
	q := loadRefAt(t, refIQDir, "quants-iq.gguf")
	f := loadRefAt(t, refIQDir, "quants-iq-dequant-f32.gguf")
	for _, name := range refIQTypes {
		t.Run(name, func(t *testing.T) {
			if _, _, ok := q.tensor(name); !ok {
				t.Fatalf("tensor %s not in quants-iq.gguf", name)
			}
			compareDequant(t, q, f, name)
		})
	}
}

// compareDequant dequantizes tensor name of q and requires every value to
// have the bits of the same tensor in f, llama.cpp's float32 expansion.
func compareDequant(t *testing.T, q, f refFile, name string) {
	t.Helper()
	typ, data, _ := q.tensor(name)
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
			t.Fatalf("%s value %d (row %d col %d): got %g (%#x) want %g (%#x)", typ, i, i/512, i%512,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
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

// TestDequantizeLowBitLayout pins the Q1_0 and Q2_0 bit order on hand-made
// blocks, so a layout error shows even without the shared reference files.
func TestDequantizeLowBitLayout(t *testing.T) {
	block := func(d float32, qs [16]byte) []byte {
		b := make([]byte, 18)
		h := quant.F32ToF16(d)
		b[0], b[1] = byte(h), byte(h>>8)
		copy(b[2:], qs[:])
		return b
	}
	// Q1_0: bit 0 of byte 0 is value 0; byte 15 bit 7 is value 127.
	got := make([]float32, 128)
	if err := quant.Dequantize(quant.Q1_0, block(0.5, [16]byte{0: 0x01, 1: 0x80, 15: 0x80}), got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := float32(-0.5)
		if i == 0 || i == 15 || i == 127 {
			want = 0.5
		}
		if v != want {
			t.Fatalf("Q1_0 value %d: got %g want %g", i, v, want)
		}
	}
	// Q2_0: byte 0 = 0b11_10_01_00 holds values 0..3 as q = 0, 1, 2, 3.
	got = got[:64]
	if err := quant.Dequantize(quant.Q2_0, block(2, [16]byte{0: 0xe4, 15: 0x40}), got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := float32(-2) // q = 0
		switch i {
		case 1, 63:
			want = 0
		case 2:
			want = 2
		case 3:
			want = 4
		}
		if v != want {
			t.Fatalf("Q2_0 value %d: got %g want %g", i, v, want)
		}
	}
}
