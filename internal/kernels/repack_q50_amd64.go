package kernels

import "braid/internal/quant"

//go:noescape
func q50X8DotAVX2(nb int, w, x *byte, dst *[8]float32)

//go:noescape
func q50X8Dot4AVX2(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)

//go:noescape
func q50X8Dot4VNNI(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)

func init() {
	if on, noTiles := x8Policy(quant.Q5_0); on {
		f := &x8Format{name: "avx2", act: quant.Q8_0, block: q50Block, noTiles: noTiles,
			pack: packQ50X8, unpack: unpackQ50X8, dot8: dotQ50X8AVX2, dot8x4a: dotQ50X8x4AVX2,
			auxOf: q50Aux, auxBytes: 8, ref: dotQ50Canon}
		if x8VNNI() {
			f.name, f.dot8x4a = "avx2+vnni", dotQ50X8x4VNNI
		}
		x8Fast[quant.Q5_0] = f
	}
}

func dotQ50X8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q50X8Block || len(x) < nb*q80Block {
		panic("kernels: Q5_0 x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	q50X8DotAVX2(nb, &w[0], &x[0], dst)
}

// dotQ50X8x4AVX2 is dot8 for four vectors ldx bytes apart, with their
// q50Aux one after the other in aux.
func dotQ50X8x4AVX2(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int) {
	if x4aReady("Q5_0", q50X8Block, nb, w, x, ldx, aux, dst, ldd) {
		q50X8Dot4AVX2(nb, &w[0], &x[0], ldx, &aux[0], &dst[0], ldd)
	}
}

// dotQ50X8x4VNNI is dotQ50X8x4AVX2 with VPDPBUSD, for AVX-512 VNNI CPUs.
func dotQ50X8x4VNNI(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int) {
	if x4aReady("Q5_0", q50X8Block, nb, w, x, ldx, aux, dst, ldd) {
		q50X8Dot4VNNI(nb, &w[0], &x[0], ldx, &aux[0], &dst[0], ldd)
	}
}
