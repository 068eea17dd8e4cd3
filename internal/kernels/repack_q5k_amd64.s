#include "textflag.h"

// The Q5_K x8 dot (repack_q5k.go has the layout): the Q4_K x8 kernel's
// lanes and arithmetic (repack_q4k_amd64.s), each code's fifth bit put in
// as 16 from the chunk's qh bytes, which hold bit j for sub-block j: a
// word shift moves bit j to bit 4 of its own byte (no bit crosses into
// the other byte of the word at these distances), and 0x10 keeps it.
// Codes reach 31, so a VPMADDUBSW pair sum is at most 2*31*128 = 7936 and
// four chunks add up in int16 before VPMADDWD applies the scale.

#define PFD 2048

// Each word of a row's dword lane takes the row's byte j (scales) or the
// bytes j and j+1 (pairs of mins); 0x80 zeroes the high bytes.
DATA q5x8sc0<>+0(SB)/8, $0x8004800480008000
DATA q5x8sc0<>+8(SB)/8, $0x800c800c80088008
GLOBL q5x8sc0<>(SB), RODATA|NOPTR, $16
DATA q5x8sc1<>+0(SB)/8, $0x8005800580018001
DATA q5x8sc1<>+8(SB)/8, $0x800d800d80098009
GLOBL q5x8sc1<>(SB), RODATA|NOPTR, $16
DATA q5x8sc2<>+0(SB)/8, $0x8006800680028002
DATA q5x8sc2<>+8(SB)/8, $0x800e800e800a800a
GLOBL q5x8sc2<>(SB), RODATA|NOPTR, $16
DATA q5x8sc3<>+0(SB)/8, $0x8007800780038003
DATA q5x8sc3<>+8(SB)/8, $0x800f800f800b800b
GLOBL q5x8sc3<>(SB), RODATA|NOPTR, $16
DATA q5x8mn01<>+0(SB)/8, $0x8005800480018000
DATA q5x8mn01<>+8(SB)/8, $0x800d800c80098008
GLOBL q5x8mn01<>(SB), RODATA|NOPTR, $16
DATA q5x8mn23<>+0(SB)/8, $0x8007800680038002
DATA q5x8mn23<>+8(SB)/8, $0x800f800e800b800a
GLOBL q5x8mn23<>(SB), RODATA|NOPTR, $16
DATA q5x8m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q5x8m0f<>(SB), RODATA|NOPTR, $8
DATA q5x8m3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL q5x8m3f<>(SB), RODATA|NOPTR, $8
DATA q5x8m30<>+0(SB)/8, $0x3030303030303030
GLOBL q5x8m30<>(SB), RODATA|NOPTR, $8

DATA q5x8m10<>+0(SB)/8, $0x1010101010101010
GLOBL q5x8m10<>(SB), RODATA|NOPTR, $8

// One chunk: codes at wo(R8), fifth bits at ho(SI), moved to bit 4 by
// shl/shr (sl, sh), activations at xa(R9) and xb(R9).
#define Q5X8CHUNK(wo, ho, opl, sl, oph, sh, xa, xb) \
	PREFETCHT0   (wo+PFD)(R8) \
	VMOVDQU      wo(R8), Y0 \
	VMOVDQU      ho(SI), Y4 \
	VPSRLW       $4, Y0, Y1 \
	VPAND        Y15, Y0, Y0 \
	VPAND        Y15, Y1, Y1 \
	opl          $sl, Y4, Y2 \
	VPAND        Y7, Y2, Y2 \
	VPOR         Y2, Y0, Y0 \
	oph          $sh, Y4, Y3 \
	VPAND        Y7, Y3, Y3 \
	VPOR         Y3, Y1, Y1 \
	VPBROADCASTD xa(R9), Y2 \
	VPBROADCASTD xb(R9), Y3 \
	VPMADDUBSW   Y2, Y0, Y0 \
	VPMADDUBSW   Y3, Y1, Y1 \
	VPADDW       Y0, Y12, Y12 \
	VPADDW       Y1, Y11, Y11

// Four chunks' int16 sums scaled into Y13 and cleared.
#define Q5X8FLUSH \
	VPMADDWD Y6, Y12, Y12 \
	VPMADDWD Y5, Y11, Y11 \
	VPADDD   Y12, Y13, Y13 \
	VPADDD   Y11, Y13, Y13 \
	VPXOR    Y12, Y12, Y12 \
	VPXOR    Y11, Y11, Y11

#define Q5X8PAIR(sv, ca, cb, opl, sl, oph, sh) \
	VBROADCASTI128 ca, Y6 \
	VPSHUFB   Y6, sv, Y6 \
	VBROADCASTI128 cb, Y5 \
	VPSHUFB   Y5, sv, Y5 \
	Q5X8CHUNK(0, 128, opl, sl, oph, sh, 0, 32) \
	Q5X8CHUNK(32, 160, opl, sl, oph, sh, 4, 36) \
	Q5X8CHUNK(64, 192, opl, sl, oph, sh, 8, 40) \
	Q5X8CHUNK(96, 224, opl, sl, oph, sh, 12, 44) \
	Q5X8FLUSH \
	Q5X8CHUNK(128, 256, opl, sl, oph, sh, 16, 48) \
	Q5X8CHUNK(160, 288, opl, sl, oph, sh, 20, 52) \
	Q5X8CHUNK(192, 320, opl, sl, oph, sh, 24, 56) \
	Q5X8CHUNK(224, 352, opl, sl, oph, sh, 28, 60) \
	Q5X8FLUSH \
	ADDQ      $256, R8 \
	ADDQ      $64, R9

// func q5kX8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q5kX8DotAVX2(SB), NOSPLIT, $32-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ q5x8m0f<>(SB), Y15
	VXORPS       Y14, Y14, Y14
	TESTQ CX, CX
	JZ    done

loop:
	VMOVDQU      32(SI), Y0
	VMOVDQU      64(SI), Y1
	VMOVDQU      96(SI), Y2
	VPBROADCASTQ q5x8m3f<>(SB), Y6
	VPBROADCASTQ q5x8m30<>(SB), Y7
	VPAND        Y6, Y0, Y10
	VPAND        Y6, Y1, Y3
	VPAND        Y15, Y2, Y9
	VPSRLW       $2, Y0, Y4
	VPAND        Y7, Y4, Y4
	VPOR         Y4, Y9, Y9
	VPSRLW       $4, Y2, Y5
	VPAND        Y15, Y5, Y5
	VPSRLW       $2, Y1, Y4
	VPAND        Y7, Y4, Y4
	VPOR         Y4, Y5, Y5

	VMOVDQU        260(DI), Y0
	VPHADDW        Y0, Y0, Y0
	VMOVDQU        Y0, (SP)
	VBROADCASTI128 q5x8mn01<>(SB), Y6
	VBROADCASTI128 q5x8mn23<>(SB), Y7
	VPSHUFB        Y6, Y3, Y1
	VPBROADCASTD   0(SP), Y2
	VPMADDWD       Y2, Y1, Y8
	VPSHUFB        Y7, Y3, Y1
	VPBROADCASTD   4(SP), Y2
	VPMADDWD       Y2, Y1, Y1
	VPADDD         Y1, Y8, Y8
	VPSHUFB        Y6, Y5, Y1
	VPBROADCASTD   16(SP), Y2
	VPMADDWD       Y2, Y1, Y1
	VPADDD         Y1, Y8, Y8
	VPSHUFB        Y7, Y5, Y1
	VPBROADCASTD   20(SP), Y2
	VPMADDWD       Y2, Y1, Y1
	VPADDD         Y1, Y8, Y8

	VPBROADCASTQ q5x8m10<>(SB), Y7
	LEAQ  384(SI), R8
	LEAQ  4(DI), R9
	VPXOR Y13, Y13, Y13
	VPXOR Y12, Y12, Y12
	VPXOR Y11, Y11, Y11
	Q5X8PAIR(Y10, q5x8sc0<>(SB), q5x8sc1<>(SB), VPSLLW, 4, VPSLLW, 3)
	Q5X8PAIR(Y10, q5x8sc2<>(SB), q5x8sc3<>(SB), VPSLLW, 2, VPSLLW, 1)
	Q5X8PAIR(Y9, q5x8sc0<>(SB), q5x8sc1<>(SB), VPSRLW, 0, VPSRLW, 1)
	Q5X8PAIR(Y9, q5x8sc2<>(SB), q5x8sc3<>(SB), VPSRLW, 2, VPSRLW, 3)

	VCVTDQ2PS    Y13, Y13
	VCVTDQ2PS    Y8, Y8
	VCVTPH2PS    0(SI), Y0
	VCVTPH2PS    16(SI), Y1
	VBROADCASTSS 0(DI), Y2
	VMULPS       Y2, Y0, Y0
	VMULPS       Y2, Y1, Y1
	VMULPS       Y0, Y13, Y13
	VMULPS       Y1, Y8, Y8
	VSUBPS       Y8, Y13, Y13
	VADDPS       Y13, Y14, Y14

	ADDQ $1408, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET
