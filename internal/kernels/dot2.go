package kernels

import (
	"encoding/binary"
	"math"

	"braid/internal/quant"
)

// Tables the assembly kernels of dot2_*.s index: the 4-bit codebooks as
// bytes for table-lookup instructions, and the MXFP4 block scale of every
// E8M0 exponent (quant.E8M0ToF32Half), so a kernel turns an exponent into a
// float with one load instead of bit arithmetic and a subnormal branch.
var (
	iq4nlTab   = quant.IQ4NLValues
	mxfp4Tab   = quant.MXFP4Values
	mxfp4Scale [256]float32
)

func init() {
	for e := range mxfp4Scale {
		mxfp4Scale[e] = quant.E8M0ToF32Half(uint8(e))
	}
}

// roundF16 is the wideAct of F16 kernels: float32 activations rounded to
// F16 values, kept as float32, so a prefill tile computes the same products
// as the F16 dot of decode without widening activations in its inner loop.
func roundF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(quant.F16ToF32(quant.F32ToF16(v))))
	}
}

// roundBF16 is the wideAct of BF16 kernels, as roundF16 is for F16.
func roundBF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(quant.F32ToBF16(v))<<16)
	}
}

// iq4nlTabU and mxfp4TabU are the codebooks plus 128, unsigned, for the
// VPDPBUSD prefill tiles (mmq_amd64.s), which subtract 128*sum(x) after.
var iq4nlTabU, mxfp4TabU [16]uint8

func init() {
	for i := range iq4nlTabU {
		iq4nlTabU[i] = uint8(int(quant.IQ4NLValues[i]) + 128)
		mxfp4TabU[i] = uint8(int(quant.MXFP4Values[i]) + 128)
	}
}
