package kernels

import (
	"encoding/binary"
	"math"
	"sync"

	"braid/internal/quant"
)

// Prefill tiles for the grid formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and
// IQ3_S on AVX2. Their row dots spend nearly all their time building the
// weights (scalar codebook lookups, sign expansion), not multiplying, so
// a product of many vectors decodes each super-block of a tile's rows once
// into a panel (iqPanelBlock bytes: the weights as the row dot holds them
// in its registers, 64 + w, and its scale vectors) and runs every column
// over the panel with the row dot's own integer and float operations:
// the same eight int32 lane sums per super-block, folded into the same
// float lanes by the same multiply-adds in the same order, and reduced by
// the same tree. A column's result is the row dot's bits for any number
// of vectors (exactTiles), which TestExactEveryFormat checks.
//
// Panel block layout (offsets in bytes):
//
//	  0  q    [256]uint8  64 + w, the values in order
//	256  sc   [8]uint64   per 32 values: the scale word pairs of lanes 0-3
//	                      (low dword) and 4-7 (high dword)
//	320  corr [16]int16   the scale of each 16 values, multiplied with
//	                      Q8_K's bsums for the -64 * sum(ls * bsum) term
//	352  d    float32     the block's scale
const iqPanelBlock = 384

// iqPanel is one grid format's decoder and the constant its row dot
// multiplies the sum by (IQ2: 1/8, IQ3_XXS: 1/4, IQ3_S: 1).
type iqPanel struct {
	size   int
	k      float32
	decode func(dst, b []byte)
	// decodeRow, when set, is decode in assembly over nb blocks.
	decodeRow func(dst, w *byte, nb int)
	dot       func(n int, w, x []byte) float32
}

// iqPanelMinCols is the fewest vectors a tile runs on the panel: the
// four-column kernel is the only one, and fewer columns take the row dot.
const iqPanelMinCols = 4

// A tile is iqPanelRows rows (their panel, 8 x 12 KiB for rows of 8192
// values, stays in L2) by up to iqPanelCols vectors: each row is decoded
// once per that many, and only four vectors' activations are in use at a
// time, so it can be large.
const iqPanelRows, iqPanelCols = 8, 256

var iqPanelBufs sync.Pool // *[]byte

// mm is the tile (dotImpl.mm) of format p.
func (p *iqPanel) mm(n int, w []byte, ldw int, x []byte, ldx int, dst []float32, ldd int, rows, cols int) {
	nb := n / 256
	if cols < iqPanelMinCols || nb == 0 {
		mmByDot(p.dot, n, w, ldw, x, ldx, dst, ldd, rows, cols)
		return
	}
	need := rows * nb * iqPanelBlock
	bp, _ := iqPanelBufs.Get().(*[]byte)
	if bp == nil || len(*bp) < need {
		b := make([]byte, need)
		bp = &b
	}
	buf := *bp
	for r := 0; r < rows; r++ {
		src := w[r*ldw:]
		if p.decodeRow != nil {
			_ = src[nb*p.size-1]
			_ = buf[(r+1)*nb*iqPanelBlock-1]
			p.decodeRow(&buf[r*nb*iqPanelBlock], &src[0], nb)
			continue
		}
		for i := 0; i < nb; i++ {
			p.decode(buf[(r*nb+i)*iqPanelBlock:], src[i*p.size:(i+1)*p.size])
		}
	}
	c4 := cols / 4 * 4
	for c := 0; c < c4; c += 4 {
		// Four columns' activations stay in L1 while every row's panel
		// passes them.
		_ = x[(c+3)*ldx+nb*kqQ8KSize-1]
		_ = dst[(c+3)*ldd+rows-1]
		for r := 0; r < rows; r++ {
			iqPanelDot4(&buf[r*nb*iqPanelBlock], nb, &x[c*ldx], ldx, &dst[c*ldd+r], ldd, p.k)
		}
	}
	for c := c4; c < cols; c++ {
		xc := x[c*ldx : c*ldx+ldx]
		for r := 0; r < rows; r++ {
			dst[c*ldd+r] = p.dot(n, w[r*ldw:r*ldw+ldw], xc)
		}
	}
	iqPanelBufs.Put(bp)
}

// iqPanelDot4 writes, for c < 4, the dot of the nb panel blocks at w with
// the Q8_K vector at x+c*ldx, times k, to dst[c*ldd].
//
//go:noescape
func iqPanelDecIQ2XXSAVX2(dst, w *byte, nb int)

//go:noescape
func iqPanelDecIQ2XSAVX2(dst, w *byte, nb int)

//go:noescape
func iqPanelDecIQ2SAVX2(dst, w *byte, nb int)

//go:noescape
func iqPanelDecIQ3XXSAVX2(dst, w *byte, nb int)

//go:noescape
func iqPanelDecIQ3SAVX2(dst, w *byte, nb int)

//go:noescape
func iqPanelDot4(w *byte, nb int, x *byte, ldx int, dst *float32, ldd int, k float32)

// iqSignMask[s] has byte k 0xff where bit k of the sign byte s is set;
// iqSignMask7 is the same for a 7-bit sign index (quant.IQSigns).
var iqSignMask, iqSignMask7 = func() (t, t7 [256]uint64) {
	for s := range t {
		for k := 0; k < 8; k++ {
			if s>>k&1 != 0 {
				t[s] |= 0xff << (8 * k)
			}
		}
	}
	for s := range 128 {
		t7[s] = t[quant.IQSigns(uint8(s))]
		t7[s+128] = t7[s]
	}
	return t, t7
}()

// iqPanel8 is 64 + s*g for the 8 magnitudes (bytes of g, each below 64)
// with the sign mask m (iqSignMask), as the row dots' VPSIGNB and VPADDB
// make them: no byte carries into or borrows from its neighbour.
func iqPanel8(g, m uint64) uint64 {
	const b64 = 0x4040404040404040
	pos, neg := b64+g, b64-g
	return pos ^ (pos^neg)&m
}

type iqPanelOut = [iqPanelBlock]byte

// iqPanelScales writes the scale words of a format with one scale per 32
// values (lo = hi) or two (lo[ib] for values 0-15, hi[ib] for 16-31), and
// the block's scale d.
func iqPanelScales(dst *iqPanelOut, lo, hi *[8]uint32, d float32) {
	for ib := 0; ib < 8; ib++ {
		l, h := lo[ib]|lo[ib]<<16, hi[ib]|hi[ib]<<16
		binary.LittleEndian.PutUint64(dst[256+8*ib:], uint64(l)|uint64(h)<<32)
		binary.LittleEndian.PutUint32(dst[320+4*ib:], lo[ib]|hi[ib]<<16)
	}
	binary.LittleEndian.PutUint32(dst[352:], math.Float32bits(d))
}

func iqPanelIQ2XXS(out, in []byte) {
	dst, b := (*iqPanelOut)(out), (*[iqIQ2XXSSize]byte)(in)
	var ls [8]uint32
	for ib := 0; ib < 8; ib++ {
		aux := binary.LittleEndian.Uint32(b[6+8*ib:])
		for l := 0; l < 4; l++ {
			g := quant.IQ2XXSGrid[b[2+8*ib+l]]
			binary.LittleEndian.PutUint64(dst[32*ib+8*l:], iqPanel8(g, iqSignMask7[uint8(aux>>(7*l))&127]))
		}
		ls[ib] = 2*(aux>>28) + 1
	}
	iqPanelScales(dst, &ls, &ls, kqF16(b[:]))
}

func iqPanelIQ2XS(out, in []byte) {
	dst, b := (*iqPanelOut)(out), (*[iqIQ2XSSize]byte)(in)
	var lo, hi [8]uint32
	for ib := 0; ib < 8; ib++ {
		for l := 0; l < 4; l++ {
			q := binary.LittleEndian.Uint16(b[2+8*ib+2*l:])
			binary.LittleEndian.PutUint64(dst[32*ib+8*l:], iqPanel8(quant.IQ2XSGrid[q&511], iqSignMask7[uint8(q>>9)]))
		}
		sc := uint32(b[66+ib])
		lo[ib], hi[ib] = 2*(sc&15)+1, 2*(sc>>4)+1
	}
	iqPanelScales(dst, &lo, &hi, kqF16(b[:]))
}

func iqPanelIQ2S(out, in []byte) {
	dst, b := (*iqPanelOut)(out), (*[iqIQ2SSize]byte)(in)
	var lo, hi [8]uint32
	for ib := 0; ib < 8; ib++ {
		h := int(b[66+ib])
		for l := 0; l < 4; l++ {
			idx := int(b[2+4*ib+l]) | h<<(8-2*l)&0x300
			binary.LittleEndian.PutUint64(dst[32*ib+8*l:], iqPanel8(quant.IQ2SGrid[idx], iqSignMask[b[34+4*ib+l]]))
		}
		sc := uint32(b[74+ib])
		lo[ib], hi[ib] = 2*(sc&15)+1, 2*(sc>>4)+1
	}
	iqPanelScales(dst, &lo, &hi, kqF16(b[:]))
}

func iqPanelIQ3XXS(out, in []byte) {
	dst, b := (*iqPanelOut)(out), (*[iqIQ3XXSSize]byte)(in)
	var ls [8]uint32
	for ib := 0; ib < 8; ib++ {
		aux := binary.LittleEndian.Uint32(b[66+4*ib:])
		for l := 0; l < 4; l++ {
			g := uint64(quant.IQ3XXSGrid[b[2+8*ib+2*l]]) | uint64(quant.IQ3XXSGrid[b[3+8*ib+2*l]])<<32
			binary.LittleEndian.PutUint64(dst[32*ib+8*l:], iqPanel8(g, iqSignMask7[uint8(aux>>(7*l))&127]))
		}
		ls[ib] = 2*(aux>>28) + 1
	}
	iqPanelScales(dst, &ls, &ls, kqF16(b[:]))
}

func iqPanelIQ3S(out, in []byte) {
	dst, b := (*iqPanelOut)(out), (*[iqIQ3SSize]byte)(in)
	var ls [8]uint32
	for ib := 0; ib < 8; ib++ {
		h := int(b[66+ib])
		for l := 0; l < 4; l++ {
			i1 := int(b[2+8*ib+2*l]) | h<<(8-2*l)&256
			i2 := int(b[3+8*ib+2*l]) | h<<(7-2*l)&256
			g := uint64(quant.IQ3SGrid[i1]) | uint64(quant.IQ3SGrid[i2])<<32
			binary.LittleEndian.PutUint64(dst[32*ib+8*l:], iqPanel8(g, iqSignMask[b[74+4*ib+l]]))
		}
		ls[ib] = 2*uint32(b[106+ib/2]>>(4*(ib%2))&15) + 1
	}
	iqPanelScales(dst, &ls, &ls, kqF16(b[:]))
}
