package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Multi-column tiles for the K-quants (matrix products with n > 1: prefill
// and batched decode). The row dot unpacks a weight super-block (nibbles,
// 6-bit scales and mins) for every activation column; a tile unpacks it
// once for several columns. The tiles take the activations in their own
// layout, made once per MatMul by the dotImpl's wideAct (which MatMul gives
// 4 bytes per value, more than the layout needs), so that the per-column
// work of the tile is the integer dot products and nothing else:
//
// One 256-value block of a column is kqTileSize bytes:
//
//	[0, 256)    the Q8_K int8 values, permuted: byte 64k + 4g + i holds value
//	            16g + 4k + i (k, i < 4; g < 16). A 4-byte lane g of the k-th
//	            64-byte vector (a 16-byte quarter of it on arm64) always
//	            holds values of the 16-value group g, so a VPDPBUSD/SDOT
//	            lane accumulates one group's exact integer dot, and each
//	            group's scale applies per lane after all four.
//	[256, 320)  d*bsum_g as float32 for each group g: the min term of Q4_K
//	            and Q5_K and the offset of 32 of Q6_K are then one float
//	            multiply-add per lane.
//	[320, 324)  d, float32.
//
// The Q8_K values are exactly the row dot's (the same quantizer), so
// tiles and row dots differ only in the order of float operations.
const (
	kqTileSize  = 384 // a multiple of 64: blocks stay cache-line aligned
	kqTileExtra = 256
	kqTileD     = 320
)

// kqTileFunc is one assembly tile: rows by cols (fixed per function) for nb
// blocks; ldw and ldx are the byte strides of weight rows and activation
// columns, ldd the float stride of dst columns.
type kqTileFunc func(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, nb int)

// kqTileAct is the wideAct converter of the tile layout: the Q8_K
// quantization of quant.Quantize (byte for byte: TestKQuantTileLayout),
// written straight into the layout instead of quantized, then permuted.
func kqTileAct(dst []byte, src []float32) {
	nb := len(src) / 256
	if len(src)%256 != 0 || len(dst) < 4*len(src) {
		panic(fmt.Sprintf("kernels: K-quant tile activations: %d values into %d bytes", len(src), len(dst)))
	}
	for b := 0; b < nb; b++ {
		kqTileQuant(dst[b*kqTileSize:(b+1)*kqTileSize], src[b*256:(b+1)*256])
	}
}

// kqTileQuant quantizes 256 values x into one block t of the tile layout,
// as quantQ8_K of package quant does (llama.cpp's quantize_row_q8_K_ref):
// the scale from the first value of largest magnitude (NaNs skipped),
// values rounded to nearest even, none below -127.
func kqTileQuant(t []byte, x []float32) {
	_ = t[kqTileSize-1]
	_ = x[255]
	var amax uint32
	at := 0
	for j, v := range x {
		if a := math.Float32bits(v) &^ (1 << 31); a > amax && a <= 0x7f800000 {
			amax, at = a, j
		}
	}
	if amax == 0 {
		clear(t[:kqTileD+4])
		return
	}
	iscale := -127 / x[at]
	d := 1 / iscale
	le := binary.LittleEndian
	for g := 0; g < 16; g++ {
		var s int32
		xg := x[g*16 : g*16+16]
		for k := 0; k < 4; k++ {
			var word uint32
			for i := 0; i < 4; i++ {
				// float32(): the product rounded, never fused with the add
				// of the rounding.
				q := min(127, int32(math.Float32bits(float32(iscale*xg[4*k+i])+12582912))-0x4B400000)
				word |= uint32(uint8(q)) << (8 * i)
				s += q
			}
			le.PutUint32(t[64*k+4*g:], word)
		}
		// Q8_K keeps the sum as an int16 (it wraps only for NaN input).
		le.PutUint32(t[kqTileExtra+4*g:], math.Float32bits(d*float32(int16(s))))
	}
	le.PutUint32(t[kqTileD:], math.Float32bits(d))
}

// kqTile runs a tile table (tab[rows-1][cols-1]) on one tile of MatMul,
// checking the operands so the assembly never reads past a slice; wsize
// and xsize are the bytes per block of a weight row and an activation
// column.
func kqTile(tab [][]kqTileFunc, wsize, xsize int, n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	nb := n / 256
	if n%256 != 0 || rows < 1 || rows > len(tab) || cols < 1 || cols > len(tab[0]) || nb == 0 ||
		len(w) < (rows-1)*ldw+nb*wsize || len(x) < (cols-1)*ldx+nb*xsize || len(dst) < (cols-1)*ldd+rows {
		panic(fmt.Sprintf("kernels: K-quant tile %dx%d of n=%d: operands too short or bad shape", rows, cols, n))
	}
	tab[rows-1][cols-1](&w[0], ldw, &x[0], ldx, &dst[0], ldd, nb)
}
