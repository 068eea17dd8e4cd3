package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// Pure-Go references for the grid formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S) and the ternary TQ1_0, TQ2_0, all against Q8_K
// activations as llama.cpp's CPU backend takes them. Each follows ggml's
// scalar vec_dot: exact integer sums per block, the odd sub-block scales
// 2s+1 applied in integers, then one float32 multiply-add per block with the
// product of the two block scales; the constant factor the grids carry
// (1/8 for IQ2, 1/4 for IQ3_XXS, the 1/8 delta of IQ1) is applied as ggml
// applies it. The block layouts are described in quant/iqlow.go.

// Super-block sizes in bytes.
const (
	iqIQ2XXSSize = 66
	iqIQ2XSSize  = 74
	iqIQ2SSize   = 82
	iqIQ3XXSSize = 98
	iqIQ3SSize   = 110
	iqIQ1SSize   = 50
	iqIQ1MSize   = 56
	iqTQ1Size    = 54
	iqTQ2Size    = 66
)

func init() {
	for _, r := range []struct {
		t   quant.Type
		dot func(n int, w, x []byte) float32
	}{
		{quant.IQ2_XXS, dotIQ2XXSRef}, {quant.IQ2_XS, dotIQ2XSRef}, {quant.IQ2_S, dotIQ2SRef},
		{quant.IQ3_XXS, dotIQ3XXSRef}, {quant.IQ3_S, dotIQ3SRef},
		{quant.IQ1_S, dotIQ1SRef}, {quant.IQ1_M, dotIQ1MRef},
		{quant.TQ1_0, dotTQ1Ref}, {quant.TQ2_0, dotTQ2Ref},
	} {
		registerGeneric(r.t, &dotImpl{name: "generic", act: quant.Q8_K, dot: r.dot})
	}
}

// iqSigned8 is the integer dot of 8 grid magnitudes (bytes of g) with 8
// activations, each product negated where its bit in signs is set.
func iqSigned8(g uint64, signs uint8, q8 []byte) int32 {
	var s int32
	for k := 0; k < 8; k++ {
		p := int32(uint8(g>>(8*k))) * int32(int8(q8[k]))
		if signs>>k&1 != 0 {
			p = -p
		}
		s += p
	}
	return s
}

// iqInt8 is the integer dot of 8 signed grid values (IQ1) with 8 activations.
func iqInt8(g uint64, q8 []byte) int32 {
	var s int32
	for k := 0; k < 8; k++ {
		s += int32(int8(g>>(8*k))) * int32(int8(q8[k]))
	}
	return s
}

func dotIQ2XXSRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ2XXSSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ2XXSSize : (i+1)*iqIQ2XXSSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			q := b[2+8*ib : 10+8*ib]
			aux := binary.LittleEndian.Uint32(q[4:])
			var s int32
			for l := 0; l < 4; l++ {
				s += iqSigned8(quant.IQ2XXSGrid[q[l]], quant.IQSigns(uint8(aux>>(7*l))), q8[32*ib+8*l:])
			}
			bsum += s * int32(2*(aux>>28)+1)
		}
		sumf += kqF16(b) * kqF32(y) * float32(bsum)
	}
	return 0.125 * sumf
}

func dotIQ2XSRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ2XSSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ2XSSize : (i+1)*iqIQ2XSSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			sc := b[66+ib]
			var s [2]int32
			for l := 0; l < 4; l++ {
				q := binary.LittleEndian.Uint16(b[2+8*ib+2*l:])
				s[l/2] += iqSigned8(quant.IQ2XSGrid[q&511], quant.IQSigns(uint8(q>>9)), q8[32*ib+8*l:])
			}
			bsum += s[0]*int32(2*(sc&15)+1) + s[1]*int32(2*(sc>>4)+1)
		}
		sumf += kqF16(b) * kqF32(y) * float32(bsum)
	}
	return 0.125 * sumf
}

func dotIQ2SRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ2SSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ2SSize : (i+1)*iqIQ2SSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		qs, signs, qh, scales := b[2:34], b[34:66], b[66:74], b[74:82]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			var s [2]int32
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				s[l/2] += iqSigned8(quant.IQ2SGrid[idx], signs[4*ib+l], q8[32*ib+8*l:])
			}
			sc := scales[ib]
			bsum += s[0]*int32(2*(sc&15)+1) + s[1]*int32(2*(sc>>4)+1)
		}
		sumf += kqF16(b) * kqF32(y) * float32(bsum)
	}
	return 0.125 * sumf
}

func dotIQ3XXSRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ3XXSSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ3XXSSize : (i+1)*iqIQ3XXSSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		qs, ss := b[2:66], b[66:98]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			aux := binary.LittleEndian.Uint32(ss[4*ib:])
			var s int32
			for l := 0; l < 4; l++ {
				g := uint64(quant.IQ3XXSGrid[qs[8*ib+2*l]]) | uint64(quant.IQ3XXSGrid[qs[8*ib+2*l+1]])<<32
				s += iqSigned8(g, quant.IQSigns(uint8(aux>>(7*l))), q8[32*ib+8*l:])
			}
			bsum += s * int32(2*(aux>>28)+1)
		}
		sumf += kqF16(b) * kqF32(y) * float32(bsum)
	}
	return 0.25 * sumf
}

func dotIQ3SRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ3SSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ3SSize : (i+1)*iqIQ3SSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		qs, qh, signs, scales := b[2:66], b[66:74], b[74:106], b[106:110]
		var bsum int32
		for ib := 0; ib < 8; ib++ {
			h := int(qh[ib])
			var s int32
			for l := 0; l < 4; l++ {
				i1 := int(qs[8*ib+2*l]) | h<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | h<<(7-2*l)&256
				g := uint64(quant.IQ3SGrid[i1]) | uint64(quant.IQ3SGrid[i2])<<32
				s += iqSigned8(g, signs[4*ib+l], q8[32*ib+8*l:])
			}
			bsum += s * int32(2*(scales[ib/2]>>(4*(ib%2))&15)+1)
		}
		sumf += kqF16(b) * kqF32(y) * float32(bsum)
	}
	return sumf
}

// The IQ1 formats add a delta of +-1/8 to every grid value of a group; its
// share of the dot is delta times the activations' sum, which Q8_K's bsums
// hold per 16 values. isum = 8*(grid part) + (delta part, in units of 1/8)
// is an exact integer (below 2^23), so scaling it by 1/8 in float32 gives
// exactly ggml's sumi + IQ1S_DELTA*sumi1.

func dotIQ1SRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ1SSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ1SSize : (i+1)*iqIQ1SSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		qs := b[2:34]
		var sumi, sumi1 int32
		for ib := 0; ib < 8; ib++ {
			h := binary.LittleEndian.Uint16(b[34+2*ib:])
			ls := int32(2*(h>>12&7) + 1)
			var s int32
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(h>>(3*l)&7)<<8
				s += iqInt8(quant.IQ1SGrid[idx], q8[32*ib+8*l:])
			}
			bs := kqI16(y[kqQ8KBsums+4*ib:]) + kqI16(y[kqQ8KBsums+4*ib+2:])
			if h&0x8000 != 0 {
				bs = -bs
			}
			sumi += ls * s
			sumi1 += ls * bs
		}
		sumf += kqF16(b) * kqF32(y) * (float32(8*sumi+sumi1) * 0.125)
	}
	return sumf
}

func dotIQ1MRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqIQ1MSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqIQ1MSize : (i+1)*iqIQ1MSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		qs, qh, sc := b[0:32], b[32:48], b[48:56]
		var sumi1, sumi2 int32
		for ib := 0; ib < 8; ib++ {
			wd := binary.LittleEndian.Uint16(sc[2*(ib/2):])
			sh := 6 * uint(ib%2)
			ls := [2]int32{int32(2*(wd>>sh&7) + 1), int32(2*(wd>>(sh+3)&7) + 1)}
			for l := 0; l < 4; l++ {
				hb := qh[2*ib+l/2] >> (4 * uint(l%2))
				idx := int(qs[4*ib+l]) | int(hb&7)<<8
				g := q8[32*ib+8*l : 32*ib+8*l+8]
				var sum int32
				for _, v := range g {
					sum += int32(int8(v))
				}
				if hb&8 != 0 {
					sum = -sum
				}
				sumi1 += ls[l/2] * iqInt8(quant.IQ1SGrid[idx], g)
				sumi2 += ls[l/2] * sum
			}
		}
		d := quant.F16ToF32(quant.IQ1MScale(sc))
		sumf += d * kqF32(y) * (float32(8*sumi1+sumi2) * 0.125)
	}
	return sumf
}

// TQ1_0 and TQ2_0 values are q-1 for a digit q in 0..2 (TQ2_0 also
// decodes 3 as +2, never written by ggml but read the same everywhere).

func dotTQ1Ref(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqTQ1Size)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqTQ1Size : (i+1)*iqTQ1Size]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var sum int32
		for k := 0; k < 5; k++ {
			for m := 0; m < 32; m++ {
				sum += (quant.TQ1Digit(b[m], k) - 1) * int32(int8(q8[32*k+m]))
			}
			for m := 0; m < 16; m++ {
				sum += (quant.TQ1Digit(b[32+m], k) - 1) * int32(int8(q8[160+16*k+m]))
			}
		}
		for k := 0; k < 4; k++ {
			for j := 0; j < 4; j++ {
				sum += (quant.TQ1Digit(b[48+j], k) - 1) * int32(int8(q8[240+4*k+j]))
			}
		}
		sumf += float32(sum) * (kqF16(b[52:]) * kqF32(y))
	}
	return sumf
}

func dotTQ2Ref(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, iqTQ2Size)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*iqTQ2Size : (i+1)*iqTQ2Size]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var sum int32
		for e := 0; e < 256; e++ {
			// Value e: half e/128, bit pair (e/32)%4 of byte 32*(e/128) + e%32.
			q := int32(b[32*(e/128)+e%32]>>(2*((e/32)%4))&3) - 1
			sum += q * int32(int8(q8[e]))
		}
		sumf += float32(sum) * (kqF32(y) * kqF16(b[64:]))
	}
	return sumf
}
