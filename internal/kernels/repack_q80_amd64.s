#include "textflag.h"

// PFD is how far ahead the weights are prefetched, as in the Q4_K x8
// kernel (repack_q4k_amd64.s has the measurements).
#define PFD 2048

// The Q8_0 x8 dot (repack_q80.go has the layout and the arithmetic):
// eight rows against one Q8_0 vector, one 272-byte group block (32
// values of each row) per loop iteration, every vector lane a row.
//
// Both operands are signed, and VPMADDUBSW's sign trick (|w| against x
// signed by w) is wrong for x = -128 under a negative w, so the products
// are VPMADDWD's, exact for every byte: the activations' even and odd
// bytes are sign-extended to words once a block (on the stack, so that a
// VPBROADCASTD takes the pair of one chunk), and a chunk's weights give
// 256 times their odd bytes (VPAND 0xff00) and 256 times their even bytes
// (VPSLLW 8) as words. Chunk k's sums (256 times the exact sum of the
// chunk's four values, VPSRAD 8 takes the factor out) go, times dw*dx and
// fused, into the float sums Y4+k: the plain kernel's lane k for each
// row. At the end the eight are added in HSUM_Y0's tree.

DATA q80x8mhi<>+0(SB)/8, $0xff00ff00ff00ff00
GLOBL q80x8mhi<>(SB), RODATA|NOPTR, $8

// One chunk k: the weights at 32k(SI), the activation words at 4k(SP)
// (even) and 32+4k(SP) (odd), into the float sums acc.
#define Q80X8CHUNK(k, acc) \
	VMOVDQU      (32*(k))(SI), Y0 \
	VPAND        Y15, Y0, Y1 \
	VPSLLW       $8, Y0, Y0 \
	VPBROADCASTD (4*(k))(SP), Y2 \
	VPBROADCASTD (32+4*(k))(SP), Y3 \
	VPMADDWD     Y2, Y0, Y0 \
	VPMADDWD     Y3, Y1, Y1 \
	VPADDD       Y1, Y0, Y0 \
	VPSRAD       $8, Y0, Y0 \
	VCVTDQ2PS    Y0, Y0 \
	VFMADD231PS  Y12, Y0, acc

// func q80X8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q80X8DotAVX2(SB), NOSPLIT, $64-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ q80x8mhi<>(SB), Y15
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7
	VXORPS       Y8, Y8, Y8
	VXORPS       Y9, Y9, Y9
	VXORPS       Y10, Y10, Y10
	VXORPS       Y11, Y11, Y11
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

	// dw*dx of each row.
	VCVTPH2PS    256(SI), Y12
	VPBROADCASTW 0(DI), X13
	VCVTPH2PS    X13, Y13
	VMULPS       Y13, Y12, Y12

	Q80X8CHUNK(0, Y4)
	Q80X8CHUNK(1, Y5)
	Q80X8CHUNK(2, Y6)
	Q80X8CHUNK(3, Y7)
	Q80X8CHUNK(4, Y8)
	Q80X8CHUNK(5, Y9)
	Q80X8CHUNK(6, Y10)
	Q80X8CHUNK(7, Y11)

	ADDQ $272, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop

done:
	VADDPS  Y8, Y4, Y4
	VADDPS  Y9, Y5, Y5
	VADDPS  Y10, Y6, Y6
	VADDPS  Y11, Y7, Y7
	VADDPS  Y6, Y4, Y4
	VADDPS  Y7, Y5, Y5
	VADDPS  Y5, Y4, Y4
	VMOVUPS Y4, (DX)
	VZEROUPPER
	RET
