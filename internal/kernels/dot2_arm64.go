//go:build arm64

package kernels

import (
	"braid/internal/quant"

	"golang.org/x/sys/cpu"
)

// Row dots of dot2_arm64.s, with the Go references' signature.

//go:noescape
func vdQ4_1DOT(n int, w, x []byte) float32

//go:noescape
func vdQ5_0DOT(n int, w, x []byte) float32

//go:noescape
func vdQ5_1DOT(n int, w, x []byte) float32

//go:noescape
func vdIQ4NLDOT(n int, w, x []byte) float32

//go:noescape
func vdMXFP4DOT(n int, w, x []byte) float32

//go:noescape
func vdBF16NEON(n int, w, x []byte) float32

func init() {
	a := &cpu.ARM64
	// SDOT is the dotprod extension, as for Q8_0/Q4_0 in dot_arm64.go.
	registerFast(quant.Q4_1, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_1, dot: vdQ4_1DOT})
	registerFast(quant.Q5_0, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_0, dot: vdQ5_0DOT})
	registerFast(quant.Q5_1, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_1, dot: vdQ5_1DOT})
	registerFast(quant.IQ4_NL, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_0, dot: vdIQ4NLDOT})
	registerFast(quant.MXFP4, a.HasASIMDDP, &dotImpl{name: "neon-dotprod", act: quant.Q8_0, dot: vdMXFP4DOT})
	registerFast(quant.BF16, a.HasASIMD, &dotImpl{name: "neon", act: quant.BF16, dot: vdBF16NEON})
}
