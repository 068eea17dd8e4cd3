package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// Activation conversions. The quantized formats come from quant.Quantize,
// which reproduces llama.cpp's x86 bytes (tests check that any faster
// version registered later stays byte-identical to it).
func init() {
	for _, t := range []quant.Type{quant.Q8_0, quant.Q8_1, quant.Q8_K} {
		registerAct(t, func(dst []byte, src []float32) {
			if err := quant.Quantize(t, src, dst); err != nil {
				panic("kernels: " + err.Error())
			}
		})
	}
	registerAct(quant.F16, toF16)
	registerAct(quant.BF16, toBF16)
}

func toF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], quant.F32ToF16(v))
	}
}

func toBF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], quant.F32ToBF16(v))
	}
}
