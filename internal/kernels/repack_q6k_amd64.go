package kernels

import "braid/internal/quant"

//go:noescape
func q6kX8DotAVX2(nb int, w, x *byte, dst *[8]float32)

func init() {
	if x8AVX2() {
		x8Fast[quant.Q6_K] = &x8Format{name: "avx2", act: quant.Q8_K, block: kqQ6KSize,
			pack: packQ6KX8, unpack: unpackQ6KX8, dot8: dotQ6KX8AVX2, ref: dotQ6KCanon}
	}
}

func dotQ6KX8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q6kX8Block || len(x) < nb*kqQ8KSize {
		panic("kernels: Q6_K x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	q6kX8DotAVX2(nb, &w[0], &x[0], dst)
}
