package quant

// The K-quants: 256-value super-blocks split into 16- or 32-value
// sub-blocks, each with its own small integer scale (and min) that is itself
// scaled by the super-block's f16 d (and dmin). Layouts, in file order:
//
//	Q2_K: scales[16] (lo nibble scale, hi nibble min), qs[64] 2-bit, d, dmin
//	Q3_K: hmask[32] high bits, qs[64] 2-bit, scales[12] packed 6-bit, d
//	Q4_K: d, dmin, scales[12] packed 6-bit scale+min, qs[128] nibbles
//	Q5_K: d, dmin, scales[12], qh[32] fifth bits, qs[128] nibbles
//	Q6_K: ql[128] low nibbles, qh[64] 2-bit highs, scales[16] int8, d
//
// Within each 128 values the 2-bit formats spread one byte's four fields over
// four runs of 32 values; the operation order below mirrors ggml's so that
// every value rounds identically.

func init() {
	dequantizers[Q2_K] = dequantQ2_K
	dequantizers[Q3_K] = dequantQ3_K
	dequantizers[Q4_K] = dequantQ4_K
	dequantizers[Q5_K] = dequantQ5_K
	dequantizers[Q6_K] = dequantQ6_K
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of the 12-byte Q4_K/Q5_K
// scale field: the first four pairs sit in the low 6 bits of bytes 0..7, the
// last four are split between bytes 8..11 and the spare top bits of 0..7.
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// ScalesMinsK4 unpacks the eight 6-bit sub-block scales and mins of the
// 12-byte scales field of a Q4_K or Q5_K block, for kernels that read blocks
// directly. The array pointer makes a short field impossible to pass.
func ScalesMinsK4(scales *[12]byte) (sc, m [8]uint8) {
	for j := range 8 {
		sc[j], m[j] = scaleMinK4(j, scales[:])
	}
	return sc, m
}

// ScalesQ3K returns the sixteen signed 6-bit sub-block scales (already minus
// 32) packed in the 12-byte scales field of a Q3_K block.
func ScalesQ3K(scales *[12]byte) [16]int8 {
	var out [16]int8
	for j := 0; j < 16; j++ {
		var lo uint8
		if j < 8 {
			lo = scales[j] & 15
		} else {
			lo = scales[j-8] >> 4
		}
		hi := scales[8+j%4] >> (2 * (j / 4)) & 3
		out[j] = int8(lo|hi<<4) - 32
	}
	return out
}

func dequantQ2_K(src []byte, dst []float32) {
	for len(src) >= 84 {
		b := src[:84]
		scales, qs := b[:16], b[16:80]
		d, dmin := f16at(b[80:]), f16at(b[82:])
		y := dst[:256]
		is := 0
		for half := 0; half < 2; half++ {
			q := qs[32*half : 32*half+32]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				for part := 0; part < 2; part++ {
					sc := scales[is]
					is++
					dl := d * float32(sc&15)
					ml := dmin * float32(sc>>4)
					qq := q[16*part : 16*part+16]
					out := y[:16]
					for l, v := range qq {
						out[l] = float32(dl*float32(v>>shift&3)) - ml
					}
					y = y[16:]
				}
			}
		}
		src, dst = src[84:], dst[256:]
	}
}

func dequantQ3_K(src []byte, dst []float32) {
	for len(src) >= 110 {
		b := src[:110]
		hmask, qs := b[:32], b[32:96]
		sc := ScalesQ3K((*[12]byte)(b[96:108]))
		d := f16at(b[108:])
		y := dst[:256]
		is := 0
		m := uint8(1)
		for half := 0; half < 2; half++ {
			q := qs[32*half : 32*half+32]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				for part := 0; part < 2; part++ {
					dl := d * float32(sc[is])
					is++
					qq := q[16*part : 16*part+16]
					hm := hmask[16*part : 16*part+16]
					out := y[:16]
					for l, v := range qq {
						x := int32(v >> shift & 3)
						if hm[l]&m == 0 {
							x -= 4
						}
						out[l] = dl * float32(x)
					}
					y = y[16:]
				}
				m <<= 1
			}
		}
		src, dst = src[110:], dst[256:]
	}
}

func dequantQ4_K(src []byte, dst []float32) {
	for len(src) >= 144 {
		b := src[:144]
		d, dmin := f16at(b), f16at(b[2:])
		scales, qs := b[4:16], b[16:144]
		y := dst[:256]
		for j := 0; j < 4; j++ {
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			d1, mm1 := d*float32(sc1), dmin*float32(m1)
			d2, mm2 := d*float32(sc2), dmin*float32(m2)
			q := qs[32*j : 32*j+32]
			lo, hi := y[64*j:64*j+32], y[64*j+32:64*j+64]
			for l, v := range q {
				lo[l] = float32(d1*float32(v&15)) - mm1
				hi[l] = float32(d2*float32(v>>4)) - mm2
			}
		}
		src, dst = src[144:], dst[256:]
	}
}

func dequantQ5_K(src []byte, dst []float32) {
	for len(src) >= 176 {
		b := src[:176]
		d, dmin := f16at(b), f16at(b[2:])
		scales, qh, qs := b[4:16], b[16:48], b[48:176]
		y := dst[:256]
		for j := 0; j < 4; j++ {
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			d1, mm1 := d*float32(sc1), dmin*float32(m1)
			d2, mm2 := d*float32(sc2), dmin*float32(m2)
			u1, u2 := uint8(1)<<(2*j), uint8(2)<<(2*j)
			q := qs[32*j : 32*j+32]
			lo, hi := y[64*j:64*j+32], y[64*j+32:64*j+64]
			for l, v := range q {
				x1, x2 := v&15, v>>4
				if qh[l]&u1 != 0 {
					x1 += 16
				}
				if qh[l]&u2 != 0 {
					x2 += 16
				}
				lo[l] = float32(d1*float32(x1)) - mm1
				hi[l] = float32(d2*float32(x2)) - mm2
			}
		}
		src, dst = src[176:], dst[256:]
	}
}

func dequantQ6_K(src []byte, dst []float32) {
	for len(src) >= 210 {
		b := src[:210]
		d := f16at(b[208:])
		for half := 0; half < 2; half++ {
			ql := b[64*half : 64*half+64]
			qh := b[128+32*half : 128+32*half+32]
			sc := b[192+8*half : 192+8*half+8]
			y := dst[128*half : 128*half+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				h := qh[l]
				q1 := int32(ql[l]&15|(h&3)<<4) - 32
				q2 := int32(ql[l+32]&15|(h>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(h>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(h>>6&3)<<4) - 32
				y[l] = d * float32(int8(sc[is])) * float32(q1)
				y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
		src, dst = src[210:], dst[256:]
	}
}
