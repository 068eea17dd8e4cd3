package quant

import (
	"encoding/binary"
	"math"
)

// IQ4NLValues is the non-linear 4-bit codebook of IQ4_NL and IQ4_XS
// (ggml's kvalues_iq4nl): a nibble q stands for scale*IQ4NLValues[q]. The
// levels are denser near zero, where most weights are.
var IQ4NLValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// MXFP4Values is the FP4 (E2M1) codebook of MXFP4 and NVFP4, doubled so every
// level is an integer (ggml's kvalues_mxfp4); the block scales
// (E8M0ToF32Half, UE4M3ToF32Half) carry the compensating factor 1/2.
// Index bit 3 is the sign.
var MXFP4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0ToF32Half decodes an MXFP4 block's E8M0 exponent e to 2^(e-128): half
// the scale 2^(e-127), to go with the doubled MXFP4Values. e = 0 and 1 give
// float32 subnormals; NaN (0xff) is not special-cased, as in ggml.
func E8M0ToF32Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// UE4M3ToF32Half decodes an NVFP4 sub-block scale, an unsigned FP8 with 4
// exponent bits (bias 7) and 3 mantissa bits, to half its value (again for
// the doubled MXFP4Values). Bit 7 is ignored; 0x7f, E4M3's NaN, decodes to 0
// as in ggml.
func UE4M3ToF32Half(x uint8) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	exp := int(x>>3) & 15
	man := float32(x & 7)
	if exp == 0 {
		return man * (1.0 / 1024) // man * 2^-9 / 2
	}
	return float32(math.Ldexp(float64(1+man/8), exp-8))
}

func init() {
	dequantizers[IQ4_NL] = dequantIQ4_NL
	dequantizers[IQ4_XS] = dequantIQ4_XS
	dequantizers[MXFP4] = dequantMXFP4
	dequantizers[NVFP4] = dequantNVFP4
}

// IQ4_NL: f16 d, 16 bytes of nibbles indexing IQ4NLValues (low nibbles are
// values 0..15, high nibbles 16..31).
func dequantIQ4_NL(src []byte, dst []float32) {
	for len(src) >= 18 {
		d := f16at(src)
		lo, hi := dst[:16], dst[16:32]
		for j, b := range src[2:18] {
			lo[j] = d * float32(IQ4NLValues[b&15])
			hi[j] = d * float32(IQ4NLValues[b>>4])
		}
		src, dst = src[18:], dst[32:]
	}
}

// IQ4_XS: f16 d, u16 scales_h, scales_l[4], qs[128]: eight 32-value
// sub-blocks with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h,
// offset by 32), each laid out like an IQ4_NL block.
func dequantIQ4_XS(src []byte, dst []float32) {
	for len(src) >= 136 {
		b := src[:136]
		d := f16at(b)
		sh := binary.LittleEndian.Uint16(b[2:])
		sl := b[4:8]
		for ib := 0; ib < 8; ib++ {
			ls := int32(sl[ib/2]>>(4*(ib%2))&15) | int32(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			q := b[8+16*ib : 8+16*ib+16]
			lo, hi := dst[32*ib:32*ib+16], dst[32*ib+16:32*ib+32]
			for j, v := range q {
				lo[j] = dl * float32(IQ4NLValues[v&15])
				hi[j] = dl * float32(IQ4NLValues[v>>4])
			}
		}
		src, dst = src[136:], dst[256:]
	}
}

// MXFP4: one E8M0 exponent byte, 16 bytes of FP4 nibbles (low nibbles are
// values 0..15, high 16..31).
func dequantMXFP4(src []byte, dst []float32) {
	for len(src) >= 17 {
		d := E8M0ToF32Half(src[0])
		lo, hi := dst[:16], dst[16:32]
		for j, b := range src[1:17] {
			lo[j] = float32(MXFP4Values[b&15]) * d
			hi[j] = float32(MXFP4Values[b>>4]) * d
		}
		src, dst = src[17:], dst[32:]
	}
}

// NVFP4: 64 values as four 16-value sub-blocks; four UE4M3 scale bytes, then
// 8 bytes of FP4 nibbles per sub-block (low nibbles first half, high second).
func dequantNVFP4(src []byte, dst []float32) {
	for len(src) >= 36 {
		for s := 0; s < 4; s++ {
			d := UE4M3ToF32Half(src[s])
			q := src[4+8*s : 4+8*s+8]
			lo, hi := dst[16*s:16*s+8], dst[16*s+8:16*s+16]
			for j, b := range q {
				lo[j] = float32(MXFP4Values[b&15]) * d
				hi[j] = float32(MXFP4Values[b>>4]) * d
			}
		}
		src, dst = src[36:], dst[64:]
	}
}
