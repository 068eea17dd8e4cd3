package quant

import "encoding/binary"

// The "legacy" 32-value formats. Low nibbles hold values 0..15 of a block and
// high nibbles values 16..31; Q5 keeps the fifth bits in a 32-bit mask.
//
//	Q4_0: f16 d, 16 bytes nibbles            value = d*(q-8)
//	Q4_1: f16 d, f16 m, 16 bytes nibbles     value = d*q + m
//	Q5_0: f16 d, u32 qh, 16 bytes nibbles    value = d*(q-16)
//	Q5_1: f16 d, f16 m, u32 qh, 16 bytes     value = d*q + m
//
// Products are converted to float32 before adding so the compiler cannot
// fuse them into an FMA, which would round differently from ggml.

func init() {
	dequantizers[Q4_0] = dequantQ4_0
	dequantizers[Q4_1] = dequantQ4_1
	dequantizers[Q5_0] = dequantQ5_0
	dequantizers[Q5_1] = dequantQ5_1
}

func dequantQ4_0(src []byte, dst []float32) {
	for len(src) >= 18 {
		d := f16at(src)
		q := src[2:18]
		lo, hi := dst[:16], dst[16:32]
		for j, b := range q {
			lo[j] = float32(int32(b&15)-8) * d
			hi[j] = float32(int32(b>>4)-8) * d
		}
		src, dst = src[18:], dst[32:]
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for len(src) >= 20 {
		d, m := f16at(src), f16at(src[2:])
		q := src[4:20]
		lo, hi := dst[:16], dst[16:32]
		for j, b := range q {
			lo[j] = float32(float32(b&15)*d) + m
			hi[j] = float32(float32(b>>4)*d) + m
		}
		src, dst = src[20:], dst[32:]
	}
}

func dequantQ5_0(src []byte, dst []float32) {
	for len(src) >= 22 {
		d := f16at(src)
		qh := binary.LittleEndian.Uint32(src[2:])
		q := src[6:22]
		lo, hi := dst[:16], dst[16:32]
		for j, b := range q {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			lo[j] = float32((int32(b&15)|h0)-16) * d
			hi[j] = float32((int32(b>>4)|h1)-16) * d
		}
		src, dst = src[22:], dst[32:]
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for len(src) >= 24 {
		d, m := f16at(src), f16at(src[2:])
		qh := binary.LittleEndian.Uint32(src[4:])
		q := src[8:24]
		lo, hi := dst[:16], dst[16:32]
		for j, b := range q {
			h0 := uint32(qh>>j&1) << 4
			h1 := uint32(qh>>(j+16)&1) << 4
			lo[j] = float32(float32(uint32(b&15)|h0)*d) + m
			hi[j] = float32(float32(uint32(b>>4)|h1)*d) + m
		}
		src, dst = src[24:], dst[32:]
	}
}
