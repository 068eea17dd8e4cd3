package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"braid/internal/quant"
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

// kqTileAct is the wideAct converter of the tile layout.
func kqTileAct(dst []byte, src []float32) {
	nb := len(src) / 256
	if len(src)%256 != 0 || len(dst) < 4*len(src) {
		panic(fmt.Sprintf("kernels: K-quant tile activations: %d values into %d bytes", len(src), len(dst)))
	}
	// Quantize into the upper part of dst (2*len(src) on: the layout
	// needs 1.5 bytes per value, Q8_K 1.14), then lay it out below.
	q := dst[2*len(src) : 2*len(src)+nb*kqQ8KSize]
	actQuantizers[quant.Q8_K](q, src)
	for b := 0; b < nb; b++ {
		kqTileBlock(dst[b*kqTileSize:(b+1)*kqTileSize], q[b*kqQ8KSize:(b+1)*kqQ8KSize])
	}
}

// kqTileBlock lays out one Q8_K block y in the tile layout.
func kqTileBlock(t, y []byte) {
	_ = t[kqTileSize-1]
	_ = y[kqQ8KSize-1]
	qs := y[kqQ8KQS : kqQ8KQS+256]
	le := binary.LittleEndian
	for g := 0; g < 16; g++ {
		// Four-byte moves (copy would call memmove for each).
		for k := 0; k < 4; k++ {
			le.PutUint32(t[64*k+4*g:], le.Uint32(qs[16*g+4*k:]))
		}
	}
	d := kqF32(y)
	for g := 0; g < 16; g++ {
		bs := kqI16(y[kqQ8KBsums+2*g:])
		binary.LittleEndian.PutUint32(t[kqTileExtra+4*g:], math.Float32bits(d*float32(bs)))
	}
	binary.LittleEndian.PutUint32(t[kqTileD:], math.Float32bits(d))
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
