package quant_test

import (
	"math/rand/v2"
	"testing"

	"braid/internal/quant"
)

// BenchmarkDequantize measures a 4096-value row, the size of an embedding
// lookup in a mid-sized model.
func BenchmarkDequantize(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 4096
	for _, typ := range sliceTypes {
		nb, _ := typ.RowBytes(n)
		data := make([]byte, nb)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		dst := make([]float32, n)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(n * 4)
			for b.Loop() {
				if err := quant.Dequantize(typ, data, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize measures quantizing a 4096-value row.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	const n = 4096
	src := gaussian(r, n, 1)
	for _, wt := range weightTypes {
		nb, _ := wt.typ.RowBytes(n)
		dst := make([]byte, nb)
		b.Run(wt.typ.String(), func(b *testing.B) {
			b.SetBytes(n * 4)
			for b.Loop() {
				if err := quant.Quantize(wt.typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
