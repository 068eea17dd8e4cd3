package kernels

import (
	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

//go:generate sh -c "python3 iq_arm64_gen.py > iq_arm64.s"

// Assembly kernels in iq_arm64.s. Each takes nb >= 1 whole super-blocks of
// weights at w and Q8_K activations at x; the Go wrappers (kqWrap) check
// lengths.

//go:noescape
func iqIQ2XXSNEON(w, x *byte, nb int) float32

//go:noescape
func iqIQ2XSNEON(w, x *byte, nb int) float32

//go:noescape
func iqIQ2SNEON(w, x *byte, nb int) float32

//go:noescape
func iqIQ3XXSNEON(w, x *byte, nb int) float32

//go:noescape
func iqIQ3SNEON(w, x *byte, nb int) float32

//go:noescape
func iqIQ1SNEON(w, x *byte, nb int) float32

//go:noescape
func iqIQ1MNEON(w, x *byte, nb int) float32

//go:noescape
func iqTQ1NEON(w, x *byte, nb int) float32

//go:noescape
func iqTQ2NEON(w, x *byte, nb int) float32

func init() {
	dp := cpu.ARM64.HasASIMD && cpu.ARM64.HasASIMDDP
	for _, k := range []struct {
		t    quant.Type
		fn   func(w, x *byte, nb int) float32
		size int
	}{
		{quant.IQ2_XXS, iqIQ2XXSNEON, iqIQ2XXSSize}, {quant.IQ2_XS, iqIQ2XSNEON, iqIQ2XSSize},
		{quant.IQ2_S, iqIQ2SNEON, iqIQ2SSize}, {quant.IQ3_XXS, iqIQ3XXSNEON, iqIQ3XXSSize},
		{quant.IQ3_S, iqIQ3SNEON, iqIQ3SSize}, {quant.IQ1_S, iqIQ1SNEON, iqIQ1SSize},
		{quant.IQ1_M, iqIQ1MNEON, iqIQ1MSize}, {quant.TQ1_0, iqTQ1NEON, iqTQ1Size},
		{quant.TQ2_0, iqTQ2NEON, iqTQ2Size},
	} {
		registerFast(k.t, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(k.fn, k.size)})
	}
}
