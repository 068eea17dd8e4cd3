package kernels

import "braid/internal/quant"

//go:noescape
func q40X8DotAVX2(nb int, w, x *byte, dst *[8]float32)

func init() {
	if on, noTiles := x8Policy(quant.Q4_0); on {
		f := &x8Format{name: "avx2", act: quant.Q8_0, block: q40Block, noTiles: noTiles,
			pack: packQ40X8, unpack: unpackQ40X8, dot8: dotQ40X8AVX2, dot8x4a: dotQ40X8x4AVX2,
			auxOf: q40Aux, auxBytes: 8, ref: dotQ40Canon}
		if x8VNNI() {
			f.name, f.dot8x4a = "avx2+vnni", dotQ40X8x4VNNI
		}
		x8Fast[quant.Q4_0] = f
	}
}

func dotQ40X8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*q40X8Block || len(x) < nb*q80Block {
		panic("kernels: Q4_0 x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	q40X8DotAVX2(nb, &w[0], &x[0], dst)
}

//go:noescape
func q40X8Dot4AVX2(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)

//go:noescape
func q40X8Dot4VNNI(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)

// dotQ40X8x4AVX2 is dot8 for four vectors ldx bytes apart, with their
// q40Aux one after the other in aux.
func dotQ40X8x4AVX2(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int) {
	if x4aReady("Q4_0", q40X8Block, nb, w, x, ldx, aux, dst, ldd) {
		q40X8Dot4AVX2(nb, &w[0], &x[0], ldx, &aux[0], &dst[0], ldd)
	}
}

// dotQ40X8x4VNNI is dotQ40X8x4AVX2 with VPDPBUSD, for AVX-512 VNNI CPUs.
func dotQ40X8x4VNNI(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int) {
	if x4aReady("Q4_0", q40X8Block, nb, w, x, ldx, aux, dst, ldd) {
		q40X8Dot4VNNI(nb, &w[0], &x[0], ldx, &aux[0], &dst[0], ldd)
	}
}
