package quant_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"braid/internal/quant"
)

// sliceTypes are checked with randomly quantized tensors (types Quantize
// supports) or random blocks with a valid f16 scale (the others).
var sliceTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1,
	quant.Q5_0, quant.Q5_1, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q8_K,
	quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4, quant.NVFP4}

// randomTensor returns rows*cols values of type t and their dequantization.
func randomTensor(t *testing.T, r *rand.Rand, typ quant.Type, rows, cols int) ([]byte, []float32) {
	t.Helper()
	nb, err := typ.RowBytes(int64(rows * cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, nb)
	if quant.CanQuantize(typ) {
		if err := quant.Quantize(typ, gaussian(r, rows*cols, 1), data); err != nil {
			t.Fatal(err)
		}
	} else {
		for i := range data {
			data[i] = byte(r.Uint32())
		}
	}
	vals := make([]float32, rows*cols)
	if err := quant.Dequantize(typ, data, vals); err != nil {
		t.Fatal(err)
	}
	return data, vals
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestSlices: dequantize(slice(x)) == slice(dequantize(x)) for row and
// column bands.
func TestSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range sliceTypes {
		t.Run(typ.String(), func(t *testing.T) {
			bs := typ.BlockSize()
			if bs == 1 {
				bs = 32
			}
			const rows = 5
			cols := 4 * bs
			data, vals := randomTensor(t, r, typ, rows, cols)
			for _, rr := range [][2]int{{0, rows}, {1, 3}, {4, 5}, {2, 2}} {
				s, err := quant.RowSlice(typ, data, cols, rr[0], rr[1])
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, (rr[1]-rr[0])*cols)
				if err := quant.Dequantize(typ, s, got); err != nil {
					t.Fatal(err)
				}
				if !sameBits(got, vals[rr[0]*cols:rr[1]*cols]) {
					t.Errorf("rows [%d,%d) differ from the dequantized tensor's", rr[0], rr[1])
				}
			}
			for _, cc := range [][2]int{{0, cols}, {0, bs}, {bs, 3 * bs}, {3 * bs, 4 * bs}, {bs, bs}} {
				s, err := quant.ColSlice(typ, data, rows, cols, cc[0], cc[1])
				if err != nil {
					t.Fatal(err)
				}
				w := cc[1] - cc[0]
				got := make([]float32, rows*w)
				if err := quant.Dequantize(typ, s, got); err != nil {
					t.Fatal(err)
				}
				var want []float32
				for row := 0; row < rows; row++ {
					want = append(want, vals[row*cols+cc[0]:row*cols+cc[1]]...)
				}
				if !sameBits(got, want) {
					t.Errorf("columns [%d,%d) differ from the dequantized tensor's", cc[0], cc[1])
				}
			}
		})
	}
}

func TestRowSliceAliases(t *testing.T) {
	data := make([]byte, 4*34)
	s, err := quant.RowSlice(quant.Q8_0, data, 32, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	s[0] = 7
	if data[34] != 7 {
		t.Fatal("RowSlice copied instead of aliasing")
	}
	if cap(s) != 34 {
		t.Fatalf("cap %d, want 34 so appends cannot clobber the next row", cap(s))
	}
}

func TestSliceErrors(t *testing.T) {
	q4 := make([]byte, 2*2*18) // 2 rows of 64 Q4_0 values
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"row range past end", func() error { _, err := quant.RowSlice(quant.Q4_0, q4, 64, 1, 3); return err }, "[1, 3)"},
		{"row range reversed", func() error { _, err := quant.RowSlice(quant.Q4_0, q4, 64, 2, 1); return err }, "[2, 1)"},
		{"cols not whole blocks", func() error { _, err := quant.RowSlice(quant.Q4_0, q4, 48, 0, 1); return err }, "48"},
		{"data not whole rows", func() error { _, err := quant.RowSlice(quant.Q4_0, q4[:50], 64, 0, 1); return err }, "50 bytes"},
		{"zero cols", func() error { _, err := quant.RowSlice(quant.Q4_0, q4, 0, 0, 1); return err }, "0 columns"},
		{"unknown type", func() error { _, err := quant.RowSlice(quant.Type(77), q4, 64, 0, 1); return err }, "77"},
		{"col off block", func() error { _, err := quant.ColSlice(quant.Q4_0, q4, 2, 64, 16, 64); return err }, "[16, 64)"},
		{"col end off block", func() error { _, err := quant.ColSlice(quant.Q4_0, q4, 2, 64, 0, 40); return err }, "block boundaries"},
		{"col past end", func() error { _, err := quant.ColSlice(quant.Q4_0, q4, 2, 64, 32, 96); return err }, "64 columns"},
		{"rows mismatch", func() error { _, err := quant.ColSlice(quant.Q4_0, q4, 3, 64, 0, 32); return err }, "not 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
