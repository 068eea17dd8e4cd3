package kernels

import (
	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

//go:generate sh -c "python3 kquant_arm64_gen.py > kquant_arm64.s"

// Assembly kernels in kquant_arm64.s. Each takes nb >= 1 whole super-blocks
// of weights at w and Q8_K activations at x; the Go wrappers check lengths.

//go:noescape
func kqQ2KNEONDot(w, x *byte, nb int) float32

//go:noescape
func kqQ3KNEONDot(w, x *byte, nb int) float32

//go:noescape
func kqQ4KNEONDot(w, x *byte, nb int) float32

//go:noescape
func kqQ5KNEONDot(w, x *byte, nb int) float32

//go:noescape
func kqQ6KNEONDot(w, x *byte, nb int) float32

//go:noescape
func kqIQ4XSNEONDot(w, x *byte, nb int) float32

func init() {
	// SDOT is the ARMv8.2 dot-product extension (asimddp), which every
	// core this targets (Neoverse, Cortex-X/A7x, Apple) has.
	dp := cpu.ARM64.HasASIMD && cpu.ARM64.HasASIMDDP
	registerFast(quant.Q2_K, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(kqQ2KNEONDot, kqQ2KSize)})
	registerFast(quant.Q3_K, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(kqQ3KNEONDot, kqQ3KSize)})
	registerFast(quant.Q4_K, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(kqQ4KNEONDot, kqQ4KSize)})
	registerFast(quant.Q5_K, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(kqQ5KNEONDot, kqQ5KSize)})
	registerFast(quant.Q6_K, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(kqQ6KNEONDot, kqQ6KSize)})
	registerFast(quant.IQ4_XS, dp, &dotImpl{name: "neon-dotprod", act: quant.Q8_K, dot: kqWrap(kqIQ4XSNEONDot, kqIQ4XSSize)})
}
