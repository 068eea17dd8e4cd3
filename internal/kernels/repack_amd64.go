package kernels

import (
	"math"

	"golang.org/x/sys/cpu"

	"braid/internal/quant"
)

// x8Policy says whether the AVX2 x8 kernels serve weight type t on this
// CPU, and from how many vectors a product of a repacked matrix leaves
// them for the CPU's plain tiles on rows unpacked chunk by chunk
// (x8Format.tilesFrom).
//
// On AVX2 CPUs without AVX-512 VNNI every format with an x8 kernel is
// repacked, and products take the tiles wherever the type has them (the
// row dot is the AVX2 one: the layout was measured against it on Zen 3).
//
// On AVX-512 VNNI CPUs the row dot and the tiles are the AVX-512 ones, and
// the AVX2 x8 kernels were measured against them on Zen 4 (one thread,
// BenchmarkX8Decode/Cold and BenchmarkX8Verify, 8192x4096): one vector
// by 128 MiB, x8 against plain, Q4_0 2.0-2.5x, Q5_0 1.65x, Q4_K 1.26x,
// Q5_K 1.08x, MXFP4 1.05x, Q6_K 0.95-1.0x, Q8_0 0.9x; and for 4, 8 and
// 64 vectors the Q4_0 and Q5_0 four-vector kernels beat the 4x4 VNNI
// tiles (25-40 ms against 42-45 ms at 64), Q4_K's is level at 4 and
// 20 % behind the 1x8 tiles at 64, still ahead of tiles on unpacked rows
// (the unpack costs 9 ms of the 8192x4096 matrix's 32). So those three
// are repacked and keep the x8 kernels at every count; Q5_K and MXFP4,
// whose prompt kernels on x8 are 1.7-2.6x slower than the tiles, and Q6_K
// and Q8_0, which gain nothing, stay plain.
func x8Policy(t quant.Type) (on bool, tilesFrom int) {
	x := &cpu.X86
	if !(x.HasAVX2 && x.HasFMA && x.HasF16C) {
		return false, 0
	}
	if !(x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI) {
		return true, 0
	}
	switch t {
	case quant.Q4_0, quant.Q5_0, quant.Q4_K:
		return true, math.MaxInt
	}
	return false, 0
}

// x8VNNI says whether the four-vector x8 kernels may use AVX-512 VNNI on
// 256-bit registers (VPDPBUSD with AVX512VL) in place of AVX2's
// multiply-adds: the same integer sums in fewer instructions.
func x8VNNI() bool {
	x := &cpu.X86
	return !forcedGeneric && x.HasAVX512F && x.HasAVX512VL && x.HasAVX512VNNI
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
