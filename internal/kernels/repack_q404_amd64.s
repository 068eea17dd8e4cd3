#include "textflag.h"
#include "repack_aux4_amd64.h"

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

// Q404CHUNK unpacks a chunk's codes and meets them with the four vectors
// through COL (Q404COL here, Q404VCOL in the VNNI kernel); Q404CHUNKS
// is a block's four chunks.
#define Q404CHUNK(COL, wo, xa, xb) \
	VMOVDQU wo(SI), Y0 \
	VPSRLW  $4, Y0, Y1 \
	VPAND   Y15, Y0, Y0 \
	VPAND   Y15, Y1, Y1 \
	COL(R9, Y8, xa, xb) \
	COL(R10, Y9, xa, xb) \
	COL(R11, Y10, xa, xb) \
	COL(R12, Y11, xa, xb)

#define Q404CHUNKS(COL) \
	PREFETCHT0 PFD(SI) \
	PREFETCHT0 (PFD+64)(SI) \
	PREFETCHT0 (PFD+128)(SI) \
	Q404CHUNK(COL, 16, 2, 18) \
	Q404CHUNK(COL, 48, 6, 22) \
	Q404CHUNK(COL, 80, 10, 26) \
	Q404CHUNK(COL, 112, 14, 30)

// func q40X8Dot4AVX2(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)
TEXT ·q40X8Dot4AVX2(SB), NOSPLIT, $0-56
	AUX4ENTER
	VPBROADCASTQ q404m0f<>(SB), Y15
	VPBROADCASTQ q404one16<>(SB), Y12
	TESTQ CX, CX
	JZ    q404done

q404loop:
	Q404CHUNKS(Q404COL)
	VCVTPH2PS 0(SI), Y14
	// The int16 sums in int32, then each vector's block end.
	VPMADDWD  Y12, Y8, Y8
	VPMADDWD  Y12, Y9, Y9
	VPMADDWD  Y12, Y10, Y10
	VPMADDWD  Y12, Y11, Y11
	AUX4ENDS(Y14)
	AUX4NEXT(144)
	DECQ CX
	JNZ  q404loop

q404done:
	AUX4STORE
	RET

// The same kernel with AVX-512 VNNI on 256-bit registers (EVEX VPDPBUSD,
// AVX512VL): one instruction multiplies a chunk's four code bytes by the
// vector's four activation bytes and adds them to the int32 sums, where
// the AVX2 kernel takes a VPMADDUBSW, a VPADDW and, once a block, a
// VPMADDWD. The products and their sums are the same integers (the AVX2
// int16 sums never saturate: 16 products of at most 15*128 a lane), so
// each vector gets the AVX2 kernel's bits.
#define Q404VCOL(xr, s, xa, xb) \
	VPBROADCASTD xa(xr), Y2 \
	VPDPBUSD     Y2, Y0, s \
	VPBROADCASTD xb(xr), Y3 \
	VPDPBUSD     Y3, Y1, s

// func q40X8Dot4VNNI(nb int, w, x *byte, ldx int, aux *byte, dst *float32, ldd int)
TEXT ·q40X8Dot4VNNI(SB), NOSPLIT, $0-56
	AUX4ENTER
	VPBROADCASTQ q404m0f<>(SB), Y15
	TESTQ CX, CX
	JZ    q404vdone

q404vloop:
	Q404CHUNKS(Q404VCOL)
	VCVTPH2PS 0(SI), Y14
	AUX4ENDS(Y14)
	AUX4NEXT(144)
	DECQ CX
	JNZ  q404vloop

q404vdone:
	AUX4STORE
	RET
