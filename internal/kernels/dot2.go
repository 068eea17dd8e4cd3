package kernels

import "braid/internal/quant"

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
