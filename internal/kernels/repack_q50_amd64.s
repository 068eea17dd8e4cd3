#include "textflag.h"
#include "repack_aux4_amd64.h"

// The Q5_0 x8 dots (repack_q50.go has the layout): eight rows against one
// Q8_0 vector (q50X8DotAVX2) or four (q50X8Dot4AVX2), one 176-byte group
// block per loop iteration, every vector lane a row. A chunk's codes are
// unpacked as Q4_0's (repack_q40_amd64.s) and its fifth bits put in at
// bit 4 by one shift of the rows' rearranged bits and a mask; the codes
// (0..31) go in unsigned: VPMADDUBSW against the broadcast activations
// gives two int16 partial sums a row, two chunks of at most 2*31*128
// each fit one int16 sum, VPMADDWD by ones adds them in int32, and
// 16*sum(x) takes the offset out: the exact sum of (q-16)*x. Then
// dotQ50Canon's float step.

DATA q50m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q50m0f<>(SB), RODATA|NOPTR, $8
DATA q50m10<>+0(SB)/8, $0x1010101010101010
DATA q50m10<>+8(SB)/8, $0x1010101010101010
DATA q50m10<>+16(SB)/8, $0x1010101010101010
DATA q50m10<>+24(SB)/8, $0x1010101010101010
GLOBL q50m10<>(SB), RODATA|NOPTR, $32
DATA q50one8<>+0(SB)/8, $0x0101010101010101
GLOBL q50one8<>(SB), RODATA|NOPTR, $8
DATA q50one16<>+0(SB)/8, $0x0001000100010001
GLOBL q50one16<>(SB), RODATA|NOPTR, $8

// PFD: see repack_q4k_amd64.s (the same distance, not tuned for Q5_0).
#define PFD 2048

// Q50CODES unpacks chunk k of the block at SI (codes at wo) into lo and
// hi: low and high nibbles, each with its fifth bit (the rearranged bits
// at 16(SI) shifted left by lsh = 4-k, right by rsh = k; AVX2 shifts only
// registers). Y2 and Y3 are its scratch.
#define Q50CODES(wo, lsh, rsh, lo, hi) \
	VMOVDQU wo(SI), lo \
	VPSRLW  $4, lo, hi \
	VPAND   Y15, lo, lo \
	VPAND   Y15, hi, hi \
	VMOVDQU 16(SI), Y3 \
	VPSLLD  $lsh, Y3, Y2 \
	VPAND   q50m10<>(SB), Y2, Y2 \
	VPOR    Y2, lo, lo \
	VPSRLD  $rsh, Y3, Y3 \
	VPAND   q50m10<>(SB), Y3, Y3 \
	VPOR    Y3, hi, hi

#define Q50CHUNK(wo, lsh, rsh, xa, xb, s) \
	Q50CODES(wo, lsh, rsh, Y0, Y1) \
	VPBROADCASTD xa(DI), Y2 \
	VPBROADCASTD xb(DI), Y3 \
	VPMADDUBSW   Y2, Y0, Y0 \
	VPMADDUBSW   Y3, Y1, Y1 \
	VPADDW       Y0, s, s \
	VPADDW       Y1, s, s

// func q50X8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q50X8DotAVX2(SB), NOSPLIT, $0-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ q50m0f<>(SB), Y15
	VPBROADCASTQ q50one8<>(SB), Y8
	VPBROADCASTQ q50one16<>(SB), Y9
	VXORPS       Y14, Y14, Y14
	TESTQ CX, CX
	JZ    q50done

q50loop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 (PFD+64)(SI)
	PREFETCHT0 (PFD+128)(SI)
	// 16*sum(x) of the block, in every lane.
	VMOVDQU      2(DI), Y4
	VPMADDUBSW   Y4, Y8, Y4
	VPMADDWD     Y9, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0x4e, X4, X5
	VPADDD       X5, X4, X4
	VPSHUFD      $0xb1, X4, X5
	VPADDD       X5, X4, X4
	VPSLLD       $4, X4, X4
	VPBROADCASTD X4, Y4

	VPXOR Y11, Y11, Y11
	VPXOR Y10, Y10, Y10
	Q50CHUNK(48, 4, 0, 2, 18, Y11)
	Q50CHUNK(80, 3, 1, 6, 22, Y11)
	Q50CHUNK(112, 2, 2, 10, 26, Y10)
	Q50CHUNK(144, 1, 3, 14, 30, Y10)
	VPMADDWD Y9, Y11, Y11
	VPMADDWD Y9, Y10, Y10
	VPADDD   Y10, Y11, Y11
	VPSUBD   Y4, Y11, Y11

	VCVTDQ2PS    Y11, Y11
	VCVTPH2PS    0(SI), Y0
	VPBROADCASTW 0(DI), X1
	VCVTPH2PS    X1, Y1
	VMULPS       Y1, Y0, Y0
	VMULPS       Y0, Y11, Y11
	VADDPS       Y11, Y14, Y14

	ADDQ $176, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q50loop

q50done:
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET

// The four-vector kernel: the codes of two chunks are unpacked once for
// the four vectors (Y0, Y1 and Y12, Y13), each vector's two chunks summed
// in int16 (Y2) and added in int32 to its block sum (Y8-Y11), and each
// vector's 16*sum(x) and dx of every block come from aux (q50Aux, as the
// four-vector Q4_0 kernel's). Y4-Y7 hold the float sums.
#define Q504COL(xr, i, xa1, xb1, xa2, xb2) \
	VPBROADCASTD xa1(xr), Y3 \
	VPMADDUBSW   Y3, Y0, Y2 \
	VPBROADCASTD xb1(xr), Y3 \
	VPMADDUBSW   Y3, Y1, Y3 \
	VPADDW       Y3, Y2, Y2 \
	VPBROADCASTD xa2(xr), Y3 \
	VPMADDUBSW   Y3, Y12, Y3 \
	VPADDW       Y3, Y2, Y2 \
	VPBROADCASTD xb2(xr), Y3 \
	VPMADDUBSW   Y3, Y13, Y3 \
	VPADDW       Y3, Y2, Y2 \
	VPMADDWD     Y14, Y2, Y2 \
	VPADDD       Y2, i, i

// Q504BLOCK is a block's codes met with the four vectors through COL
// (Q504COL, or Q504VCOL in the VNNI kernel).
#define Q504BLOCK(COL) \
	PREFETCHT0 PFD(SI) \
	PREFETCHT0 (PFD+64)(SI) \
	PREFETCHT0 (PFD+128)(SI) \
	Q50CODES(48, 4, 0, Y0, Y1) \
	Q50CODES(80, 3, 1, Y12, Y13) \
	COL(R9, Y8, 2, 18, 6, 22) \
	COL(R10, Y9, 2, 18, 6, 22) \
	COL(R11, Y10, 2, 18, 6, 22) \
	COL(R12, Y11, 2, 18, 6, 22) \
	Q50CODES(112, 2, 2, Y0, Y1) \
	Q50CODES(144, 1, 3, Y12, Y13) \
	COL(R9, Y8, 10, 26, 14, 30) \
	COL(R10, Y9, 10, 26, 14, 30) \
	COL(R11, Y10, 10, 26, 14, 30) \
	COL(R12, Y11, 10, 26, 14, 30)

// func q50X8Dot4AVX2(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)
TEXT ·q50X8Dot4AVX2(SB), NOSPLIT, $0-56
	AUX4ENTER
	VPBROADCASTQ q50m0f<>(SB), Y15
	VPBROADCASTQ q50one16<>(SB), Y14
	TESTQ CX, CX
	JZ    q504done

q504loop:
	Q504BLOCK(Q504COL)
	VCVTPH2PS 0(SI), Y12
	AUX4ENDS(Y12)
	AUX4NEXT(176)
	DECQ CX
	JNZ  q504loop

q504done:
	AUX4STORE
	RET

// The four-vector kernel with AVX-512 VNNI on 256-bit registers, as
// q40X8Dot4VNNI is Q4_0's: each chunk's products go into the block sums
// by one VPDPBUSD, the same integers as the AVX2 kernel's int16 sums
// (four pair sums of at most 2*31*128 a lane: no saturation) widened.
#define Q504VCOL(xr, i, xa1, xb1, xa2, xb2) \
	VPBROADCASTD xa1(xr), Y3 \
	VPDPBUSD     Y3, Y0, i \
	VPBROADCASTD xb1(xr), Y3 \
	VPDPBUSD     Y3, Y1, i \
	VPBROADCASTD xa2(xr), Y3 \
	VPDPBUSD     Y3, Y12, i \
	VPBROADCASTD xb2(xr), Y3 \
	VPDPBUSD     Y3, Y13, i

// func q50X8Dot4VNNI(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)
TEXT ·q50X8Dot4VNNI(SB), NOSPLIT, $0-56
	AUX4ENTER
	VPBROADCASTQ q50m0f<>(SB), Y15
	TESTQ CX, CX
	JZ    q504vdone

q504vloop:
	Q504BLOCK(Q504VCOL)
	VCVTPH2PS 0(SI), Y12
	AUX4ENDS(Y12)
	AUX4NEXT(176)
	DECQ CX
	JNZ  q504vloop

q504vdone:
	AUX4STORE
	RET
