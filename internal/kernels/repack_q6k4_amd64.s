#include "textflag.h"

// The Q6_K x8 dot for four vectors (repack_q6k_amd64.s has the
// one-vector kernel and the lanes' arithmetic; each vector's integer sums
// here are the same exact int32 and its float step the same, so its
// results are dot8's bits). The codes of a chunk are unpacked once for
// the four vectors; with four vectors' sums to keep there is no room for
// int16 sums of two chunks, so every chunk's VPMADDUBSW result goes
// through VPMADDWD by the scales into the vector's int32 sums.
//
// Registers: SI the group block, R9-R12 the four vectors' Q8_K blocks,
// Y0-Y3 the codes of the four quarters, Y4-Y7 the four vectors' int32
// sums, Y8-Y11 the quarters' scales, Y12-Y13 scratch, Y14 0x30 bytes,
// Y15 0x0f bytes; the float sums of vector c at 32c(SP).

// PFD: see repack_q4k_amd64.s.
#define PFD 2048

DATA q6x4m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6x4m0f<>(SB), RODATA|NOPTR, $8
DATA q6x4m30<>+0(SB)/8, $0x3030303030303030
GLOBL q6x4m30<>(SB), RODATA|NOPTR, $8

// The masks of repack_q6k_amd64.s: scale byte j of each row's dword into
// the high byte of both words.
DATA q6x4sc0<>+0(SB)/8, $0x0480048000800080
DATA q6x4sc0<>+8(SB)/8, $0x0c800c8008800880
DATA q6x4sc0<>+16(SB)/8, $0x0480048000800080
DATA q6x4sc0<>+24(SB)/8, $0x0c800c8008800880
GLOBL q6x4sc0<>(SB), RODATA|NOPTR, $32
DATA q6x4sc1<>+0(SB)/8, $0x0581058101810181
DATA q6x4sc1<>+8(SB)/8, $0x0d810d8109810981
DATA q6x4sc1<>+16(SB)/8, $0x0581058101810181
DATA q6x4sc1<>+24(SB)/8, $0x0d810d8109810981
GLOBL q6x4sc1<>(SB), RODATA|NOPTR, $32
DATA q6x4sc2<>+0(SB)/8, $0x0682068202820282
DATA q6x4sc2<>+8(SB)/8, $0x0e820e820a820a82
DATA q6x4sc2<>+16(SB)/8, $0x0682068202820282
DATA q6x4sc2<>+24(SB)/8, $0x0e820e820a820a82
GLOBL q6x4sc2<>(SB), RODATA|NOPTR, $32
DATA q6x4sc3<>+0(SB)/8, $0x0783078303830383
DATA q6x4sc3<>+8(SB)/8, $0x0f830f830b830b83
DATA q6x4sc3<>+16(SB)/8, $0x0783078303830383
DATA q6x4sc3<>+24(SB)/8, $0x0f830f830b830b83
GLOBL q6x4sc3<>(SB), RODATA|NOPTR, $32

// One vector's part of a chunk: its activations of quarter s at xs(rv)
// against the codes, times the scales, into acc.
#define Q6X4VEC(rv, acc, x0, x1, x2, x3) \
	VPBROADCASTD x0(rv), Y12 \
	VPMADDUBSW   Y12, Y0, Y12 \
	VPMADDWD     Y8, Y12, Y12 \
	VPADDD       Y12, acc, acc \
	VPBROADCASTD x1(rv), Y13 \
	VPMADDUBSW   Y13, Y1, Y13 \
	VPMADDWD     Y9, Y13, Y13 \
	VPADDD       Y13, acc, acc \
	VPBROADCASTD x2(rv), Y12 \
	VPMADDUBSW   Y12, Y2, Y12 \
	VPMADDWD     Y10, Y12, Y12 \
	VPADDD       Y12, acc, acc \
	VPBROADCASTD x3(rv), Y13 \
	VPMADDUBSW   Y13, Y3, Y13 \
	VPMADDWD     Y11, Y13, Y13 \
	VPADDD       Y13, acc, acc

// Chunk k of the half h: the codes of its four quarters (ql runs at at
// and at+32, qh at at+64), then the four vectors.
#define Q6X4CHUNK(h, k) \
	VMOVDQU (192+96*(8*(h)+(k)))(SI), Y12 \
	VMOVDQU (128+96*(8*(h)+(k)))(SI), Y13 \
	VPAND   Y15, Y13, Y0 \
	VPSLLW  $4, Y12, Y2 \
	VPAND   Y14, Y2, Y2 \
	VPOR    Y2, Y0, Y0 \
	VPSRLW  $4, Y13, Y2 \
	VPAND   Y15, Y2, Y2 \
	VPAND   Y14, Y12, Y13 \
	VPOR    Y13, Y2, Y2 \
	VMOVDQU (160+96*(8*(h)+(k)))(SI), Y13 \
	VPAND   Y15, Y13, Y1 \
	VPSLLW  $2, Y12, Y3 \
	VPAND   Y14, Y3, Y3 \
	VPOR    Y3, Y1, Y1 \
	VPSRLW  $4, Y13, Y3 \
	VPAND   Y15, Y3, Y3 \
	VPSRLW  $2, Y12, Y13 \
	VPAND   Y14, Y13, Y13 \
	VPOR    Y13, Y3, Y3 \
	Q6X4VEC(R9, Y4, 4+128*(h)+4*(k), 36+128*(h)+4*(k), 68+128*(h)+4*(k), 100+128*(h)+4*(k)) \
	Q6X4VEC(R10, Y5, 4+128*(h)+4*(k), 36+128*(h)+4*(k), 68+128*(h)+4*(k), 100+128*(h)+4*(k)) \
	Q6X4VEC(R11, Y6, 4+128*(h)+4*(k), 36+128*(h)+4*(k), 68+128*(h)+4*(k), 100+128*(h)+4*(k)) \
	Q6X4VEC(R12, Y7, 4+128*(h)+4*(k), 36+128*(h)+4*(k), 68+128*(h)+4*(k), 100+128*(h)+4*(k))

// The offset of 32 out of vector rv's sums acc for the scales of the
// phase (h, a).
#define Q6X4OFF(rv, acc, h, a) \
	VPBROADCASTW (260+2*(8*(h)+(a)))(rv), Y0 \
	VPMADDWD     Y8, Y0, Y0 \
	VPBROADCASTW (260+2*(8*(h)+2+(a)))(rv), Y12 \
	VPMADDWD     Y9, Y12, Y12 \
	VPADDD       Y12, Y0, Y0 \
	VPBROADCASTW (260+2*(8*(h)+4+(a)))(rv), Y12 \
	VPMADDWD     Y10, Y12, Y12 \
	VPADDD       Y12, Y0, Y0 \
	VPBROADCASTW (260+2*(8*(h)+6+(a)))(rv), Y12 \
	VPMADDWD     Y11, Y12, Y12 \
	VPADDD       Y12, Y0, Y0 \
	VPSLLD       $4, Y0, Y0 \
	VPSUBD       Y0, acc, acc

// The phase (h, a) of repack_q6k_amd64.s: the scales 8h+2s+a of quarter
// s, the offset out of each vector's sums, the four chunks (the pairs of
// chunks prefetch as the one-vector kernel's do).
#define Q6X4PHASE(h, a, ma, mb) \
	VMOVDQU  (64*(h))(SI), Y12 \
	VPSHUFB  ma, Y12, Y8 \
	VPSHUFB  mb, Y12, Y9 \
	VMOVDQU  (64*(h)+32)(SI), Y12 \
	VPSHUFB  ma, Y12, Y10 \
	VPSHUFB  mb, Y12, Y11 \
	VPSRAW   $8, Y8, Y8 \
	VPSRAW   $8, Y9, Y9 \
	VPSRAW   $8, Y10, Y10 \
	VPSRAW   $8, Y11, Y11 \
	Q6X4OFF(R9, Y4, h, a) \
	Q6X4OFF(R10, Y5, h, a) \
	Q6X4OFF(R11, Y6, h, a) \
	Q6X4OFF(R12, Y7, h, a) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a)))(SI) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a))+53)(SI) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a))+106)(SI) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a))+159)(SI) \
	Q6X4CHUNK(h, 4*(a)) \
	Q6X4CHUNK(h, 4*(a)+1) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a)+2))(SI) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a)+2)+53)(SI) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a)+2)+106)(SI) \
	PREFETCHT0 (PFD+105*(8*(h)+4*(a)+2)+159)(SI) \
	Q6X4CHUNK(h, 4*(a)+2) \
	Q6X4CHUNK(h, 4*(a)+3)

// Vector rv's float step (d*yd rounded, times isum rounded, added), d of
// the rows in Y0, its float sums at fa(SP).
#define Q6X4FLOAT(rv, acc, fa) \
	VBROADCASTSS (rv), Y12 \
	VMULPS       Y12, Y0, Y12 \
	VCVTDQ2PS    acc, Y13 \
	VMULPS       Y12, Y13, Y13 \
	VADDPS       fa(SP), Y13, Y13 \
	VMOVUPS      Y13, fa(SP)

// func q6kX8Dot4AVX2(nb int, w, x *byte, ldx int, dst *float32, ldd int)
TEXT ·q6kX8Dot4AVX2(SB), NOSPLIT, $128-48
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), BX
	MOVQ dst+32(FP), DX
	MOVQ ldd+40(FP), R13
	SHLQ $2, R13
	VPBROADCASTQ q6x4m0f<>(SB), Y15
	VPBROADCASTQ q6x4m30<>(SB), Y14
	VXORPS       Y0, Y0, Y0
	VMOVUPS      Y0, 0(SP)
	VMOVUPS      Y0, 32(SP)
	VMOVUPS      Y0, 64(SP)
	VMOVUPS      Y0, 96(SP)
	TESTQ CX, CX
	JZ    done

loop:
	MOVQ  DI, R9
	LEAQ  (R9)(BX*1), R10
	LEAQ  (R10)(BX*1), R11
	LEAQ  (R11)(BX*1), R12
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	Q6X4PHASE(0, 0, q6x4sc0<>(SB), q6x4sc2<>(SB))
	Q6X4PHASE(0, 1, q6x4sc1<>(SB), q6x4sc3<>(SB))
	Q6X4PHASE(1, 0, q6x4sc0<>(SB), q6x4sc2<>(SB))
	Q6X4PHASE(1, 1, q6x4sc1<>(SB), q6x4sc3<>(SB))

	VCVTPH2PS 1664(SI), Y0
	Q6X4FLOAT(R9, Y4, 0)
	Q6X4FLOAT(R10, Y5, 32)
	Q6X4FLOAT(R11, Y6, 64)
	Q6X4FLOAT(R12, Y7, 96)

	ADDQ $1680, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS 0(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    R13, DX
	VMOVUPS 32(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    R13, DX
	VMOVUPS 64(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    R13, DX
	VMOVUPS 96(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET
