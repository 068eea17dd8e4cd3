package quant

// Q1_0 and Q2_0 (ggml types 41 and 42): one f16 scale d and 16 bytes of
// packed codes, read least significant bit first.
//
//	Q1_0: 128 values, 1 bit each     value = +d if the bit is set, else -d
//	Q2_0:  64 values, 2 bits each    value = (q-1)*d, q in 0..3
//
// Negation and multiplication by a small integer are exact, so there is no
// rounding to match. The one choice left is the sign of Q2_0's zero when d
// is negative: float32(q-1)*d gives -0 there. ggml's quantizers write
// non-negative scales (all of quants-iq.gguf's are), so that case does not
// arise in files they make.

func init() {
	dequantizers[Q1_0] = dequantQ1_0
	dequantizers[Q2_0] = dequantQ2_0
}

func dequantQ1_0(src []byte, dst []float32) {
	for len(src) >= 18 {
		d := f16at(src)
		out := dst[:128]
		for j, b := range src[2:18] {
			for k := 0; k < 8; k++ {
				v := -d
				if b>>k&1 != 0 {
					v = d
				}
				out[8*j+k] = v
			}
		}
		src, dst = src[18:], dst[128:]
	}
}

func dequantQ2_0(src []byte, dst []float32) {
	for len(src) >= 18 {
		d := f16at(src)
		out := dst[:64]
		for j, b := range src[2:18] {
			for k := 0; k < 4; k++ {
				out[4*j+k] = float32(int32(b>>(2*k)&3)-1) * d
			}
		}
		src, dst = src[18:], dst[64:]
	}
}
