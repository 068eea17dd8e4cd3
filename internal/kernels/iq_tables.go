package kernels

import (
	"encoding/binary"

	"braid/internal/quant"
)

// Tables the assembly kernels of the grid formats read (the references use
// quant's directly). The grids are copies of quant's, so that assembly can
// address them as symbols of this package; the others are derived forms
// that save the kernels work per value.
var (
	iqGrid2XXS = quant.IQ2XXSGrid
	iqGrid2XS  = quant.IQ2XSGrid
	iqGrid2S   = quant.IQ2SGrid
	iqGrid3XXS = quant.IQ3XXSGrid
	iqGrid3S   = quant.IQ3SGrid
	iqGrid1S   = quant.IQ1SGrid // signed bytes, for SDOT (arm64)

	// iqGrid1SU is the IQ1_S/IQ1_M grid plus one (bytes 0, 1, 2 for -1, 0,
	// +1): unsigned, so it multiplies activations directly, and the +1 is
	// taken back out through the activations' bsums.
	iqGrid1SU [2048]uint64

	// iqGrid1M is the IQ1_M grid with its per-8-values delta folded in:
	// entry i + 2048*neg holds 8g + 9 + delta (delta = +1, or -1 when
	// neg), in 0..18, so that the 11-bit index plus the delta's sign bit,
	// which the layout stores next to it, index it directly.
	iqGrid1M [4096]uint64

	// iqSignPM expands a 7-bit sign index (IQ2_XXS, IQ2_XS, IQ3_XXS) to
	// the eight signs as bytes +1 or -1, ready for VPSIGNB-style
	// multiplication.
	iqSignPM [128]uint64
)

func init() {
	for i, g := range quant.IQ1SGrid {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], g)
		for k := range b {
			b[k]++
		}
		iqGrid1SU[i] = binary.LittleEndian.Uint64(b[:])
	}
	for i, g := range quant.IQ1SGrid {
		var p, n [8]byte
		for k := range p {
			v := 8*int(int8(g>>(8*k))) + 9
			p[k], n[k] = byte(v+1), byte(v-1)
		}
		iqGrid1M[i] = binary.LittleEndian.Uint64(p[:])
		iqGrid1M[i+2048] = binary.LittleEndian.Uint64(n[:])
	}
	for i := range iqSignPM {
		s := quant.IQSigns(uint8(i))
		var b [8]byte
		for k := range b {
			b[k] = 1
			if s>>k&1 != 0 {
				b[k] = 0xff
			}
		}
		iqSignPM[i] = binary.LittleEndian.Uint64(b[:])
	}
}
