#include "textflag.h"

// The Q4_0 x8 dot for four vectors (repack_q40_amd64.s has the one-vector
// kernel, whose arithmetic this one repeats per vector): the codes of a
// chunk are unpacked once for the four, and each vector's 8*sum(x) and dx
// of every block come from aux (q40Aux: once per product, not once per
// group of rows as the one-vector kernel finds them). Y8-Y11 hold the
// vectors' int16 sums, Y4-Y7 their float sums.

DATA q404m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q404m0f<>(SB), RODATA|NOPTR, $8
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

// The block's end for one vector: its exact sum less 8*sum(x) (at aux
// a), times d*dx (d of the rows in Y14, dx at aux a+4), added to its
// float sums.
#define Q404END(a, adx, s, acc) \
	VPMADDWD     Y12, s, s \
	VPBROADCASTD a, Y0 \
	VPSUBD       Y0, s, s \
	VCVTDQ2PS    s, s \
	VBROADCASTSS adx, Y2 \
	VMULPS       Y2, Y14, Y2 \
	VMULPS       Y2, s, s \
	VADDPS       s, acc, acc \
	VPXOR        s, s, s

// func q40X8Dot4AVX2(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)
TEXT ·q40X8Dot4AVX2(SB), NOSPLIT, $0-56
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), R9
	MOVQ ldx+24(FP), BX
	MOVQ aux+32(FP), R8
	MOVQ dst+40(FP), DX
	MOVQ ldd+48(FP), R13
	SHLQ $2, R13
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	// Vector v's aux is 8*nb bytes after v-1's: v0 at R8, v1 at R8+DI,
	// v2 at AX, v3 at AX+DI.
	MOVQ CX, DI
	SHLQ $3, DI
	LEAQ (R8)(DI*2), AX
	VPBROADCASTQ q404m0f<>(SB), Y15
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
	Q404END(0(R8), 4(R8), Y8, Y4)
	Q404END(0(R8)(DI*1), 4(R8)(DI*1), Y9, Y5)
	Q404END(0(AX), 4(AX), Y10, Y6)
	Q404END(0(AX)(DI*1), 4(AX)(DI*1), Y11, Y7)
	ADDQ $144, SI
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $34, R12
	ADDQ $8, R8
	ADDQ $8, AX
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
