#include "textflag.h"
#include "repack_kquant_amd64.h"

// The Q4_K x8 dot for four vectors (repack_q4k_amd64.s has the one-vector
// kernel and the lanes' arithmetic, which this one repeats per vector).


// The four-vector form: the same lanes and the same arithmetic per vector
// (so each vector's results are dot8's bits), with the codes of a chunk
// unpacked once for four vectors. The int16 sums of the four vectors stay
// in Y4-Y11; the per-vector int32 sums, mins and float sums live on the
// stack: 0 scales 0-3, 32 scales 4-7, 64+32c isum, 192+32c summs,
// 320+32c the float sum of vector c, 448 the bsum pairs.

// Each row's scale bytes (or pairs of mins) as 32-byte masks, so that
// VPSHUFB takes them from memory.
DATA q4x8ysc0<>+0(SB)/8, $0x8004800480008000
DATA q4x8ysc0<>+8(SB)/8, $0x800c800c80088008
DATA q4x8ysc0<>+16(SB)/8, $0x8004800480008000
DATA q4x8ysc0<>+24(SB)/8, $0x800c800c80088008
GLOBL q4x8ysc0<>(SB), RODATA|NOPTR, $32
DATA q4x8ysc1<>+0(SB)/8, $0x8005800580018001
DATA q4x8ysc1<>+8(SB)/8, $0x800d800d80098009
DATA q4x8ysc1<>+16(SB)/8, $0x8005800580018001
DATA q4x8ysc1<>+24(SB)/8, $0x800d800d80098009
GLOBL q4x8ysc1<>(SB), RODATA|NOPTR, $32
DATA q4x8ysc2<>+0(SB)/8, $0x8006800680028002
DATA q4x8ysc2<>+8(SB)/8, $0x800e800e800a800a
DATA q4x8ysc2<>+16(SB)/8, $0x8006800680028002
DATA q4x8ysc2<>+24(SB)/8, $0x800e800e800a800a
GLOBL q4x8ysc2<>(SB), RODATA|NOPTR, $32
DATA q4x8ysc3<>+0(SB)/8, $0x8007800780038003
DATA q4x8ysc3<>+8(SB)/8, $0x800f800f800b800b
DATA q4x8ysc3<>+16(SB)/8, $0x8007800780038003
DATA q4x8ysc3<>+24(SB)/8, $0x800f800f800b800b
GLOBL q4x8ysc3<>(SB), RODATA|NOPTR, $32
DATA q4x8ymn01<>+0(SB)/8, $0x8005800480018000
DATA q4x8ymn01<>+8(SB)/8, $0x800d800c80098008
DATA q4x8ymn01<>+16(SB)/8, $0x8005800480018000
DATA q4x8ymn01<>+24(SB)/8, $0x800d800c80098008
GLOBL q4x8ymn01<>(SB), RODATA|NOPTR, $32
DATA q4x8ymn23<>+0(SB)/8, $0x8007800680038002
DATA q4x8ymn23<>+8(SB)/8, $0x800f800e800b800a
DATA q4x8ymn23<>+16(SB)/8, $0x8007800680038002
DATA q4x8ymn23<>+24(SB)/8, $0x800f800e800b800a
GLOBL q4x8ymn23<>(SB), RODATA|NOPTR, $32

#define X4COL(xr, slo, shi, xa, xb) \
	VPBROADCASTD xa(xr), Y2 \
	VPMADDUBSW   Y2, Y0, Y2 \
	VPADDW       Y2, slo, slo \
	VPBROADCASTD xb(xr), Y3 \
	VPMADDUBSW   Y3, Y1, Y3 \
	VPADDW       Y3, shi, shi

#define X4CHUNK(wo, xa, xb) \
	PREFETCHT0 (wo+PFD)(R8) \
	VMOVDQU    wo(R8), Y0 \
	VPSRLW     $4, Y0, Y1 \
	VPAND      Y15, Y0, Y0 \
	VPAND      Y15, Y1, Y1 \
	X4COL(R9, Y4, Y5, xa, xb) \
	X4COL(R10, Y6, Y7, xa, xb) \
	X4COL(R11, Y8, Y9, xa, xb) \
	X4COL(R12, Y10, Y11, xa, xb)

#define X4ACC(slo, shi, off) \
	VPMADDWD Y12, slo, slo \
	VPMADDWD Y13, shi, shi \
	VPADDD   slo, shi, shi \
	VPADDD   off(SP), shi, shi \
	VMOVDQU  shi, off(SP) \
	VPXOR    slo, slo, slo \
	VPXOR    shi, shi, shi

#define X4PAIR(ca, cb) \
	X4CHUNK(0, 4, 36) \
	X4CHUNK(32, 8, 40) \
	X4CHUNK(64, 12, 44) \
	X4CHUNK(96, 16, 48) \
	X4CHUNK(128, 20, 52) \
	X4CHUNK(160, 24, 56) \
	X4CHUNK(192, 28, 60) \
	X4CHUNK(224, 32, 64) \
	VPSHUFB ca, Y14, Y12 \
	VPSHUFB cb, Y14, Y13 \
	X4ACC(Y4, Y5, 64) \
	X4ACC(Y6, Y7, 96) \
	X4ACC(Y8, Y9, 128) \
	X4ACC(Y10, Y11, 160) \
	ADDQ $256, R8 \
	ADDQ $64, R9 \
	ADDQ $64, R10 \
	ADDQ $64, R11 \
	ADDQ $64, R12

// summs of vector c (block at xr): the rows' min pairs in Y12, Y13 (mins
// 0-3) and Y14, Y2 (mins 4-7) against its bsum pairs.
#define X4MIN(xr, off) \
	VMOVDQU      260(xr), Y0 \
	VPHADDW      Y0, Y0, Y0 \
	VMOVDQU      Y0, 448(SP) \
	VPBROADCASTD 448(SP), Y0 \
	VPMADDWD     Y0, Y12, Y3 \
	VPBROADCASTD 452(SP), Y0 \
	VPMADDWD     Y0, Y13, Y1 \
	VPADDD       Y1, Y3, Y3 \
	VPBROADCASTD 464(SP), Y0 \
	VPMADDWD     Y0, Y14, Y1 \
	VPADDD       Y1, Y3, Y3 \
	VPBROADCASTD 468(SP), Y0 \
	VPMADDWD     Y0, Y2, Y1 \
	VPADDD       Y1, Y3, Y3 \
	VMOVDQU      Y3, off(SP)

// The float step of vector c (its block at xr), d in Y12 and dmin in Y13.
#define X4FLOAT(xr, ia, im, fa) \
	VBROADCASTSS (xr), Y0 \
	VMULPS       Y0, Y12, Y1 \
	VMULPS       Y0, Y13, Y2 \
	VCVTDQ2PS    ia(SP), Y3 \
	VMULPS       Y1, Y3, Y3 \
	VCVTDQ2PS    im(SP), Y0 \
	VMULPS       Y2, Y0, Y0 \
	VSUBPS       Y0, Y3, Y3 \
	VADDPS       fa(SP), Y3, Y3 \
	VMOVUPS      Y3, fa(SP)

// func q4kX8Dot4AVX2(nb int, w, x *byte, ldx int, dst *float32, ldd int)
TEXT ·q4kX8Dot4AVX2(SB), NOSPLIT, $480-48
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), BX
	MOVQ dst+32(FP), DX
	MOVQ ldd+40(FP), R13
	SHLQ $2, R13
	VPBROADCASTQ kx8m0f<>(SB), Y15
	VPXOR        Y4, Y4, Y4
	VPXOR        Y5, Y5, Y5
	VPXOR        Y6, Y6, Y6
	VPXOR        Y7, Y7, Y7
	VPXOR        Y8, Y8, Y8
	VPXOR        Y9, Y9, Y9
	VPXOR        Y10, Y10, Y10
	VPXOR        Y11, Y11, Y11
	VMOVDQU      Y4, 320(SP)
	VMOVDQU      Y4, 352(SP)
	VMOVDQU      Y4, 384(SP)
	VMOVDQU      Y4, 416(SP)
	TESTQ CX, CX
	JZ    x4done

x4loop:
	VMOVDQU      32(SI), Y0
	VMOVDQU      64(SI), Y1
	VMOVDQU      96(SI), Y2
	VPBROADCASTQ kx8m3f<>(SB), Y12
	VPBROADCASTQ kx8m30<>(SB), Y13
	VPAND        Y12, Y0, Y3
	VMOVDQU      Y3, 0(SP)   // scales 0-3
	VPAND        Y12, Y1, Y14 // mins 0-3
	VPAND        Y15, Y2, Y3
	VPSRLW       $2, Y0, Y0
	VPAND        Y13, Y0, Y0
	VPOR         Y0, Y3, Y3
	VMOVDQU      Y3, 32(SP)  // scales 4-7
	VPSRLW       $4, Y2, Y2
	VPAND        Y15, Y2, Y2
	VPSRLW       $2, Y1, Y1
	VPAND        Y13, Y1, Y1
	VPOR         Y1, Y2, Y2  // mins 4-7
	VPSHUFB      q4x8ymn01<>(SB), Y14, Y12
	VPSHUFB      q4x8ymn23<>(SB), Y14, Y13
	VPSHUFB      q4x8ymn01<>(SB), Y2, Y14
	VPSHUFB      q4x8ymn23<>(SB), Y2, Y2

	MOVQ DI, R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	X4MIN(R9, 192)
	X4MIN(R10, 224)
	X4MIN(R11, 256)
	X4MIN(R12, 288)
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, 64(SP)
	VMOVDQU Y0, 96(SP)
	VMOVDQU Y0, 128(SP)
	VMOVDQU Y0, 160(SP)

	LEAQ    128(SI), R8
	VMOVDQU 0(SP), Y14
	X4PAIR(q4x8ysc0<>(SB), q4x8ysc1<>(SB))
	X4PAIR(q4x8ysc2<>(SB), q4x8ysc3<>(SB))
	VMOVDQU 32(SP), Y14
	X4PAIR(q4x8ysc0<>(SB), q4x8ysc1<>(SB))
	X4PAIR(q4x8ysc2<>(SB), q4x8ysc3<>(SB))

	VCVTPH2PS 0(SI), Y12
	VCVTPH2PS 16(SI), Y13
	X4FLOAT(DI, 64, 192, 320)
	LEAQ (DI)(BX*1), R9
	X4FLOAT(R9, 96, 224, 352)
	ADDQ BX, R9
	X4FLOAT(R9, 128, 256, 384)
	ADDQ BX, R9
	X4FLOAT(R9, 160, 288, 416)

	ADDQ $1152, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  x4loop

x4done:
	VMOVUPS 320(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    R13, DX
	VMOVUPS 352(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    R13, DX
	VMOVUPS 384(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    R13, DX
	VMOVUPS 416(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET
