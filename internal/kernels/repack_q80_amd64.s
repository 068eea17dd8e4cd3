#include "textflag.h"

// PFD is how far ahead the weights are prefetched, as in the Q4_K x8
// kernel (repack_q4k_amd64.s has the measurements).
#define PFD 2048

// The Q8_0 x8 dot (repack_q80.go has the layout): eight rows against one
// Q8_0 vector, one 272-byte group block (32 values of each row) per loop
// iteration, every vector lane a row.
//
// Both operands are signed, and VPMADDUBSW's sign trick (|w| against x
// signed by w) is wrong for x = -128 under a negative w, so the products
// are VPMADDWD's, exact for every byte: the activations' even and odd
// bytes are sign-extended to words once a block (on the stack, so that a
// VPBROADCASTD takes the pair of one chunk), and a chunk's weights give
// 256 times their odd bytes (VPAND 0xff00) and 256 times their even bytes
// (VPSLLW 8) as words, without a shift back. Each row's lane sums 256
// times its block sum (at most 2^27), VPSRAD 8 makes it the exact int32
// sum, and the float step is dotQ80Canon's: isum*(dw*dx) rounded, then
// added.

DATA q8x8mhi<>+0(SB)/8, $0xff00ff00ff00ff00
GLOBL q8x8mhi<>(SB), RODATA|NOPTR, $8

// One chunk k: the weights at 32k(SI), the activation words at 4k(SP)
// (even) and 32+4k(SP) (odd), into the int32 sums Y12.
#define Q8X8CHUNK(k) \
	VMOVDQU      (32*(k))(SI), Y0 \
	VPAND        Y15, Y0, Y1 \
	VPSLLW       $8, Y0, Y0 \
	VPBROADCASTD (4*(k))(SP), Y2 \
	VPBROADCASTD (32+4*(k))(SP), Y3 \
	VPMADDWD     Y2, Y0, Y0 \
	VPMADDWD     Y3, Y1, Y1 \
	VPADDD       Y0, Y12, Y12 \
	VPADDD       Y1, Y12, Y12

// func q80X8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q80X8DotAVX2(SB), NOSPLIT, $64-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ q8x8mhi<>(SB), Y15
	VXORPS       Y13, Y13, Y13
	TESTQ CX, CX
	JZ    done

loop:
	// The block's 272 bytes PFD ahead, at most 55 bytes apart so that
	// every line is touched.
	PREFETCHT0 (PFD)(SI)
	PREFETCHT0 (PFD+55)(SI)
	PREFETCHT0 (PFD+110)(SI)
	PREFETCHT0 (PFD+165)(SI)
	PREFETCHT0 (PFD+220)(SI)

	// Activation words: word i of the even half is value 2i, of the odd
	// half value 2i+1.
	VMOVDQU 2(DI), Y0
	VPSLLW  $8, Y0, Y1
	VPSRAW  $8, Y1, Y1
	VPSRAW  $8, Y0, Y0
	VMOVDQU Y1, (SP)
	VMOVDQU Y0, 32(SP)

	VPXOR Y12, Y12, Y12
	Q8X8CHUNK(0)
	Q8X8CHUNK(1)
	Q8X8CHUNK(2)
	Q8X8CHUNK(3)
	Q8X8CHUNK(4)
	Q8X8CHUNK(5)
	Q8X8CHUNK(6)
	Q8X8CHUNK(7)

	// acc += isum*(dw*dx), rounded as dotQ80Canon does.
	VPSRAD       $8, Y12, Y12
	VCVTDQ2PS    Y12, Y12
	VCVTPH2PS    256(SI), Y0
	VPBROADCASTW 0(DI), X1
	VCVTPH2PS    X1, Y1
	VMULPS       Y1, Y0, Y0
	VMULPS       Y0, Y12, Y12
	VADDPS       Y12, Y13, Y13

	ADDQ $272, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS Y13, (DX)
	VZEROUPPER
	RET
