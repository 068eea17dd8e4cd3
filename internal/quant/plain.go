package quant

import (
	"encoding/binary"
	"sync"
)

// The plain float types are one value per "block"; they go through the same
// entry points so callers need not special-case them.

func init() {
	dequantizers[F32] = func(src []byte, dst []float32) {
		src = src[:4*len(dst)]
		for i := range dst {
			dst[i] = f32at(src[4*i : 4*i+4])
		}
	}
	dequantizers[F16] = func(src []byte, dst []float32) {
		tab := f16Table()
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = tab[binary.LittleEndian.Uint16(src[2*i:2*i+2])]
		}
	}
	dequantizers[BF16] = func(src []byte, dst []float32) {
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i : 2*i+2]))
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

// f16Table maps every half to its float32 (256 KiB, built on first use): a
// load is cheaper than F16ToF32's branches when whole F16 tensors are
// expanded.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return &t
})
