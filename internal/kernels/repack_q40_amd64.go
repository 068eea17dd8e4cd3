package kernels

import "braid/internal/quant"

//go:noescape
func q40X8DotAVX2(nb int, w, x *byte, dst *[8]float32)

func init() {
	if on, tiles := x8Policy(quant.Q4_0); on {
		x8Fast[quant.Q4_0] = &x8Format{name: "avx2", act: quant.Q8_0, block: q40Block, tilesFrom: tiles,
			pack: packQ40X8, unpack: unpackQ40X8, dot8: dotQ40X8AVX2, dot8x4a: dotQ40X8x4AVX2,
			auxOf: q40Aux, auxBytes: 8, ref: dotQ40Canon}
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

// dotQ40X8x4AVX2 is dot8 for four vectors ldx bytes apart, with their
// q40Aux one after the other in aux.
func dotQ40X8x4AVX2(nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int) {
	if len(w) < nb*q40X8Block || len(x) < 3*ldx+nb*q80Block || len(dst) < 3*ldd+8 || ldx < nb*q80Block || len(aux) < 4*8*nb {
		panic("kernels: Q4_0 x8 four-vector dot operand shorter than its blocks")
	}
	if nb == 0 {
		for c := 0; c < 4; c++ {
			clear(dst[c*ldd : c*ldd+8])
		}
		return
	}
	q40X8Dot4AVX2(nb, &w[0], &x[0], ldx, &aux[0], &dst[0], ldd)
}
