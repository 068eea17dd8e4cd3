package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// The Q5_0 x8 layout. A group of eight rows keeps, for each 32-value
// block b, 176 bytes (eight plain 22-byte blocks' worth) at b*176:
//
//	[0:16)    d of rows 0..7, f16, row r at 2r
//	[16:48)   the fifth bits, row r's at 16+4r, rearranged so that a
//	          chunk's are one shift away: bit k of byte i is the plain
//	          qh bit 4k+i (value 4k+i, a low nibble of chunk k), bit 4+k
//	          of byte i the qh bit 16+4k+i (its high nibble's value)
//	[48:176)  the codes as Q4_0's x8 layout has them: chunk k (row r's
//	          plain qs[4k:4k+4]) 32 bytes at 48+32k, row r at 4r
//
// Byte i of a row's chunk k then meets its two fifth bits at bit 4 by
// shifting the row's bits left by 4-k (low nibble) or right by k (high).
const (
	q50Block   = 22
	q50X8Block = 8 * q50Block
)

func init() {
	x8Generic[quant.Q5_0] = &x8Format{name: "generic", act: quant.Q8_0, block: q50Block,
		pack: packQ50X8, unpack: unpackQ50X8, dot8: dotQ50X8Ref, ref: dotQ50Canon}
}

// q50Spread is the x8 layout's fifth bits of a row from its plain qh:
// plain bit 4k+i goes to bit 8i+k, and plain bit 16+4k+i to 8i+4+k (two
// transposes of 4x4 bits), a nibble of qh at a time through q50Bytes.
func q50Spread(qh uint32) uint32 {
	var hb uint32
	for k := 0; k < 4; k++ {
		hb |= q50Bytes[qh>>(4*k)&15] << k
		hb |= q50Bytes[qh>>(16+4*k)&15] << (4 + k)
	}
	return hb
}

// q50Gather is q50Spread's inverse.
func q50Gather(hb uint32) uint32 {
	var qh uint32
	for i := 0; i < 4; i++ {
		qh |= q50Nibbles[hb>>(8*i)&15] << i
		qh |= q50Nibbles[hb>>(8*i+4)&15] << (16 + i)
	}
	return qh
}

// q50Bytes[n] has bit 8i set for each bit i of n, q50Nibbles[n] bit 4k
// for each bit k of n.
var q50Bytes, q50Nibbles = func() (b, n [16]uint32) {
	for v := range 16 {
		for i := range 4 {
			if v>>i&1 != 0 {
				b[v] |= 1 << (8 * i)
				n[v] |= 1 << (4 * i)
			}
		}
	}
	return b, n
}()

func packQ50X8(dst, src []byte, nb int) {
	rb := nb * q50Block
	for b := 0; b < nb; b++ {
		o := dst[b*q50X8Block : (b+1)*q50X8Block]
		for r := 0; r < 8; r++ {
			s := src[r*rb+b*q50Block : r*rb+(b+1)*q50Block]
			o[2*r], o[2*r+1] = s[0], s[1]
			binary.LittleEndian.PutUint32(o[16+4*r:], q50Spread(binary.LittleEndian.Uint32(s[2:])))
			scatter4(o[48:], s[6:], r, 4)
		}
	}
}

func unpackQ50X8(dst, src []byte, nb int) {
	rb := nb * q50Block
	for b := 0; b < nb; b++ {
		o := src[b*q50X8Block : (b+1)*q50X8Block]
		for r := 0; r < 8; r++ {
			s := dst[r*rb+b*q50Block : r*rb+(b+1)*q50Block]
			s[0], s[1] = o[2*r], o[2*r+1]
			binary.LittleEndian.PutUint32(s[2:], q50Gather(binary.LittleEndian.Uint32(o[16+4*r:])))
			gather4(s[6:], o[48:], r, 4)
		}
	}
}

// dotQ50Canon is the Q5_0 row dot in the x8 kernels' arithmetic on a
// plain row: each block's exact integer sum of (q-16)*x, then Q4_0's
// float step (q40Combine).
func dotQ50Canon(n int, w, x []byte) float32 {
	nb := n / 32
	if n%32 != 0 || len(w) < nb*q50Block || len(x) < nb*q80Block {
		panic("kernels: Q5_0 dot operand shorter than n values")
	}
	var acc float32
	for b := 0; b < nb; b++ {
		wb, xb := w[q50Block*b:q50Block*(b+1)], x[q80Block*b:q80Block*(b+1)]
		qh := binary.LittleEndian.Uint32(wb[2:])
		var isum int32
		for j := 0; j < 16; j++ {
			q := wb[6+j]
			lo := int32(q&15) | int32((qh>>j)&1)<<4
			hi := int32(q>>4) | int32((qh>>(j+16))&1)<<4
			isum += (lo - 16) * int32(int8(xb[2+j]))
			isum += (hi - 16) * int32(int8(xb[18+j]))
		}
		acc = q40Combine(acc, kqF16(wb), kqF16(xb), isum)
	}
	return acc
}

// dotQ50X8Ref is dot8 in Go: the oracle of the assembly kernels.
func dotQ50X8Ref(nb int, w, x []byte, dst *[8]float32) {
	var acc [8]float32
	for b := 0; b < nb; b++ {
		o, xb := w[b*q50X8Block:(b+1)*q50X8Block], x[q80Block*b:q80Block*(b+1)]
		for r := 0; r < 8; r++ {
			qh := q50Gather(binary.LittleEndian.Uint32(o[16+4*r:]))
			var isum int32
			for k := 0; k < 4; k++ {
				for i := 0; i < 4; i++ {
					q := o[48+32*k+4*r+i]
					j := 4*k + i
					lo := int32(q&15) | int32((qh>>j)&1)<<4
					hi := int32(q>>4) | int32((qh>>(j+16))&1)<<4
					isum += (lo - 16) * int32(int8(xb[2+j]))
					isum += (hi - 16) * int32(int8(xb[18+j]))
				}
			}
			acc[r] = q40Combine(acc[r], kqF16(o[2*r:]), kqF16(xb), isum)
		}
	}
	*dst = acc
}

// q50Aux is q40Aux for Q5_0: 16*sum(x) and dx of each block.
func q50Aux(nb int, x []byte, aux []byte) { q80SumsAux(16, nb, x, aux) }
