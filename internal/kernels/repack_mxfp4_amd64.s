#include "textflag.h"

// PFD is how far ahead the weights are prefetched, as in the Q4_K x8
// kernel (repack_kquant_amd64.h has the measurements).
#define PFD 2048

// The MXFP4 x8 dot (repack_mxfp4.go has the layout and the arithmetic):
// eight rows against one Q8_0 vector, one 136-byte group block (32
// values of each row) per loop iteration, every vector lane a row.
//
// A chunk's 32 code bytes give, by VPSHUFB on the codebook plus 12 (so
// unsigned, 0..24), four values of each row from the low nibbles and
// four from the high ones. VPMADDUBSW against the four broadcast
// activations and VPMADDWD by ones make each row's exact sum of the four
// plus 12 times the activations' sum, which the block's corrections (12
// times each four activations' sum, on the stack, one VPBROADCASTD a
// chunk) take out: the plain kernel's lane k for every row, exact for
// every byte. Times the rows' d (the exponent's half scale times dx), it
// goes fused into the float sums Y4+k; at the end the eight are added in
// HSUM_Y0's tree.

DATA mx8m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL mx8m0f<>(SB), RODATA|NOPTR, $8
DATA mx8twelve<>+0(SB)/8, $0x0c0c0c0c0c0c0c0c
GLOBL mx8twelve<>(SB), RODATA|NOPTR, $8
DATA mx8one16<>+0(SB)/8, $0x0001000100010001
GLOBL mx8one16<>(SB), RODATA|NOPTR, $8
DATA mx8m80<>+0(SB)/8, $0x8080808080808080
GLOBL mx8m80<>(SB), RODATA|NOPTR, $8
DATA mx8one32<>+0(SB)/8, $0x0000000100000001
DATA mx8one32<>+8(SB)/8, $0x0000000100000001
DATA mx8one32<>+16(SB)/8, $0x0000000100000001
DATA mx8one32<>+24(SB)/8, $0x0000000100000001
GLOBL mx8one32<>(SB), RODATA|NOPTR, $32
DATA mx8sub<>+0(SB)/8, $0x0020000000200000
DATA mx8sub<>+8(SB)/8, $0x0020000000200000
DATA mx8sub<>+16(SB)/8, $0x0020000000200000
DATA mx8sub<>+24(SB)/8, $0x0020000000200000
GLOBL mx8sub<>(SB), RODATA|NOPTR, $32

// MX8SCALE puts the eight rows' half scales (quant.E8M0ToF32Half of the
// exponents at 128(SI)) into dst: (e-1)<<23 for e >= 2, else the
// subnormal 0x00200000<<e. Y0-Y3 are clobbered.
#define MX8SCALE(dst) \
	VPMOVZXBD 128(SI), Y0 \
	VPSUBD    mx8one32<>(SB), Y0, Y1 \
	VPSLLD    $23, Y1, Y1 \
	VMOVDQU   mx8sub<>(SB), Y2 \
	VPSLLVD   Y0, Y2, Y2 \
	VPCMPGTD  mx8one32<>(SB), Y0, Y3 \
	VPBLENDVB Y3, Y1, Y2, dst

// MX8CODES unpacks chunk k's codes plus 12: the low nibbles' values into
// Y0, the high ones' into Y1 (Y15 = 0x0f, Y14 = the codebook).
#define MX8CODES(k) \
	VMOVDQU (32*(k))(SI), Y0 \
	VPSRLW  $4, Y0, Y1 \
	VPAND   Y15, Y0, Y0 \
	VPAND   Y15, Y1, Y1 \
	VPSHUFB Y0, Y14, Y0 \
	VPSHUFB Y1, Y14, Y1

// MX8LANE adds one lane of the block, codes in u, its four activations
// at xa(xr), their correction at ca(SP), d in d, to acc (a register).
#define MX8LANE(u, xr, xa, ca, d, acc) \
	VPBROADCASTD xa(xr), Y2 \
	VPMADDUBSW   Y2, u, Y2 \
	VPMADDWD     Y13, Y2, Y2 \
	VPBROADCASTD ca(SP), Y3 \
	VPSUBD       Y3, Y2, Y2 \
	VCVTDQ2PS    Y2, Y2 \
	VFMADD231PS  d, Y2, acc

#define MX8CHUNK(k, alo, ahi) \
	MX8CODES(k) \
	MX8LANE(Y0, DI, 2+4*(k), 4*(k), Y12, alo) \
	MX8LANE(Y1, DI, 18+4*(k), 16+4*(k), Y12, ahi)

// func mxfp4X8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·mxfp4X8DotAVX2(SB), NOSPLIT, $32-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ   mx8m0f<>(SB), Y15
	VBROADCASTI128 ·mxfp4TabU12(SB), Y14
	VPBROADCASTQ   mx8one16<>(SB), Y13
	VXORPS         Y4, Y4, Y4
	VXORPS         Y5, Y5, Y5
	VXORPS         Y6, Y6, Y6
	VXORPS         Y7, Y7, Y7
	VXORPS         Y8, Y8, Y8
	VXORPS         Y9, Y9, Y9
	VXORPS         Y10, Y10, Y10
	VXORPS         Y11, Y11, Y11

loop:
	// The block's 136 bytes PFD ahead: three lines at most.
	PREFETCHT0 (PFD)(SI)
	PREFETCHT0 (PFD+64)(SI)
	PREFETCHT0 (PFD+135)(SI)

	// The corrections: int32 k is 12 times the sum of values 4k..4k+3.
	VPBROADCASTQ mx8twelve<>(SB), Y0
	VPMADDUBSW   2(DI), Y0, Y0
	VPMADDWD     Y13, Y0, Y0
	VMOVDQU      Y0, (SP)

	// d of each row: the half scale times dx, rounded.
	MX8SCALE(Y12)
	VPBROADCASTW 0(DI), X1
	VCVTPH2PS    X1, Y1
	VMULPS       Y1, Y12, Y12

	MX8CHUNK(0, Y4, Y8)
	MX8CHUNK(1, Y5, Y9)
	MX8CHUNK(2, Y6, Y10)
	MX8CHUNK(3, Y7, Y11)

	ADDQ $136, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop

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

// The four-vector form: the codes of a chunk are unpacked once for the
// four vectors, and so is the correction, which here comes from the
// weights: the codes go in signed (the codebook itself) and the
// activations unsigned, plus 128 (XORed once a block into vector v's
// copy at 32v(SP)), so that VPMADDUBSW gives each pair's products plus
// 128 times the pair's codes, which a VPMADDUBSW of the codes by 128
// (Y4, Y5, one for the four vectors) gives to subtract: the same exact
// lanes as the one-vector kernel's. The 32 float sums (vector v's lane k
// at (8v+k)*32(DX), row r at 4r) stay in memory, each updated by a
// VFMADD213PS from it and a store back; vector v's d is in Y8+v.
#define MX84LANE(w, c, xa, d, at) \
	VPBROADCASTD xa(SP), Y2 \
	VPMADDUBSW   w, Y2, Y2 \
	VPSUBW       c, Y2, Y2 \
	VPMADDWD     Y13, Y2, Y2 \
	VCVTDQ2PS    Y2, Y2 \
	VFMADD213PS  at(DX), d, Y2 \
	VMOVUPS      Y2, at(DX)

#define MX84COL(k, v, d) \
	MX84LANE(Y0, Y4, 32*(v)+4*(k), d, 32*(8*(v)+(k))) \
	MX84LANE(Y1, Y5, 32*(v)+16+4*(k), d, 32*(8*(v)+4+(k)))

#define MX84CHUNK(k) \
	MX8CODES(k) \
	VPMADDUBSW Y0, Y12, Y4 \
	VPMADDUBSW Y1, Y12, Y5 \
	MX84COL(k, 0, Y8) \
	MX84COL(k, 1, Y9) \
	MX84COL(k, 2, Y10) \
	MX84COL(k, 3, Y11)

// One vector's d (Y12 holds the half scales).
#define MX84D(xr, d) \
	VPBROADCASTW 0(xr), X1 \
	VCVTPH2PS    X1, Y1 \
	VMULPS       Y1, Y12, d

// One vector's activations plus 128 (Y12 = 0x80s) to 32v(SP).
#define MX84X(v, xr) \
	VMOVDQU 2(xr), Y2 \
	VPXOR   Y12, Y2, Y2 \
	VMOVDQU Y2, (32*(v))(SP)

// func mxfp4X8Dot4AVX2(nb int, w, x *byte, ldx int, lanes *[4][8][8]float32)
TEXT ·mxfp4X8Dot4AVX2(SB), NOSPLIT, $128-40
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), R9
	MOVQ ldx+24(FP), BX
	MOVQ lanes+32(FP), DX
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	VPBROADCASTQ   mx8m0f<>(SB), Y15
	VBROADCASTI128 ·mxfp4Tab(SB), Y14
	VPBROADCASTQ   mx8one16<>(SB), Y13

loop4:
	PREFETCHT0 (PFD)(SI)
	PREFETCHT0 (PFD+64)(SI)
	PREFETCHT0 (PFD+135)(SI)
	MX8SCALE(Y12)
	MX84D(R9, Y8)
	MX84D(R10, Y9)
	MX84D(R11, Y10)
	MX84D(R12, Y11)
	VPBROADCASTQ mx8m80<>(SB), Y12
	MX84X(0, R9)
	MX84X(1, R10)
	MX84X(2, R11)
	MX84X(3, R12)
	MX84CHUNK(0)
	MX84CHUNK(1)
	MX84CHUNK(2)
	MX84CHUNK(3)
	ADDQ $136, SI
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $34, R12
	DECQ CX
	JNZ  loop4

	VZEROUPPER
	RET
