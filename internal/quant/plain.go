package quant

import "encoding/binary"

// The plain float types are one value per "block"; they go through the same
// entry points so callers need not special-case them.

func init() {
	dequantizers[F32] = func(src []byte, dst []float32) {
		for i := range dst {
			dst[i] = f32at(src[4*i:])
		}
	}
	dequantizers[F16] = func(src []byte, dst []float32) {
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	dequantizers[BF16] = func(src []byte, dst []float32) {
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	quantizers[F32] = func(src []float32, dst []byte) {
		for i, v := range src {
			putF32(dst[4*i:], v)
		}
	}
	quantizers[F16] = func(src []float32, dst []byte) {
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	}
	quantizers[BF16] = func(src []float32, dst []byte) {
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	}
}
