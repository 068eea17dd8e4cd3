package kernels

import (
	"math"

	"braid/internal/quant"
)

// Pure-Go references for the K-quant (and IQ4_XS) dot products against Q8_K
// activations. They are the oracle for the assembly kernels, so they favour
// plain per-block integer sums over speed: every block's integer sum is
// exact, and only the combination with the block scales is in float32, in
// block order, as in llama.cpp's scalar code.

// Byte sizes and field offsets of the ggml super-block layouts (QK_K = 256).
const (
	kqQ8KSize   = 292 // float32 d, int8 qs[256], int16 bsums[16]
	kqQ8KQS     = 4
	kqQ8KBsums  = 260
	kqQ2KSize   = 84  // scales[16], qs[64], f16 d, f16 dmin
	kqQ3KSize   = 110 // hmask[32], qs[64], scales[12], f16 d
	kqQ4KSize   = 144 // f16 d, f16 dmin, scales[12], qs[128]
	kqQ5KSize   = 176 // f16 d, f16 dmin, scales[12], qh[32], qs[128]
	kqQ6KSize   = 210 // ql[128], qh[64], int8 scales[16], f16 d
	kqIQ4XSSize = 136 // f16 d, u16 scales_h, scales_l[4], qs[128]
)

// kqIQ4Values is ggml's kvalues_iq4nl: the non-linear 4-bit codebook of
// IQ4_NL and IQ4_XS.
var kqIQ4Values = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func init() {
	registerGeneric(quant.Q2_K, &dotImpl{name: "generic", act: quant.Q8_K, dot: dotQ2KRef})
	registerGeneric(quant.Q3_K, &dotImpl{name: "generic", act: quant.Q8_K, dot: dotQ3KRef})
	registerGeneric(quant.Q4_K, &dotImpl{name: "generic", act: quant.Q8_K, dot: dotQ4KRef})
	registerGeneric(quant.Q5_K, &dotImpl{name: "generic", act: quant.Q8_K, dot: dotQ5KRef})
	registerGeneric(quant.Q6_K, &dotImpl{name: "generic", act: quant.Q8_K, dot: dotQ6KRef})
	registerGeneric(quant.IQ4_XS, &dotImpl{name: "generic", act: quant.Q8_K, dot: dotIQ4XSRef})
}

func kqF16(b []byte) float32 { return quant.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }

func kqF32(b []byte) float32 {
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

func kqI16(b []byte) int32 { return int32(int16(uint16(b[0]) | uint16(b[1])<<8)) }

// kqScaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K/Q5_K block's
// 12 scale bytes (ggml's get_scale_min_k4): the first four pairs sit in the
// low 6 bits of bytes 0-7, the last four are split into nibbles of bytes
// 8-11 plus the top 2 bits of bytes 0-7.
func kqScaleMinK4(j int, q []byte) (sc, m int32) {
	if j < 4 {
		return int32(q[j] & 63), int32(q[j+4] & 63)
	}
	sc = int32(q[j+4]&0x0f) | int32(q[j-4]>>6)<<4
	m = int32(q[j+4]>>4) | int32(q[j]>>6)<<4
	return sc, m
}

// kqBlocks checks the lengths once so the loops below index without
// surprises: a short slice is a caller bug and panics here with a reason.
func kqBlocks(n int, w, x []byte, wsize int) int {
	if n%256 != 0 {
		panic("kernels: K-quant dot length is not a multiple of 256")
	}
	nb := n / 256
	if len(w) < nb*wsize || len(x) < nb*kqQ8KSize {
		panic("kernels: K-quant dot operand shorter than n values")
	}
	return nb
}

func dotQ2KRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqQ2KSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*kqQ2KSize : (i+1)*kqQ2KSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		sc, qs := b[0:16], b[16:80]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var summs int32
		for j := 0; j < 16; j++ {
			summs += kqI16(y[kqQ8KBsums+2*j:]) * int32(sc[j]>>4)
		}
		var isum int32
		for e := 0; e < 256; e++ {
			// Element e lives in byte 32*(e/128) + e%32, bit pair (e/32)%4.
			q := int32(qs[32*(e/128)+e%32]>>(2*((e/32)%4))) & 3
			isum += int32(sc[e/16]&0x0f) * q * int32(int8(q8[e]))
		}
		yd := kqF32(y)
		sumf += yd*kqF16(b[80:])*float32(isum) - yd*kqF16(b[82:])*float32(summs)
	}
	return sumf
}

func dotQ3KRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqQ3KSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*kqQ3KSize : (i+1)*kqQ3KSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		hm, qs, sb := b[0:32], b[32:96], b[96:108]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var isum int32
		for g := 0; g < 16; g++ {
			// 6-bit scale: low nibble from bytes 0-7, high 2 bits from bytes 8-11.
			lo := sb[g%8] & 0x0f
			if g >= 8 {
				lo = sb[g%8] >> 4
			}
			s := int32(lo|((sb[8+g%4]>>(2*(g/4)))&3)<<4) - 32
			var gs int32
			for e := 16 * g; e < 16*g+16; e++ {
				l, k, s2 := e%32, e/128, (e/32)%4
				q := int32(qs[32*k+l]>>(2*s2)) & 3
				if hm[l]&(1<<(4*k+s2)) == 0 {
					q -= 4
				}
				gs += q * int32(int8(q8[e]))
			}
			isum += s * gs
		}
		sumf += kqF32(y) * kqF16(b[108:]) * float32(isum)
	}
	return sumf
}

// dotQ4KRef is the Q4_K reference: the x8 kernels' canonical arithmetic
// (dotQ4KCanon, llama.cpp's scalar order made fusion-proof), one oracle for
// both layouts.
func dotQ4KRef(n int, w, x []byte) float32 { return dotQ4KCanon(n, w, x) }

// dotQ5KRef is the Q5_K reference: the x8 kernels' canonical arithmetic
// (dotQ5KCanon), as for Q4_K.
func dotQ5KRef(n int, w, x []byte) float32 { return dotQ5KCanon(n, w, x) }

func dotQ6KRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqQ6KSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*kqQ6KSize : (i+1)*kqQ6KSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		ql, qh, sc := b[0:128], b[128:192], b[192:208]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		var isum int32
		for g := 0; g < 16; g++ {
			var s int32
			for e := 16 * g; e < 16*g+16; e++ {
				// Each 128-value half: quarter s takes low (s<2) or high
				// nibbles of ql[64h + 32(s%2) + l] and bits 2s..2s+1 of qh[32h + l].
				h, s2, l := e/128, (e/32)%4, e%32
				lo := ql[64*h+32*(s2%2)+l] >> (4 * uint(s2/2)) & 0x0f
				hi := qh[32*h+l] >> (2 * uint(s2)) & 3
				q := int32(lo|hi<<4) - 32
				s += q * int32(int8(q8[e]))
			}
			isum += int32(int8(sc[g])) * s
		}
		sumf += kqF32(y) * kqF16(b[208:]) * float32(isum)
	}
	return sumf
}

func dotIQ4XSRef(n int, w, x []byte) float32 {
	nb := kqBlocks(n, w, x, kqIQ4XSSize)
	var sumf float32
	for i := 0; i < nb; i++ {
		b := w[i*kqIQ4XSSize : (i+1)*kqIQ4XSSize]
		y := x[i*kqQ8KSize : (i+1)*kqQ8KSize]
		q8 := y[kqQ8KQS : kqQ8KQS+256]
		sh := uint16(b[2]) | uint16(b[3])<<8
		var isum int32
		for j := 0; j < 8; j++ {
			ls := int32(b[4+j/2]>>(4*uint(j%2))&0x0f) | int32(sh>>(2*uint(j))&3)<<4
			qs := b[8+16*j : 8+16*j+16]
			var s int32
			for l := 0; l < 16; l++ {
				s += int32(kqIQ4Values[qs[l]&0x0f]) * int32(int8(q8[32*j+l]))
				s += int32(kqIQ4Values[qs[l]>>4]) * int32(int8(q8[32*j+16+l]))
			}
			isum += (ls - 32) * s
		}
		sumf += kqF32(y) * kqF16(b[0:]) * float32(isum)
	}
	return sumf
}

// kqWrap adapts an assembly kernel to the dotImpl signature, checking the
// operand lengths in Go so the assembly never reads past a slice.
func kqWrap(k func(w, x *byte, nb int) float32, wsize int) func(n int, w, x []byte) float32 {
	return func(n int, w, x []byte) float32 {
		nb := kqBlocks(n, w, x, wsize)
		if nb == 0 {
			return 0
		}
		return k(&w[0], &x[0], nb)
	}
}
