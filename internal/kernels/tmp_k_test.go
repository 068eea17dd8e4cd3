package kernels

import (
	"fmt"
	"testing"

	"braid/internal/quant"
)

func BenchmarkTmpKernel(b *testing.B) {
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K} {
		impl := implFor(typ)
		const n, rows = 2048, 64
		r := kqRand("x")
		w := kqRandWeights(r, typ, rows*n/256, "rand")
		ldw := n / 256 * typ.TypeSize()
		ldx := n / 256 * kqQ8KSize
		var x []byte
		for c := 0; c < 8; c++ {
			x = append(x, kqRandActs(r, n, "quantized")...)
		}
		dst := make([]float32, 8*rows)
		b.Run(fmt.Sprintf("%s/dot", typ), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for r := 0; r < rows; r++ {
					dst[r] = impl.dot(n, w[r*ldw:(r+1)*ldw], x)
				}
			}
		})
		for _, c := range []int{1, 2, 5, 8} {
			b.Run(fmt.Sprintf("%s/md%d", typ, c), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					impl.mmDot(n, w, ldw, x, ldx, dst, rows, rows, c)
				}
			})
		}
	}
}
