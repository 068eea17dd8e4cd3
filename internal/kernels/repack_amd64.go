package kernels

import (
	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

// x8Policy says whether the AVX2 x8 kernels serve weight type t on this
// CPU, and whether a product of a repacked matrix stays on them at every
// vector count (x8Format.noTiles) rather than taking the CPU's plain
// tiles on rows unpacked chunk by chunk.
//
// On AVX2 CPUs without AVX-512 VNNI every format with an x8 kernel is
// repacked, and products take the tiles wherever the type has them (the
// row dot is the AVX2 one: the layout was measured against it on Zen 3).
//
// On AVX-512 VNNI CPUs the row dot and the tiles are the AVX-512 ones;
// measured against them on Zen 4 (one thread, docs/PERFORMANCE.md, "The
// x8 layout on AVX-512 VNNI"): one vector by 128 MiB, x8 against plain,
// Q4_0 1.54x, Q5_0 1.43x, Q4_K 1.32x, Q5_K 1.27x, MXFP4 1.02x, Q8_0
// 1.03x, Q6_K 0.89x. At 4 to 64 vectors the Q4_0 and Q5_0 four-vector
// kernels beat the 4x4 VNNI tiles and Q4_K's is level with its tiles,
// which on unpacked rows were slower still. So those three are repacked
// and keep the x8 kernels at every count. Q5_K stays plain: with no
// four-vector kernel its prompts take the tiles on unpacked rows, 3x
// slower at 4 vectors (the whole matrix unpacked each product); MXFP4,
// Q8_0 and Q6_K gain nothing.
func x8Policy(t quant.Type) (on, noTiles bool) {
	x := &cpu.X86
	if !(x.HasAVX2 && x.HasFMA && x.HasF16C) {
		return false, false
	}
	if !(x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI) {
		return true, false
	}
	switch t {
	case quant.Q4_0, quant.Q5_0, quant.Q4_K:
		return true, true
	}
	return false, false
}

// x8VNNI says whether the four-vector x8 kernels may use AVX-512 VNNI on
// 256-bit registers (VPDPBUSD with AVX512VL) in place of AVX2's
// multiply-adds: the same integer sums in fewer instructions.
func x8VNNI() bool {
	x := &cpu.X86
	return x.HasAVX512F && x.HasAVX512VL && x.HasAVX512VNNI
}

// x4aReady checks the operands of a dot8x4a kernel of a format whose
// group block is wb bytes (the four vectors' q80 blocks ldx bytes apart,
// their aux, dst rows ldd apart), panicking with the format's name when
// one is short, and says whether there is anything to compute: with no
// blocks it clears the four results.
func x4aReady(name string, wb, nb int, w, x []byte, ldx int, aux []byte, dst []float32, ldd int) bool {
	if len(w) < nb*wb || len(x) < 3*ldx+nb*q80Block || len(dst) < 3*ldd+8 || ldx < nb*q80Block || len(aux) < 4*8*nb {
		panic("kernels: " + name + " x8 four-vector dot operand shorter than its blocks")
	}
	if nb == 0 {
		for c := 0; c < 4; c++ {
			clear(dst[c*ldd : c*ldd+8])
		}
		return false
	}
	return true
}
