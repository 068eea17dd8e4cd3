package quant

import "encoding/binary"

// The grid formats IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S and
// the ternary TQ1_0, TQ2_0. All are 256-value super-blocks. The IQ formats
// code groups of 8 (IQ3: 4) values as one index into a codebook of likely
// value patterns (iqgrid.go), plus signs and a small odd sub-block scale
// 2s+1. Layouts, in file order (u16 fields little-endian):
//
//	IQ2_XXS: d, qs[64]: per 32 values two u32s, the first four grid
//	         indices (bytes), the second four 7-bit sign indices and a
//	         4-bit scale in its top bits
//	IQ2_XS:  d, qs[32] u16 (9-bit grid index, 7-bit sign index),
//	         scales[8] (a nibble per 16 values)
//	IQ2_S:   d, qs[32] low 8 bits of 10-bit grid indices, signs[32] full
//	         8-bit sign masks, qh[8] (2 high bits per index), scales[8]
//	IQ3_XXS: d, qs[64] grid indices (4 values each), then per 32 values a
//	         u32 of four 7-bit sign indices and a 4-bit scale
//	IQ3_S:   d, qs[64] low bits of 9-bit indices, qh[8] high bits,
//	         signs[32] 8-bit masks, scales[4] (a nibble per 32 values)
//	IQ1_S:   d, qs[32] low 8 bits of 11-bit indices, qh[8] u16: per 32
//	         values 4x3 high index bits, a 3-bit scale, the delta's sign
//	IQ1_M:   qs[32], qh[16] (3 high index bits and a delta sign per 8
//	         values), scales[8]: four u16 of 3-bit scales whose top nibbles
//	         together are the f16 d
//	TQ1_0:   qs[48] five base-3 digits per byte, qh[4] four per byte, d
//	TQ2_0:   qs[64] 2-bit codes q standing for q-1, d
//
// The float operations follow ggml's dequantize_row_* in order and in
// float32, so every value rounds as llama.cpp's does; the sub-block scale
// is computed once, then multiplied by each value's magnitude, and a sign
// is applied last (exact).

func init() {
	dequantizers[IQ2_XXS] = dequantIQ2_XXS
	dequantizers[IQ2_XS] = dequantIQ2_XS
	dequantizers[IQ2_S] = dequantIQ2_S
	dequantizers[IQ3_XXS] = dequantIQ3_XXS
	dequantizers[IQ3_S] = dequantIQ3_S
	dequantizers[IQ1_S] = dequantIQ1_S
	dequantizers[IQ1_M] = dequantIQ1_M
	dequantizers[TQ1_0] = dequantTQ1_0
	dequantizers[TQ2_0] = dequantTQ2_0
}

// iqDelta is the shift IQ1_S and IQ1_M add to every grid value (its sign
// stored per group): it moves the ternary levels off the symmetric -1, 0, 1.
const iqDelta = 0.125

// signed8 writes db*magnitude for the 8 bytes of g, negated where the sign
// mask has a bit set.
func signed8(dst []float32, db float32, g uint64, signs uint8) {
	for k := 0; k < 8; k++ {
		v := db * float32(uint8(g>>(8*k)))
		if signs>>k&1 != 0 {
			v = -v
		}
		dst[k] = v
	}
}

func dequantIQ2_XXS(src []byte, dst []float32) {
	for len(src) >= 66 {
		b := src[:66]
		d := f16at(b)
		for ib := 0; ib < 8; ib++ {
			q := b[2+8*ib : 10+8*ib]
			aux := binary.LittleEndian.Uint32(q[4:])
			db := d * (0.5 + float32(aux>>28)) * 0.25
			for l := 0; l < 4; l++ {
				signed8(dst[32*ib+8*l:], db, IQ2XXSGrid[q[l]], IQSigns(uint8(aux>>(7*l))))
			}
		}
		src, dst = src[66:], dst[256:]
	}
}

func dequantIQ2_XS(src []byte, dst []float32) {
	for len(src) >= 74 {
		b := src[:74]
		d := f16at(b)
		for ib := 0; ib < 8; ib++ {
			sc := b[66+ib]
			db := [2]float32{d * (0.5 + float32(sc&15)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25}
			for l := 0; l < 4; l++ {
				q := le16(b[2+8*ib+2*l:])
				signed8(dst[32*ib+8*l:], db[l/2], IQ2XSGrid[q&511], IQSigns(uint8(q>>9)))
			}
		}
		src, dst = src[74:], dst[256:]
	}
}

func dequantIQ2_S(src []byte, dst []float32) {
	for len(src) >= 82 {
		b := src[:82]
		d := f16at(b)
		qs, signs, qh, scales := b[2:34], b[34:66], b[66:74], b[74:82]
		for ib := 0; ib < 8; ib++ {
			sc := scales[ib]
			db := [2]float32{d * (0.5 + float32(sc&15)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25}
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				signed8(dst[32*ib+8*l:], db[l/2], IQ2SGrid[idx], signs[4*ib+l])
			}
		}
		src, dst = src[82:], dst[256:]
	}
}

func dequantIQ3_XXS(src []byte, dst []float32) {
	for len(src) >= 98 {
		b := src[:98]
		d := f16at(b)
		qs, ss := b[2:66], b[66:98]
		for ib := 0; ib < 8; ib++ {
			aux := binary.LittleEndian.Uint32(ss[4*ib:])
			db := d * (0.5 + float32(aux>>28)) * 0.5
			for l := 0; l < 4; l++ {
				g := uint64(IQ3XXSGrid[qs[8*ib+2*l]]) | uint64(IQ3XXSGrid[qs[8*ib+2*l+1]])<<32
				signed8(dst[32*ib+8*l:], db, g, IQSigns(uint8(aux>>(7*l))))
			}
		}
		src, dst = src[98:], dst[256:]
	}
}

func dequantIQ3_S(src []byte, dst []float32) {
	for len(src) >= 110 {
		b := src[:110]
		d := f16at(b)
		qs, qh, signs, scales := b[2:66], b[66:74], b[74:106], b[106:110]
		for ib := 0; ib < 8; ib++ {
			db := d * float32(1+2*int32(scales[ib/2]>>(4*(ib%2))&15))
			h := int(qh[ib])
			for l := 0; l < 4; l++ {
				i1 := int(qs[8*ib+2*l]) | h<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | h<<(7-2*l)&256
				g := uint64(IQ3SGrid[i1]) | uint64(IQ3SGrid[i2])<<32
				signed8(dst[32*ib+8*l:], db, g, signs[4*ib+l])
			}
		}
		src, dst = src[110:], dst[256:]
	}
}

// iq1Group writes dl*(grid value + delta) for one 8-value group.
func iq1Group(dst []float32, dl float32, g uint64, delta float32) {
	for k := 0; k < 8; k++ {
		dst[k] = dl * (float32(int8(g>>(8*k))) + delta)
	}
}

func dequantIQ1_S(src []byte, dst []float32) {
	for len(src) >= 50 {
		b := src[:50]
		d := f16at(b)
		qs := b[2:34]
		for ib := 0; ib < 8; ib++ {
			h := le16(b[34+2*ib:])
			dl := d * float32(2*(h>>12&7)+1)
			delta := float32(iqDelta)
			if h&0x8000 != 0 {
				delta = -iqDelta
			}
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(h>>(3*l)&7)<<8
				iq1Group(dst[32*ib+8*l:], dl, IQ1SGrid[idx], delta)
			}
		}
		src, dst = src[50:], dst[256:]
	}
}

// IQ1MScale assembles an IQ1_M block's f16 scale from the top nibbles of
// its four scale words (scales at byte 48 of the block).
func IQ1MScale(scales []byte) uint16 {
	s0, s1, s2, s3 := le16(scales), le16(scales[2:]), le16(scales[4:]), le16(scales[6:])
	return s0>>12 | s1>>8&0x00f0 | s2>>4&0x0f00 | s3&0xf000
}

func dequantIQ1_M(src []byte, dst []float32) {
	for len(src) >= 56 {
		b := src[:56]
		qs, qh, sc := b[0:32], b[32:48], b[48:56]
		d := F16ToF32(IQ1MScale(sc))
		for ib := 0; ib < 8; ib++ {
			w := le16(sc[2*(ib/2):])
			sh := 6 * uint(ib%2)
			dl := [2]float32{d * float32(2*(w>>sh&7)+1), d * float32(2*(w>>(sh+3)&7)+1)}
			for l := 0; l < 4; l++ {
				h := qh[2*ib+l/2] >> (4 * uint(l%2)) // index bits 0-2, delta sign bit 3
				idx := int(qs[4*ib+l]) | int(h&7)<<8
				delta := float32(iqDelta)
				if h&8 != 0 {
					delta = -iqDelta
				}
				iq1Group(dst[32*ib+8*l:], dl[l/2], IQ1SGrid[idx], delta)
			}
		}
		src, dst = src[56:], dst[256:]
	}
}

// TQ1Digit returns base-3 digit n (0 the most significant) of a TQ1_0 byte.
// The byte stores a 5-digit (4 for qh) base-3 number as a fixed-point
// fraction of 256 (rounded up when packed): multiplying by 3^n, wrapping
// to 8 bits, moves digit n to the top, and times 3 over 256 extracts it.
func TQ1Digit(q uint8, n int) int32 {
	p := q * [5]uint8{1, 3, 9, 27, 81}[n]
	return int32(uint16(p) * 3 >> 8)
}

// TQ1_0's 256 values: bytes 0-31 give five runs of 32 (digit n of byte m is
// value 32n+m), bytes 32-47 five runs of 16 from 160, qh four runs of 4
// from 240.
func dequantTQ1_0(src []byte, dst []float32) {
	for len(src) >= 54 {
		b := src[:54]
		d := f16at(b[52:])
		for n := 0; n < 5; n++ {
			for m := 0; m < 32; m++ {
				dst[32*n+m] = float32(TQ1Digit(b[m], n)-1) * d
			}
			for m := 0; m < 16; m++ {
				dst[160+16*n+m] = float32(TQ1Digit(b[32+m], n)-1) * d
			}
		}
		for n := 0; n < 4; n++ {
			for j := 0; j < 4; j++ {
				dst[240+4*n+j] = float32(TQ1Digit(b[48+j], n)-1) * d
			}
		}
		src, dst = src[54:], dst[256:]
	}
}

// TQ2_0: each 32-byte half gives four runs of 32 values, bit pair l of
// byte m being value 32l+m of the half.
func dequantTQ2_0(src []byte, dst []float32) {
	for len(src) >= 66 {
		b := src[:66]
		d := f16at(b[64:])
		for h := 0; h < 2; h++ {
			for l := 0; l < 4; l++ {
				for m := 0; m < 32; m++ {
					dst[128*h+32*l+m] = float32(int32(b[32*h+m]>>(2*l)&3)-1) * d
				}
			}
		}
		src, dst = src[66:], dst[256:]
	}
}
