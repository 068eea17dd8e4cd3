#include "textflag.h"

// The Q4_0 x8 dot for four vectors (repack_q40_amd64.s has the one-vector
// kernel, whose arithmetic this one repeats per vector): the codes of a
// chunk are unpacked once for the four. Y8-Y11 hold the vectors' int16
// sums, Y4-Y7 their float sums.

DATA q404m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q404m0f<>(SB), RODATA|NOPTR, $8
DATA q404one8<>+0(SB)/8, $0x0101010101010101
GLOBL q404one8<>(SB), RODATA|NOPTR, $8
DATA q404one16<>+0(SB)/8, $0x0001000100010001
GLOBL q404one16<>(SB), RODATA|NOPTR, $8

#define PFD 2048

#define Q404COL(xr, s, xa, xb) \
	VPBROADCASTD xa(xr), Y2 \
	VPMADDUBSW   Y2, Y0, Y2 \
	VPADDW       Y2, s, s \
	VPBROADCASTD xb(xr), Y3 \
	VPMADDUBSW   Y3, Y1, Y3 \
	VPADDW       Y3, s, s

#define Q404CHUNK(wo, xa, xb) \
	VMOVDQU wo(SI), Y0 \
	VPSRLW  $4, Y0, Y1 \
	VPAND   Y15, Y0, Y0 \
	VPAND   Y15, Y1, Y1 \
	Q404COL(R9, Y8, xa, xb) \
	Q404COL(R10, Y9, xa, xb) \
	Q404COL(R11, Y10, xa, xb) \
	Q404COL(R12, Y11, xa, xb)

// The block's end for one vector: its exact sum less 8*sum(x), times
// d*dx (d of the rows in Y14), added to its float sums.
#define Q404END(xr, s, acc) \
	VMOVDQU      2(xr), Y0 \
	VPMADDUBSW   Y0, Y13, Y0 \
	VPMADDWD     Y12, Y0, Y0 \
	VEXTRACTI128 $1, Y0, X1 \
	VPADDD       X1, X0, X0 \
	VPSHUFD      $0x4e, X0, X1 \
	VPADDD       X1, X0, X0 \
	VPSHUFD      $0xb1, X0, X1 \
	VPADDD       X1, X0, X0 \
	VPSLLD       $3, X0, X0 \
	VPBROADCASTD X0, Y0 \
	VPMADDWD     Y12, s, s \
	VPSUBD       Y0, s, s \
	VCVTDQ2PS    s, s \
	VPBROADCASTW 0(xr), X2 \
	VCVTPH2PS    X2, Y2 \
	VMULPS       Y2, Y14, Y2 \
	VMULPS       Y2, s, s \
	VADDPS       s, acc, acc \
	VPXOR        s, s, s

// func q40X8Dot4AVX2(nb int, w, x *byte, ldx int, dst *float32, ldd int)
TEXT ·q40X8Dot4AVX2(SB), NOSPLIT, $0-48
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), R9
	MOVQ ldx+24(FP), BX
	MOVQ dst+32(FP), DX
	MOVQ ldd+40(FP), R13
	SHLQ $2, R13
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	VPBROADCASTQ q404m0f<>(SB), Y15
	VPBROADCASTQ q404one8<>(SB), Y13
	VPBROADCASTQ q404one16<>(SB), Y12
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VPXOR  Y8, Y8, Y8
	VPXOR  Y9, Y9, Y9
	VPXOR  Y10, Y10, Y10
	VPXOR  Y11, Y11, Y11
	TESTQ CX, CX
	JZ    q404done

q404loop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 (PFD+64)(SI)
	PREFETCHT0 (PFD+128)(SI)
	Q404CHUNK(16, 2, 18)
	Q404CHUNK(48, 6, 22)
	Q404CHUNK(80, 10, 26)
	Q404CHUNK(112, 14, 30)
	VCVTPH2PS 0(SI), Y14
	Q404END(R9, Y8, Y4)
	Q404END(R10, Y9, Y5)
	Q404END(R11, Y10, Y6)
	Q404END(R12, Y11, Y7)
	ADDQ $144, SI
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $34, R12
	DECQ CX
	JNZ  q404loop

q404done:
	VMOVUPS Y4, (DX)
	ADDQ    R13, DX
	VMOVUPS Y5, (DX)
	ADDQ    R13, DX
	VMOVUPS Y6, (DX)
	ADDQ    R13, DX
	VMOVUPS Y7, (DX)
	VZEROUPPER
	RET
