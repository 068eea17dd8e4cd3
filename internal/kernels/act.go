package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// Activation conversions. The quantized formats come from quant.Quantize,
// which reproduces llama.cpp's x86 bytes; these Go versions are the oracle
// of the assembly ones registered after them (act_amd64.go), which must
// give the same bytes for every input.
func init() {
	for _, t := range []quant.Type{quant.Q8_0, quant.Q8_1, quant.Q8_K} {
		registerAct(t, "generic", quantAct(t))
	}
	registerAct(quant.F16, "generic", toF16)
	registerAct(quant.BF16, "generic", toBF16)
}

// quantAct is the converter to t by quant.Quantize.
func quantAct(t quant.Type) func(dst []byte, src []float32) {
	return func(dst []byte, src []float32) {
		if err := quant.Quantize(t, src, dst); err != nil {
			panic("kernels: " + err.Error())
		}
	}
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
