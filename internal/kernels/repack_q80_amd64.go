package kernels

import "braid/internal/quant"

//go:noescape
func q80X8DotAVX2(nb int, w, x *byte, dst *[8]float32)

func init() {
	if on, noTiles := x8Policy(quant.Q8_0); on {
		x8Fast[quant.Q8_0] = &x8Format{name: "avx2", act: quant.Q8_0, block: q80Block, noTiles: noTiles,
			pack: packQ80X8, unpack: unpackQ80X8, dot8: dotQ80X8AVX2, ref: dotQ80Canon}
	}
}

func dotQ80X8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q80X8Block || len(x) < nb*q80Block {
		panic("kernels: Q8_0 x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	q80X8DotAVX2(nb, &w[0], &x[0], dst)
}
