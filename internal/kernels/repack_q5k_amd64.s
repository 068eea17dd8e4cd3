#include "textflag.h"
#include "repack_kquant_amd64.h"

// The Q5_K x8 dot (repack_q5k.go has the layout): the Q4_K x8 kernel's
// lanes and arithmetic (repack_q4k_amd64.s), each code's fifth bit put in
// as 16 from the chunk's qh bytes, which hold bit j for sub-block j: a
// word shift moves bit j to bit 4 of its own byte (no bit crosses into
// the other byte of the word at these distances), and 0x10 keeps it.
// Codes reach 31, so a VPMADDUBSW pair sum is at most 2*31*128 = 7936 and
// four chunks add up in int16 before VPMADDWD applies the scale.

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
	VPBROADCASTQ kx8m0f<>(SB), Y15
	VXORPS       Y14, Y14, Y14
	TESTQ CX, CX
	JZ    done

loop:
	KX8SCALEMIN

	VPBROADCASTQ q5x8m10<>(SB), Y7
	LEAQ  384(SI), R8
	LEAQ  4(DI), R9
	VPXOR Y13, Y13, Y13
	VPXOR Y12, Y12, Y12
	VPXOR Y11, Y11, Y11
	Q5X8PAIR(Y10, kx8sc0<>(SB), kx8sc1<>(SB), VPSLLW, 4, VPSLLW, 3)
	Q5X8PAIR(Y10, kx8sc2<>(SB), kx8sc3<>(SB), VPSLLW, 2, VPSLLW, 1)
	Q5X8PAIR(Y9, kx8sc0<>(SB), kx8sc1<>(SB), VPSRLW, 0, VPSRLW, 1)
	Q5X8PAIR(Y9, kx8sc2<>(SB), kx8sc3<>(SB), VPSRLW, 2, VPSRLW, 3)

	KX8FLOAT

	ADDQ $1408, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET
