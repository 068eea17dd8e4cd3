#include "textflag.h"

// The Q4_0 x8 dot (repack_q40.go has the layout): eight rows against one
// Q8_0 vector, one 144-byte group block (32 values of each row) per loop
// iteration, every vector lane a row. The codes go in unsigned (0..15):
// VPMADDUBSW against the broadcast activations gives each row two int16
// partial sums of q*x (four chunks of at most 2*15*128 each add up
// without overflow), VPMADDWD by ones adds them in int32, and 8*sum(x),
// the block's activations summed once for the eight rows, takes the
// offset out: the exact sum of (q-8)*x. Then dotQ40Canon's float step.

DATA q40x8m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q40x8m0f<>(SB), RODATA|NOPTR, $8
DATA q40x8one8<>+0(SB)/8, $0x0101010101010101
GLOBL q40x8one8<>(SB), RODATA|NOPTR, $8
DATA q40x8one16<>+0(SB)/8, $0x0001000100010001
GLOBL q40x8one16<>(SB), RODATA|NOPTR, $8

// PFD: see repack_q4k_amd64.s (the same distance, not tuned for Q4_0).
#define PFD 2048

#define Q40CHUNK(wo, xa, xb) \
	VMOVDQU      wo(SI), Y0 \
	VPSRLW       $4, Y0, Y1 \
	VPAND        Y15, Y0, Y0 \
	VPAND        Y15, Y1, Y1 \
	VPBROADCASTD xa(DI), Y2 \
	VPBROADCASTD xb(DI), Y3 \
	VPMADDUBSW   Y2, Y0, Y0 \
	VPMADDUBSW   Y3, Y1, Y1 \
	VPADDW       Y0, Y11, Y11 \
	VPADDW       Y1, Y11, Y11

// func q40X8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q40X8DotAVX2(SB), NOSPLIT, $0-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ q40x8m0f<>(SB), Y15
	VPBROADCASTQ q40x8one8<>(SB), Y13
	VPBROADCASTQ q40x8one16<>(SB), Y12
	VXORPS       Y14, Y14, Y14
	TESTQ CX, CX
	JZ    q40done

q40loop:
	PREFETCHT0 PFD(SI)
	PREFETCHT0 (PFD+64)(SI)
	PREFETCHT0 (PFD+128)(SI)
	// 8*sum(x) of the block, in every lane.
	VMOVDQU    2(DI), Y4
	VPMADDUBSW Y4, Y13, Y4
	VPMADDWD   Y12, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD     X5, X4, X4
	VPSHUFD    $0x4e, X4, X5
	VPADDD     X5, X4, X4
	VPSHUFD    $0xb1, X4, X5
	VPADDD     X5, X4, X4
	VPSLLD     $3, X4, X4
	VPBROADCASTD X4, Y4

	VPXOR Y11, Y11, Y11
	Q40CHUNK(16, 2, 18)
	Q40CHUNK(48, 6, 22)
	Q40CHUNK(80, 10, 26)
	Q40CHUNK(112, 14, 30)
	VPMADDWD Y12, Y11, Y11
	VPSUBD   Y4, Y11, Y11

	VCVTDQ2PS    Y11, Y11
	VCVTPH2PS    0(SI), Y0
	VPBROADCASTW 0(DI), X1
	VCVTPH2PS    X1, Y1
	VMULPS       Y1, Y0, Y0
	VMULPS       Y0, Y11, Y11
	VADDPS       Y11, Y14, Y14

	ADDQ $144, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q40loop

q40done:
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET
