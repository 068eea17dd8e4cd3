package kernels

import (
	"math"
	"math/rand"
	"testing"

	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

// TestX8Dot4VNNI: on a CPU with AVX-512 VNNI, where the registered Q4_0
// and Q5_0 four-vector kernels are the VPDPBUSD ones, those give each
// vector the AVX2 four-vector kernels' bits (which TestX8Dot4Bits checks
// on AVX2 CPUs against the one-vector kernel), over block counts that
// cover one block, several, and a row longer than the prefetch distance.
func TestX8Dot4VNNI(t *testing.T) {
	if !x8VNNI() || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || !cpu.X86.HasF16C {
		t.Skip("no AVX-512 VNNI (or no AVX2) on this CPU")
	}
	rng := rand.New(rand.NewSource(9))
	for _, c := range []struct {
		typ        quant.Type
		avx2, vnni func(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int)
		auxOf      func(nb int, x []byte, aux []byte)
	}{
		{quant.Q4_0, dotQ40X8x4AVX2, dotQ40X8x4VNNI, q40Aux},
		{quant.Q5_0, dotQ50X8x4AVX2, dotQ50X8x4VNNI, q50Aux},
	} {
		f := x8Generic[c.typ]
		for _, cols := range []int{32, 256, 8192} {
			m := randomMatrix(t, c.typ, 8, cols, rng)
			rb := m.rowBytes()
			nb := rb / f.block
			w := make([]byte, 8*rb)
			f.pack(w, m.Data[:8*rb], nb)
			ldx := nb*q80Block + 20
			x := make([]byte, 4*ldx)
			for v := 0; v < 4; v++ {
				_, q := randomAct(t, quant.Q8_0, cols, rng)
				copy(x[v*ldx:], q)
			}
			aux := make([]byte, 4*8*nb)
			for v := 0; v < 4; v++ {
				c.auxOf(nb, x[v*ldx:], aux[v*8*nb:])
			}
			want, got := make([]float32, 4*9), make([]float32, 4*9)
			c.avx2(nb, w, x, ldx, aux, want, 9)
			c.vnni(nb, w, x, ldx, aux, got, 9)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v cols %d: value %d is %v with VNNI, %v with AVX2", c.typ, cols, i, got[i], want[i])
				}
			}
		}
	}
}
