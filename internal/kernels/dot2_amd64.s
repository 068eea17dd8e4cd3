//go:build amd64

#include "textflag.h"

// Row dots for Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 and BF16, with the Go
// references' signature (n int, w, x []byte) float32.
//
// The AVX-512 VNNI kernels take two 32-value blocks per 512-bit register,
// as dot_amd64.s does: weights are unpacked to one byte per value, VPDPBUSD
// sums exact u8*s8 products into int32 lanes (8 lanes per block), and the
// lanes are converted to float and multiplied by the block's combined scale.
// Weight values that are signed (IQ4_NL, MXFP4 codebooks) move their sign
// onto the activation (|w| * sign(w)*x; Q8_0 activations lie in [-127, 127]
// so negating them is exact); offset formats (Q5_0: q-16) multiply the
// unsigned q and subtract 16*sum(x), another VPDPBUSD with a vector of 16s.
// The AVX2 kernels take one block per step with VPMADDUBSW + VPMADDWD.
//
// Q4_1 and Q5_1 add m*s per block (weight minimum times the Q8_1
// activation block's d*sum(q)). Both halves come from one 32-bit load each:
// VCVTPH2PS of (d, m) times VCVTPH2PS of (d, s) gives (d*d, m*s); lane 0
// is the block scale, lane 1 is accumulated in X13 and added at the end.

// Nibble unpacking: 16 bytes broadcast to both 128-bit halves of each
// 256-bit half, the upper one shifted right by 4, so after masking with 15
// byte j holds value j of the block.
DATA nibshift<>+0(SB)/8, $0
DATA nibshift<>+8(SB)/8, $0
DATA nibshift<>+16(SB)/8, $4
DATA nibshift<>+24(SB)/8, $4
DATA nibshift<>+32(SB)/8, $0
DATA nibshift<>+40(SB)/8, $0
DATA nibshift<>+48(SB)/8, $4
DATA nibshift<>+56(SB)/8, $4
GLOBL nibshift<>(SB), RODATA|NOPTR, $64

// AVX2 spread of a 32-bit mask to 32 bytes: byte j takes byte j/8 of the
// mask (VPSHUFB), then tests bit j%8.
DATA qhshuf<>+0(SB)/8, $0x0000000000000000
DATA qhshuf<>+8(SB)/8, $0x0101010101010101
DATA qhshuf<>+16(SB)/8, $0x0202020202020202
DATA qhshuf<>+24(SB)/8, $0x0303030303030303
GLOBL qhshuf<>(SB), RODATA|NOPTR, $32

DATA qhbits<>+0(SB)/8, $0x8040201008040201
GLOBL qhbits<>(SB), RODATA|NOPTR, $8

// Reduce the float accumulator Z0 to Y0 before the one-block tail.
#define REDUCE_Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS        Y1, Y0, Y0

// Sum the 8 lanes of Y0 into X0's low lane; HSUM_Y0_KEEP leaves the upper
// register halves (a rows kernel's constants) alone.
#define HSUM_Y0_KEEP \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVHLPS     X0, X0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVSHDUP    X0, X1     \
	VADDSS       X1, X0, X0

#define HSUM_Y0 \
	HSUM_Y0_KEEP \
	VZEROUPPER

// Add lane 1 of X13 (the m*s sum) to X0.
#define ADD_MS \
	VMOVSHDUP X13, X13 \
	VADDSS    X13, X0, X0

// Unpack the nibbles of two blocks at a(SI) and b(SI) into Z1, and of one
// block at a(SI) into Y1. Needs Z8 = 15s and Z11 = nibshift.
#define NIB2(a, b) \
	VBROADCASTI32X4 a(SI), Y1       \
	VBROADCASTI32X4 b(SI), Y5       \
	VINSERTI64X4    $1, Y5, Z1, Z1  \
	VPSRLVQ         Z11, Z1, Z1     \
	VPANDQ          Z8, Z1, Z1

#define NIB1(a) \
	VBROADCASTI32X4 a(SI), Y1 \
	VPSRLVQ         Y11, Y1, Y1 \
	VPANDQ          Y8, Y1, Y1

// Activation quants of two blocks into Z2, of one into Y2.
#define XQ2(a, b) \
	VMOVDQU8     a(DI), Y2 \
	VINSERTI64X4 $1, b(DI), Z2, Z2

#define XQ1(a) \
	VMOVDQU8 a(DI), Y2

// Combined f16 scales d(w)*d(x) of two blocks into Z4 (8 lanes each), of
// one into Y4.
#define SC2(wa, wb, xa, xb) \
	VPBROADCASTW wa(SI), X4        \
	VPBROADCASTW wb(SI), X5        \
	VINSERTI128  $1, X5, Y4, Y4    \
	VCVTPH2PS    Y4, Z4            \
	VPBROADCASTW xa(DI), X6        \
	VPBROADCASTW xb(DI), X7        \
	VINSERTI128  $1, X7, Y6, Y6    \
	VCVTPH2PS    Y6, Z6            \
	VMULPS       Z6, Z4, Z4

#define SC1(wa, xa) \
	VPBROADCASTW wa(SI), X4 \
	VCVTPH2PS    X4, Y4     \
	VPBROADCASTW xa(DI), X6 \
	VCVTPH2PS    X6, Y6     \
	VMULPS       Y6, Y4, Y4

// (d, m) at wa(SI) times (d, s) at xa(DI) into X(r): lane 0 the block
// scale, lane 1 m*s, accumulated into X13.
#define MS(wa, xa, r) \
	VMOVD     wa(SI), r \
	VMOVD     xa(DI), X6 \
	VCVTPH2PS r, r \
	VCVTPH2PS X6, X6 \
	VMULPS    X6, r, r \
	VADDPS    r, X13, X13

// Block scales of two offset-format blocks into Z4, of one into Y4.
#define MS2(wa, wb, xa, xb) \
	MS(wa, xa, X4)                 \
	MS(wb, xb, X5)                 \
	VBROADCASTSS  X4, Y4           \
	VBROADCASTSS  X5, Y5           \
	VINSERTF64X4  $1, Y5, Z4, Z4

#define MS1(wa, xa) \
	MS(wa, xa, X4) \
	VBROADCASTSS X4, Y4

// Fifth bits of two Q5 blocks (32-bit masks at a(SI), b(SI)) added to Z1
// as 16s, through a 64-bit mask register; of one block to Y1.
#define QH2(a, b) \
	MOVL   a(SI), AX        \
	MOVL   b(SI), BX        \
	SHLQ   $32, BX          \
	ORQ    BX, AX           \
	KMOVQ  AX, K2           \
	VPADDB Z9, Z1, K2, Z1

#define QH1(a) \
	MOVL   a(SI), AX     \
	KMOVD  AX, K2        \
	VPADDB Y9, Y1, K2, Y1

// Exact integer dots of unsigned Z1 by signed Z2 into Z3 (Y: one block).
#define IDOT2 \
	VPXORD   Z3, Z3, Z3 \
	VPDPBUSD Z2, Z1, Z3

#define IDOT1 \
	VPXORD   Y3, Y3, Y3 \
	VPDPBUSD Y2, Y1, Y3

// Subtract 16*sum(x) (Z9 holds 16s) from Z3.
#define OFF16_2 \
	VPXORD   Z7, Z7, Z7 \
	VPDPBUSD Z2, Z9, Z7 \
	VPSUBD   Z7, Z3, Z3

#define OFF16_1 \
	VPXORD   Y7, Y7, Y7 \
	VPDPBUSD Y2, Y9, Y7 \
	VPSUBD   Y7, Y3, Y3

// Signed weights Z1: sign onto Z2 (Z10 = 0), magnitude stays in Z1.
#define SIGN2 \
	VPMOVB2M Z1, K1           \
	VPABSB   Z1, Z1           \
	VPSUBB   Z2, Z10, K1, Z2

#define SIGN1 \
	VPMOVB2M Y1, K1           \
	VPABSB   Y1, Y1           \
	VPSUBB   Y2, Y10, K1, Y2

// Accumulate float(Z3) * Z4 into Z0.
#define ACC2 \
	VCVTDQ2PS   Z3, Z3 \
	VFMADD231PS Z4, Z3, Z0

#define ACC1 \
	VCVTDQ2PS   Y3, Y3 \
	VFMADD231PS Y4, Y3, Y0

// Common prologue: CX = blocks, Z0 = 0, Z8 = 15s, Z9 = 16s, Z10 = 0,
// Z11 = nibshift, X13 = 0.
#define PROLOGUE \
	MOVQ         n+0(FP), CX     \
	MOVQ         w_base+8(FP), SI \
	MOVQ         x_base+32(FP), DI \
	SHRQ         $5, CX          \
	VPXORD       Z0, Z0, Z0      \
	VPXORD       Z10, Z10, Z10   \
	VXORPS       X13, X13, X13   \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z8          \
	MOVL         $0x10101010, AX \
	VPBROADCASTD AX, Z9          \
	VMOVDQU64    nibshift<>(SB), Z11

// func vdQ4_1VNNI(n int, w, x []byte) float32
// Q4_1 (20-byte blocks: d, m, 16 bytes of nibbles) by Q8_1 (36: d, s, 32).
TEXT ·vdQ4_1VNNI(SB), NOSPLIT, $0-60
	PROLOGUE

q41loop:
	CMPQ CX, $2
	JLT  q41tail
	NIB2(4, 24)
	XQ2(4, 40)
	IDOT2
	MS2(0, 20, 0, 36)
	ACC2
	ADDQ $40, SI
	ADDQ $72, DI
	SUBQ $2, CX
	JMP  q41loop

q41tail:
	REDUCE_Z0
	TESTQ CX, CX
	JZ    q41done
	NIB1(4)
	XQ1(4)
	IDOT1
	MS1(0, 0)
	ACC1

q41done:
	HSUM_Y0
	ADD_MS
	MOVSS X0, ret+56(FP)
	RET

// Two Q5_0 blocks (22 bytes: d, qh, 16 bytes of nibbles) at SI by two Q8_0
// blocks (34: d, 32) at DI into Z0; one block into Y0.
#define Q50_STEP2 \
	NIB2(6, 28)       \
	QH2(2, 24)        \
	XQ2(2, 36)        \
	IDOT2             \
	OFF16_2           \
	SC2(0, 22, 0, 34) \
	ACC2              \
	ADDQ $44, SI      \
	ADDQ $68, DI

#define Q50_STEP1 \
	NIB1(6)   \
	QH1(2)    \
	XQ1(2)    \
	IDOT1     \
	OFF16_1   \
	SC1(0, 0) \
	ACC1

// func vdQ5_0VNNI(n int, w, x []byte) float32
// Q5_0 (22: d, qh, 16 bytes of nibbles) by Q8_0 (34: d, 32).
TEXT ·vdQ5_0VNNI(SB), NOSPLIT, $0-60
	PROLOGUE

q50loop:
	CMPQ CX, $2
	JLT  q50tail
	Q50_STEP2
	SUBQ $2, CX
	JMP  q50loop

q50tail:
	REDUCE_Z0
	TESTQ CX, CX
	JZ    q50done
	Q50_STEP1

q50done:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdQ5_0RowsVNNI(n int, w []byte, ldw int, x []byte, dst []float32)
//
// vdQ5_0VNNI for len(dst) consecutive rows ldw bytes apart: dst[i] gets
// row i's dot with the same instructions in the same order (the same
// bits), without a call, the constants' loads and a VZEROUPPER per row
// (MLA's k_b rows are only four blocks long).
TEXT ·vdQ5_0RowsVNNI(SB), NOSPLIT, $0-88
	MOVQ         n+0(FP), R11
	SHRQ         $5, R11
	MOVQ         w_base+8(FP), R8
	MOVQ         ldw+32(FP), R9
	MOVQ         x_base+40(FP), R10
	MOVQ         dst_base+64(FP), R12
	MOVQ         dst_len+72(FP), R13
	VPXORD       Z10, Z10, Z10
	VXORPS       X13, X13, X13
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z8
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z9
	VMOVDQU64    nibshift<>(SB), Z11
	TESTQ        R13, R13
	JZ           q50rdone

q50rrow:
	MOVQ   R8, SI
	MOVQ   R10, DI
	MOVQ   R11, CX
	VPXORD Z0, Z0, Z0

q50rloop:
	CMPQ CX, $2
	JLT  q50rtail
	Q50_STEP2
	SUBQ $2, CX
	JMP  q50rloop

q50rtail:
	REDUCE_Z0
	TESTQ CX, CX
	JZ    q50rsum
	Q50_STEP1

q50rsum:
	HSUM_Y0_KEEP
	MOVSS X0, (R12)
	ADDQ  $4, R12
	ADDQ  R9, R8
	DECQ  R13
	JNZ   q50rrow

q50rdone:
	VZEROUPPER
	RET

// func vdQ5_1VNNI(n int, w, x []byte) float32
// Q5_1 (24: d, m, qh, 16 bytes of nibbles) by Q8_1.
TEXT ·vdQ5_1VNNI(SB), NOSPLIT, $0-60
	PROLOGUE

q51loop:
	CMPQ CX, $2
	JLT  q51tail
	NIB2(8, 32)
	QH2(4, 28)
	XQ2(4, 40)
	IDOT2
	MS2(0, 24, 0, 36)
	ACC2
	ADDQ $48, SI
	ADDQ $72, DI
	SUBQ $2, CX
	JMP  q51loop

q51tail:
	REDUCE_Z0
	TESTQ CX, CX
	JZ    q51done
	NIB1(8)
	QH1(4)
	XQ1(4)
	IDOT1
	MS1(0, 0)
	ACC1

q51done:
	HSUM_Y0
	ADD_MS
	MOVSS X0, ret+56(FP)
	RET

// func vdIQ4NLVNNI(n int, w, x []byte) float32
// IQ4_NL (18: d, 16 bytes of codebook indices) by Q8_0.
TEXT ·vdIQ4NLVNNI(SB), NOSPLIT, $0-60
	PROLOGUE
	VBROADCASTI32X4 ·iq4nlTab(SB), Z12

iq4loop:
	CMPQ    CX, $2
	JLT     iq4tail
	NIB2(2, 20)
	VPSHUFB Z1, Z12, Z1
	XQ2(2, 36)
	SIGN2
	IDOT2
	SC2(0, 18, 0, 34)
	ACC2
	ADDQ    $36, SI
	ADDQ    $68, DI
	SUBQ    $2, CX
	JMP     iq4loop

iq4tail:
	REDUCE_Z0
	TESTQ   CX, CX
	JZ      iq4done
	NIB1(2)
	VPSHUFB Y1, Y12, Y1
	XQ1(2)
	SIGN1
	IDOT1
	SC1(0, 0)
	ACC1

iq4done:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdMXFP4VNNI(n int, w, x []byte) float32
// MXFP4 (17: E8M0 exponent, 16 bytes of codebook indices) by Q8_0. The
// exponent indexes mxfp4Scale, the halved scales as float32.
TEXT ·vdMXFP4VNNI(SB), NOSPLIT, $0-60
	PROLOGUE
	VBROADCASTI32X4 ·mxfp4Tab(SB), Z12
	LEAQ            ·mxfp4Scale(SB), R9

mxloop:
	CMPQ            CX, $2
	JLT             mxtail
	NIB2(1, 18)
	VPSHUFB         Z1, Z12, Z1
	XQ2(2, 36)
	SIGN2
	IDOT2
	MOVBLZX         (SI), AX
	MOVBLZX         17(SI), BX
	VBROADCASTSS    (R9)(AX*4), Y4
	VBROADCASTSS    (R9)(BX*4), Y5
	VINSERTF64X4    $1, Y5, Z4, Z4
	VPBROADCASTW    (DI), X6
	VPBROADCASTW    34(DI), X7
	VINSERTI128     $1, X7, Y6, Y6
	VCVTPH2PS       Y6, Z6
	VMULPS          Z6, Z4, Z4
	ACC2
	ADDQ            $34, SI
	ADDQ            $68, DI
	SUBQ            $2, CX
	JMP             mxloop

mxtail:
	REDUCE_Z0
	TESTQ        CX, CX
	JZ           mxdone
	NIB1(1)
	VPSHUFB      Y1, Y12, Y1
	XQ1(2)
	SIGN1
	IDOT1
	MOVBLZX      (SI), AX
	VBROADCASTSS (R9)(AX*4), Y4
	VPBROADCASTW (DI), X6
	VCVTPH2PS    X6, Y6
	VMULPS       Y6, Y4, Y4
	ACC1

mxdone:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// Four blocks of vdMXFP4VBMI, 4 lanes each. Their 16 code bytes each are
// gathered by VPERMI2B from registers ta:tb (index widx) into A; the low
// nibbles of A are values 0-15 of each block, the high ones 16-31, so with
// the activations of values 0-15 (and 16-31) of the four blocks gathered
// alike from xo(DI) (indices Z18, Z19), both VPDPBUSDs fill the same lane
// groups and one conversion and one scaling serve 128 values. The sign of
// a code is its bit 3 (bit 7 of A for the high ones) and moves onto the
// activations; |value| comes from mx8Abs. Scales from Y7 through perm.
#define MX4_QUAD(widx, ta, tb, xo, perm, acc) \
	VMOVDQU64    widx, Z1            \
	VPERMI2B     tb, ta, Z1          \
	VPTESTMB     Z14, Z1, K1         \
	VPMOVB2M     Z1, K2              \
	VPERMB       Z15, Z1, Z3         \
	VPSRLW       $4, Z1, Z2          \
	VPERMB       Z15, Z2, Z2         \
	VMOVDQU64    xo(DI), Z4          \
	VMOVDQU64    Z18, Z6             \
	VPERMI2B     xo+64(DI), Z4, Z6   \
	VMOVDQU64    xo+8(DI), Z5        \
	VMOVDQU64    Z19, Z23            \
	VPERMI2B     xo+72(DI), Z5, Z23  \
	VPSUBB       Z6, Z10, K1, Z6     \
	VPSUBB       Z23, Z10, K2, Z23   \
	VPXORD       Z24, Z24, Z24       \
	VPDPBUSD     Z6, Z3, Z24         \
	VPDPBUSD     Z23, Z2, Z24        \
	VCVTDQ2PS    Z24, Z24            \
	VPERMPS      Z7, perm, Z25       \
	VFMADD231PS  Z25, Z24, acc

// func vdMXFP4VBMI(n int, w, x []byte) float32
// MXFP4 by Q8_0 as vdMXFP4VNNI, eight blocks per step: the weights come in
// three loads (the last masked to the 8 bytes that belong to the row) and
// are cut into two groups of four blocks by VPERMI2B (VBMI, see MX4_QUAD),
// the eight exponents become 2^(e-128) by VSCALEFPS (exact, subnormals
// included, as mxfp4Scale), and |value| is a VPERMB lookup that needs no
// nibble mask. Per 256 values that is about 3/4 of the instructions of two
// blocks per step, where the per-block scale broadcasts dominated. Fewer
// than eight blocks left go the VNNI way.
TEXT ·vdMXFP4VBMI(SB), NOSPLIT, $0-60
	PROLOGUE
	VBROADCASTI32X4 ·mxfp4Tab(SB), Z12
	LEAQ            ·mxfp4Scale(SB), R9
	MOVL            $0x08080808, AX
	VPBROADCASTD    AX, Z14
	VMOVDQU64       ·mx8Abs(SB), Z15
	VMOVDQU64       ·mx8W+0(SB), Z16
	VMOVDQU64       ·mx8W+64(SB), Z17
	VMOVDQU64       ·mx8XLo(SB), Z18
	VMOVDQU64       ·mx8XHi(SB), Z19
	VMOVDQU64       ·mx8Perm+0(SB), Z20
	VMOVDQU64       ·mx8Perm+64(SB), Z21
	VMOVDQU64       ·mx8Exp(SB), Z22
	MOVL            $128, AX
	VPBROADCASTD    AX, Y26
	MOVL            $0x3f800000, AX
	VPBROADCASTD    AX, Y27
	MOVL            $0x11111111, AX
	KMOVQ           AX, K3
	MOVL            $0xff, AX
	KMOVQ           AX, K4
	VPXORD          Z13, Z13, Z13

mx8loop:
	CMPQ           CX, $8
	JLT            mx8rest
	VMOVDQU64      (SI), Z28
	VMOVDQU64      64(SI), Z29
	VMOVDQU8.Z     128(SI), K4, Z30
	// block scales: 2^(e-128) * d(x), blocks 0-7 in Y7
	VMOVDQU64      Z22, Z31
	VPERMI2B.Z     Z29, Z28, K3, Z31
	VPSUBD         Y26, Y31, Y31
	VCVTDQ2PS      Y31, Y31
	VSCALEFPS      Y31, Y27, Y31
	// the eight f16 activation scales, 34 bytes apart, packed by the
	// integer units (a gather takes ~15 cycles here)
	MOVWQZX        (DI), AX
	MOVWQZX        34(DI), BX
	SHLQ           $16, BX
	ORQ            BX, AX
	MOVWQZX        68(DI), BX
	SHLQ           $32, BX
	ORQ            BX, AX
	MOVWQZX        102(DI), BX
	SHLQ           $48, BX
	ORQ            BX, AX
	MOVWQZX        136(DI), DX
	MOVWQZX        170(DI), BX
	SHLQ           $16, BX
	ORQ            BX, DX
	MOVWQZX        204(DI), BX
	SHLQ           $32, BX
	ORQ            BX, DX
	MOVWQZX        238(DI), BX
	SHLQ           $48, BX
	ORQ            BX, DX
	VMOVQ          AX, X7
	VPINSRQ        $1, DX, X7, X7
	VCVTPH2PS      X7, Y7
	VMULPS         Y31, Y7, Y7
	MX4_QUAD(Z16, Z28, Z29, 0, Z20, Z0)
	MX4_QUAD(Z17, Z29, Z30, 136, Z21, Z13)
	ADDQ           $136, SI
	ADDQ           $272, DI
	SUBQ           $8, CX
	JMP            mx8loop

mx8rest:
	VADDPS          Z13, Z0, Z0
	VPXORD          Z13, Z13, Z13

mx8pairs:
	CMPQ            CX, $2
	JLT             mx8tail
	NIB2(1, 18)
	VPSHUFB         Z1, Z12, Z1
	XQ2(2, 36)
	SIGN2
	IDOT2
	MOVBLZX         (SI), AX
	MOVBLZX         17(SI), BX
	VBROADCASTSS    (R9)(AX*4), Y4
	VBROADCASTSS    (R9)(BX*4), Y5
	VINSERTF64X4    $1, Y5, Z4, Z4
	VPBROADCASTW    (DI), X6
	VPBROADCASTW    34(DI), X7
	VINSERTI128     $1, X7, Y6, Y6
	VCVTPH2PS       Y6, Z6
	VMULPS          Z6, Z4, Z4
	ACC2
	ADDQ            $34, SI
	ADDQ            $68, DI
	SUBQ            $2, CX
	JMP             mx8pairs

mx8tail:
	REDUCE_Z0
	TESTQ        CX, CX
	JZ           mx8done
	NIB1(1)
	VPSHUFB      Y1, Y12, Y1
	XQ1(2)
	SIGN1
	IDOT1
	MOVBLZX      (SI), AX
	VBROADCASTSS (R9)(AX*4), Y4
	VPBROADCASTW (DI), X6
	VCVTPH2PS    X6, Y6
	VMULPS       Y6, Y4, Y4
	ACC1

mx8done:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// Masked tail of n%m values: K1 = (1<<CX)-1.
#define TAILMASK \
	MOVL  $1, AX   \
	SHLL  CX, AX   \
	DECL  AX

// func vdBF16AVX512BF16(n int, w, x []byte) float32
// BF16 by BF16 with VDPBF16PS (pairs of bf16 products summed into float32
// lanes; products of two bf16 are exact in float32). Go's assembler lacks
// the instruction, so it is encoded with BYTEs:
// 62 D2 <P1> 48 52 <modrm> = vdpbf16ps zmm(dst), zmm(src1), zmm(8+k).
TEXT ·vdBF16AVX512BF16(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

bfz128:
	CMPQ      CX, $128
	JLT       bfz32
	VMOVDQU16 (SI), Z4
	VMOVDQU16 64(SI), Z5
	VMOVDQU16 128(SI), Z6
	VMOVDQU16 192(SI), Z7
	VMOVDQU16 (DI), Z8
	VMOVDQU16 64(DI), Z9
	VMOVDQU16 128(DI), Z10
	VMOVDQU16 192(DI), Z11
	BYTE $0x62; BYTE $0xD2; BYTE $0x5E; BYTE $0x48; BYTE $0x52; BYTE $0xC0 // vdpbf16ps zmm0, zmm4, zmm8
	BYTE $0x62; BYTE $0xD2; BYTE $0x56; BYTE $0x48; BYTE $0x52; BYTE $0xC9 // vdpbf16ps zmm1, zmm5, zmm9
	BYTE $0x62; BYTE $0xD2; BYTE $0x4E; BYTE $0x48; BYTE $0x52; BYTE $0xD2 // vdpbf16ps zmm2, zmm6, zmm10
	BYTE $0x62; BYTE $0xD2; BYTE $0x46; BYTE $0x48; BYTE $0x52; BYTE $0xDB // vdpbf16ps zmm3, zmm7, zmm11
	ADDQ      $256, SI
	ADDQ      $256, DI
	SUBQ      $128, CX
	JMP       bfz128

bfz32:
	CMPQ      CX, $32
	JLT       bfzmask
	VMOVDQU16 (SI), Z4
	VMOVDQU16 (DI), Z8
	BYTE $0x62; BYTE $0xD2; BYTE $0x5E; BYTE $0x48; BYTE $0x52; BYTE $0xC0 // vdpbf16ps zmm0, zmm4, zmm8
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JMP       bfz32

bfzmask:
	TESTQ       CX, CX
	JZ          bfzdone
	TAILMASK
	KMOVD       AX, K1
	VMOVDQU16.Z (SI), K1, Z4
	VMOVDQU16.Z (DI), K1, Z8
	BYTE $0x62; BYTE $0xD2; BYTE $0x5E; BYTE $0x48; BYTE $0x52; BYTE $0xC8 // vdpbf16ps zmm1, zmm4, zmm8

bfzdone:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	REDUCE_Z0
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdBF16AVX512(n int, w, x []byte) float32
// BF16 by BF16 without AVX512_BF16: bf16 is the top half of a float32, so
// zero-extending to 32 bits and shifting left by 16 widens it exactly.
TEXT ·vdBF16AVX512(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

bfw64:
	CMPQ        CX, $64
	JLT         bfw16
	VPMOVZXWD   (SI), Z4
	VPMOVZXWD   32(SI), Z5
	VPMOVZXWD   64(SI), Z6
	VPMOVZXWD   96(SI), Z7
	VPMOVZXWD   (DI), Z8
	VPMOVZXWD   32(DI), Z9
	VPMOVZXWD   64(DI), Z10
	VPMOVZXWD   96(DI), Z11
	VPSLLD      $16, Z4, Z4
	VPSLLD      $16, Z5, Z5
	VPSLLD      $16, Z6, Z6
	VPSLLD      $16, Z7, Z7
	VPSLLD      $16, Z8, Z8
	VPSLLD      $16, Z9, Z9
	VPSLLD      $16, Z10, Z10
	VPSLLD      $16, Z11, Z11
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z9, Z5, Z1
	VFMADD231PS Z10, Z6, Z2
	VFMADD231PS Z11, Z7, Z3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $64, CX
	JMP         bfw64

bfw16:
	CMPQ        CX, $16
	JLT         bfwmask
	VPMOVZXWD   (SI), Z4
	VPMOVZXWD   (DI), Z8
	VPSLLD      $16, Z4, Z4
	VPSLLD      $16, Z8, Z8
	VFMADD231PS Z8, Z4, Z0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JMP         bfw16

bfwmask:
	TESTQ       CX, CX
	JZ          bfwdone
	TAILMASK
	KMOVW       AX, K1
	VMOVDQU16.Z (SI), K1, Y4
	VMOVDQU16.Z (DI), K1, Y8
	VPMOVZXWD   Y4, Z4
	VPMOVZXWD   Y8, Z8
	VPSLLD      $16, Z4, Z4
	VPSLLD      $16, Z8, Z8
	VFMADD231PS Z8, Z4, Z1

bfwdone:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	REDUCE_Z0
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdBF16AVX2(n int, w, x []byte) float32
TEXT ·vdBF16AVX2(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

bfy32:
	CMPQ        CX, $32
	JLT         bfy8
	VPMOVZXWD   (SI), Y4
	VPMOVZXWD   16(SI), Y5
	VPMOVZXWD   32(SI), Y6
	VPMOVZXWD   48(SI), Y7
	VPMOVZXWD   (DI), Y8
	VPMOVZXWD   16(DI), Y9
	VPMOVZXWD   32(DI), Y10
	VPMOVZXWD   48(DI), Y11
	VPSLLD      $16, Y4, Y4
	VPSLLD      $16, Y5, Y5
	VPSLLD      $16, Y6, Y6
	VPSLLD      $16, Y7, Y7
	VPSLLD      $16, Y8, Y8
	VPSLLD      $16, Y9, Y9
	VPSLLD      $16, Y10, Y10
	VPSLLD      $16, Y11, Y11
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $32, CX
	JMP         bfy32

bfy8:
	CMPQ        CX, $8
	JLT         bfy1
	VPMOVZXWD   (SI), Y4
	VPMOVZXWD   (DI), Y8
	VPSLLD      $16, Y4, Y4
	VPSLLD      $16, Y8, Y8
	VFMADD231PS Y8, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JMP         bfy8

bfy1:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VXORPS X5, X5, X5

bfy1loop:
	TESTQ       CX, CX
	JZ          bfydone
	MOVWLZX     (SI), AX
	MOVWLZX     (DI), BX
	SHLL        $16, AX
	SHLL        $16, BX
	VMOVD       AX, X4
	VMOVD       BX, X6
	VFMADD231SS X6, X4, X5
	ADDQ        $2, SI
	ADDQ        $2, DI
	DECQ        CX
	JMP         bfy1loop

bfydone:
	HSUM_Y0
	VADDSS X5, X0, X0
	MOVSS  X0, ret+56(FP)
	RET

// AVX2: one block per step. Y8 = 15s, Y9 = 16s, Y10 = int16 ones,
// Y12 = qhbits, Y14 = codebook, X13 = 0.
#define PROLOGUE2 \
	MOVQ         n+0(FP), CX       \
	MOVQ         w_base+8(FP), SI  \
	MOVQ         x_base+32(FP), DI \
	SHRQ         $5, CX            \
	VXORPS       Y0, Y0, Y0        \
	VXORPS       X13, X13, X13     \
	MOVL         $0x0f0f0f0f, AX   \
	VMOVD        AX, X8            \
	VPBROADCASTD X8, Y8            \
	MOVL         $0x10101010, AX   \
	VMOVD        AX, X9            \
	VPBROADCASTD X9, Y9            \
	MOVL         $0x00010001, AX   \
	VMOVD        AX, X10           \
	VPBROADCASTD X10, Y10          \
	VPBROADCASTQ qhbits<>(SB), Y12

// Nibbles of the block at a(SI) into Y1 (byte j = value j).
#define NIBY(a) \
	VMOVDQU     a(SI), X1      \
	VPSRLW      $4, X1, X5     \
	VINSERTI128 $1, X5, Y1, Y1 \
	VPAND       Y8, Y1, Y1

// Fifth bits (32-bit mask at a(SI)) ORed into Y1 as 16s.
#define QHY(a) \
	VPBROADCASTD a(SI), Y5          \
	VPSHUFB      qhshuf<>(SB), Y5, Y5 \
	VPAND        Y12, Y5, Y5        \
	VPCMPEQB     Y12, Y5, Y5        \
	VPAND        Y9, Y5, Y5         \
	VPOR         Y5, Y1, Y1

// Integer dot of the block at a(DI) with unsigned Y1 into Y3 (int32 lanes).
#define UDOTY(a) \
	VPMADDUBSW a(DI), Y1, Y3 \
	VPMADDWD   Y10, Y3, Y3

// The same with signed Y1: its sign moves onto x.
#define SDOTY(a) \
	VMOVDQU    a(DI), Y2     \
	VPSIGNB    Y1, Y2, Y2    \
	VPABSB     Y1, Y1        \
	VPMADDUBSW Y2, Y1, Y3    \
	VPMADDWD   Y10, Y3, Y3

// func vdQ4_1AVX2(n int, w, x []byte) float32
TEXT ·vdQ4_1AVX2(SB), NOSPLIT, $0-60
	PROLOGUE2
	TESTQ CX, CX
	JZ    q41ydone

q41yloop:
	NIBY(4)
	UDOTY(4)
	MS1(0, 0)
	ACC1
	ADDQ $20, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  q41yloop

q41ydone:
	HSUM_Y0
	ADD_MS
	MOVSS X0, ret+56(FP)
	RET

// func vdQ5_1AVX2(n int, w, x []byte) float32
TEXT ·vdQ5_1AVX2(SB), NOSPLIT, $0-60
	PROLOGUE2
	TESTQ CX, CX
	JZ    q51ydone

q51yloop:
	NIBY(8)
	QHY(4)
	UDOTY(4)
	MS1(0, 0)
	ACC1
	ADDQ $24, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  q51yloop

q51ydone:
	HSUM_Y0
	ADD_MS
	MOVSS X0, ret+56(FP)
	RET

// func vdQ5_0AVX2(n int, w, x []byte) float32
TEXT ·vdQ5_0AVX2(SB), NOSPLIT, $0-60
	PROLOGUE2
	TESTQ CX, CX
	JZ    q50ydone

q50yloop:
	NIBY(6)
	QHY(2)
	VPSUBB Y9, Y1, Y1
	SDOTY(2)
	SC1(0, 0)
	ACC1
	ADDQ   $22, SI
	ADDQ   $34, DI
	DECQ   CX
	JNZ    q50yloop

q50ydone:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdIQ4NLAVX2(n int, w, x []byte) float32
TEXT ·vdIQ4NLAVX2(SB), NOSPLIT, $0-60
	PROLOGUE2
	VBROADCASTI128 ·iq4nlTab(SB), Y14
	TESTQ          CX, CX
	JZ             iq4ydone

iq4yloop:
	NIBY(2)
	VPSHUFB Y1, Y14, Y1
	SDOTY(2)
	SC1(0, 0)
	ACC1
	ADDQ    $18, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     iq4yloop

iq4ydone:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdMXFP4AVX2(n int, w, x []byte) float32
TEXT ·vdMXFP4AVX2(SB), NOSPLIT, $0-60
	PROLOGUE2
	VBROADCASTI128 ·mxfp4Tab(SB), Y14
	LEAQ           ·mxfp4Scale(SB), R9
	TESTQ          CX, CX
	JZ             mxydone

mxyloop:
	NIBY(1)
	VPSHUFB      Y1, Y14, Y1
	SDOTY(2)
	MOVBLZX      (SI), AX
	VBROADCASTSS (R9)(AX*4), Y4
	VPBROADCASTW (DI), X6
	VCVTPH2PS    X6, Y6
	VMULPS       Y6, Y4, Y4
	ACC1
	ADDQ         $17, SI
	ADDQ         $34, DI
	DECQ         CX
	JNZ          mxyloop

mxydone:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func roundF16AVX512(dst []byte, src []float32)
// Rounds len(src) (a multiple of 16) float32s to F16 values (VCVTPS2PH,
// round to nearest even, as quant.F32ToF16) and stores them widened back to
// float32.
TEXT ·roundF16AVX512(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $4, CX
	JZ   r16done

r16loop:
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, Y1
	VCVTPH2PS Y1, Z1
	VMOVUPS   Z1, (DI)
	ADDQ      $64, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       r16loop

r16done:
	VZEROUPPER
	RET
