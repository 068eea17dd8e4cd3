//go:build arm64

package kernels

import (
	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// Assembly row dots (dot_arm64.s), with the Go references' signature.

//go:noescape
func vdQ8_0DOT(n int, w, x []byte) float32

//go:noescape
func vdQ4_0DOT(n int, w, x []byte) float32

//go:noescape
func vdF32NEON(n int, w, x []byte) float32

//go:noescape
func vdF16NEON(n int, w, x []byte) float32

func init() {
	a := &cpu.ARM64
	// SDOT (the dotprod extension, "asimddp") is in every core braid
	// targets (DGX Spark, Apple, Graviton 2+); without it the quantized
	// types stay on the references rather than a slow widening NEON path.
	registerFast(quant.Q8_0, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_0, dot: vdQ8_0DOT})
	registerFast(quant.Q4_0, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_0, dot: vdQ4_0DOT})
	// FCVTL and the float FMA are base ARMv8 NEON.
	registerFast(quant.F32, a.HasASIMD, &dotImpl{name: "neon", act: quant.F32, dot: vdF32NEON})
	registerFast(quant.F16, a.HasASIMD, &dotImpl{name: "neon", act: quant.F16, dot: vdF16NEON})
}
