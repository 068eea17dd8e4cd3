package kernels

import "braid/internal/quant"

//go:noescape
func q4kX8DotAVX2(nb int, w, x *byte, dst *[8]float32)

func init() {
	if on, noTiles := x8Policy(quant.Q4_K); on {
		x8Fast[quant.Q4_K] = &x8Format{name: "avx2", act: quant.Q8_K, block: kqQ4KSize, noTiles: noTiles,
			pack: packQ4KX8, unpack: unpackQ4KX8, dot8: dotQ4KX8AVX2, dot8x4: dotQ4KX8x4AVX2, ref: dotQ4KCanon}
	}
}

func dotQ4KX8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q4kX8Block || len(x) < nb*kqQ8KSize {
		panic("kernels: Q4_K x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	q4kX8DotAVX2(nb, &w[0], &x[0], dst)
}

//go:noescape
func q4kX8Dot4AVX2(nb int, w, x *byte, ldx int, dst *float32, ldd int)

// dotQ4KX8x4AVX2 is dot8 for four vectors ldx bytes apart, vector c's
// rows to dst[c*ldd:c*ldd+8].
func dotQ4KX8x4AVX2(nb int, w, x []byte, ldx int, dst []float32, ldd int) {
	if len(w) < nb*q4kX8Block || len(x) < 3*ldx+nb*kqQ8KSize || len(dst) < 3*ldd+8 || ldx < nb*kqQ8KSize {
		panic("kernels: Q4_K x8 four-vector dot operand shorter than its blocks")
	}
	if nb == 0 {
		for c := 0; c < 4; c++ {
			clear(dst[c*ldd : c*ldd+8])
		}
		return
	}
	q4kX8Dot4AVX2(nb, &w[0], &x[0], ldx, &dst[0], ldd)
}
