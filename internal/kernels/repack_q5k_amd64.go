package kernels

import "braid/internal/quant"

//go:noescape
func q5kX8DotAVX2(nb int, w, x *byte, dst *[8]float32)

func init() {
	if on, noTiles := x8Policy(quant.Q5_K); on {
		x8Fast[quant.Q5_K] = &x8Format{name: "avx2", act: quant.Q8_K, block: kqQ5KSize, noTiles: noTiles,
			pack: packQ5KX8, unpack: unpackQ5KX8, dot8: dotQ5KX8AVX2, ref: dotQ5KCanon}
	}
}

func dotQ5KX8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q5kX8Block || len(x) < nb*kqQ8KSize {
		panic("kernels: Q5_K x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	q5kX8DotAVX2(nb, &w[0], &x[0], dst)
}
