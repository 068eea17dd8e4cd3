//go:build amd64

package kernels

import "braid/internal/quant"

// f32Tiles are MatMulF32's register tiles: the AVX-512 float32 prefill
// tiles when they are the kernel chosen for F32 weights (not under
// BRAID_KERNELS=generic, not on a CPU without AVX-512), else nil.
func f32Tiles() *[tileRows][tileCols]func(w *byte, ldw int, x *byte, ldx int, dst *float32, ldd int, k int, acc int) {
	if implFor(quant.F32).name == "avx512" {
		return &mmF32Tiles
	}
	return nil
}
