package kernels

import "braid/internal/quant"

//go:noescape
func mxfp4X8DotAVX2(nb int, w, x *byte, dst *[8]float32)

//go:noescape
func mxfp4X8Dot4AVX2(nb int, w, x *byte, ldx int, lanes *[4][8][8]float32)

func init() {
	if on, noTiles := x8Policy(quant.MXFP4); on {
		x8Fast[quant.MXFP4] = &x8Format{name: "avx2", act: quant.Q8_0, block: mxfp4Block, noTiles: noTiles,
			pack: packMXFP4X8, unpack: unpackMXFP4X8, dot8: dotMXFP4X8AVX2, dot8x4: dotMXFP4X8x4AVX2, ref: dotMXFP4Canon}
	}
}

func dotMXFP4X8AVX2(nb int, w, x []byte, dst *[8]float32) {
	if len(w) < nb*mxfp4X8Block || len(x) < nb*q80Block {
		panic("kernels: MXFP4 x8 dot operand shorter than its blocks")
	}
	if nb == 0 {
		*dst = [8]float32{}
		return
	}
	mxfp4X8DotAVX2(nb, &w[0], &x[0], dst)
}

// dotMXFP4X8x4AVX2 is dot8 for four vectors ldx bytes apart. The kernel
// leaves each vector's eight float lanes (lanes[v][k][r]: lane k of row
// r) here, 32 registers' worth that it keeps in memory, and they are
// added in the one-vector kernel's tree.
func dotMXFP4X8x4AVX2(nb int, w, x []byte, ldx int, dst []float32, ldd int) {
	if len(w) < nb*mxfp4X8Block || len(x) < 3*ldx+nb*q80Block || len(dst) < 3*ldd+8 || ldx < nb*q80Block {
		panic("kernels: MXFP4 x8 four-vector dot operand shorter than its blocks")
	}
	if nb == 0 {
		for c := 0; c < 4; c++ {
			clear(dst[c*ldd : c*ldd+8])
		}
		return
	}
	var lanes [4][8][8]float32
	mxfp4X8Dot4AVX2(nb, &w[0], &x[0], ldx, &lanes)
	for c := range lanes {
		for r := 0; r < 8; r++ {
			var l q80Lanes
			for k := range l {
				l[k] = lanes[c][k][r]
			}
			dst[c*ldd+r] = l.sum()
		}
	}
}
