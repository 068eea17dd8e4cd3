package kernels

import (
	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

// Assembly kernels in iq_amd64.s. Each takes nb >= 1 whole super-blocks of
// weights at w and Q8_K activations at x; the Go wrappers (kqWrap) check
// lengths.

//go:noescape
func iqIQ2XXSAVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ2XSAVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ2SAVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ3XXSAVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ3SAVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ1SAVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ1MAVX2(w, x *byte, nb int) float32

//go:noescape
func iqTQ1AVX2(w, x *byte, nb int) float32

//go:noescape
func iqTQ2AVX2(w, x *byte, nb int) float32

//go:noescape
func iqIQ2XXSAVX512(w, x *byte, nb int) float32

//go:noescape
func iqIQ2XSAVX512(w, x *byte, nb int) float32

//go:noescape
func iqIQ3XXSAVX512(w, x *byte, nb int) float32

//go:noescape
func iqIQ3SAVX512(w, x *byte, nb int) float32

//go:noescape
func iqIQ1SAVX512(w, x *byte, nb int) float32

//go:noescape
func iqIQ1MAVX512(w, x *byte, nb int) float32

func init() {
	// BEXTR (BMI1) cuts the 7-bit sign indices, PDEP/PEXT (BMI2) assemble
	// indices and scales; every AVX2 CPU braid targets has both.
	avx2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C && cpu.X86.HasBMI1 && cpu.X86.HasBMI2

	// The AVX-512 kernels also cut sign fields with VPMULTISHIFTQB (VBMI)
	// and count parity with VPOPCNTB (BITALG): Ice Lake and Zen 4 on.
	avx512 := avx2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
		cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512BITALG

	for _, k := range []struct {
		t    quant.Type
		fn   func(w, x *byte, nb int) float32
		size int
	}{
		{quant.IQ2_XXS, iqIQ2XXSAVX512, iqIQ2XXSSize}, {quant.IQ2_XS, iqIQ2XSAVX512, iqIQ2XSSize},
		{quant.IQ3_XXS, iqIQ3XXSAVX512, iqIQ3XXSSize}, {quant.IQ3_S, iqIQ3SAVX512, iqIQ3SSize},
		{quant.IQ1_S, iqIQ1SAVX512, iqIQ1SSize}, {quant.IQ1_M, iqIQ1MAVX512, iqIQ1MSize},
	} {
		registerFast(k.t, avx512, &dotImpl{name: "avx512vbmi", act: quant.Q8_K, dot: kqWrap(k.fn, k.size)})
	}
	for _, k := range []struct {
		t    quant.Type
		fn   func(w, x *byte, nb int) float32
		size int
	}{
		{quant.IQ2_XXS, iqIQ2XXSAVX2, iqIQ2XXSSize}, {quant.IQ2_XS, iqIQ2XSAVX2, iqIQ2XSSize},
		{quant.IQ2_S, iqIQ2SAVX2, iqIQ2SSize}, {quant.IQ3_XXS, iqIQ3XXSAVX2, iqIQ3XXSSize},
		{quant.IQ3_S, iqIQ3SAVX2, iqIQ3SSize}, {quant.IQ1_S, iqIQ1SAVX2, iqIQ1SSize},
		{quant.IQ1_M, iqIQ1MAVX2, iqIQ1MSize}, {quant.TQ1_0, iqTQ1AVX2, iqTQ1Size},
		{quant.TQ2_0, iqTQ2AVX2, iqTQ2Size},
	} {
		impl := &dotImpl{name: "avx2", act: quant.Q8_K, dot: kqWrap(k.fn, k.size)}
		if dec := iqPanelDecoders[k.t]; dec.decode != nil {
			// Prefill decodes each tile's weights once (iq_panel_amd64.go),
			// with the row dot's bits.
			p := &iqPanel{size: k.size, k: dec.k, decode: dec.decode, decodeRow: dec.decodeRow, dot: impl.dot}
			impl.mm, impl.mmRows, impl.mmCols, impl.exactTiles = p.mm, iqPanelRows, iqPanelCols, true
		}
		registerFast(k.t, avx2, impl)
	}
}

// iqPanelDecoders are the grid formats with AVX2 panel tiles, and the
// constant each row dot multiplies its sum by.
var iqPanelDecoders = map[quant.Type]struct {
	decode    func(dst, b []byte)
	k         float32
	decodeRow func(dst, w *byte, nb int)
}{
	quant.IQ2_XXS: {iqPanelIQ2XXS, 0.125, iqPanelDecIQ2XXSAVX2},
	quant.IQ2_XS:  {iqPanelIQ2XS, 0.125, iqPanelDecIQ2XSAVX2},
	quant.IQ2_S:   {iqPanelIQ2S, 0.125, iqPanelDecIQ2SAVX2},
	quant.IQ3_XXS: {iqPanelIQ3XXS, 0.25, iqPanelDecIQ3XXSAVX2},
	quant.IQ3_S:   {iqPanelIQ3S, 1, iqPanelDecIQ3SAVX2},
}
