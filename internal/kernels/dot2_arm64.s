//go:build arm64

#include "textflag.h"

// Row dots for Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 and BF16 on arm64, with the
// Go references' signature (n int, w, x []byte) float32.
//
// One 32-value block per step, as in dot_arm64.s: weights unpacked to one
// signed byte per value (V1: values 0-15, V2: 16-31), two SDOTs against the
// activation bytes (V17, V18) give exact int32 lane sums, converted to float
// and multiplied by the block scale (lane 0 of V7) into V0. SDOT multiplies
// signed by signed, so codebook values need no sign trick. Go's assembler
// lacks SDOT, SCVTF, FCVTL, CMTST and the float vector arithmetic used here,
// so those are WORDs with the instruction beside each.
//
// Q4_1 and Q5_1 add m*s per block: FCVTL of (d, m) times FCVTL of the Q8_1
// block's (d, s) is (d*d, m*s); lane 0 scales the block, lane 1 is summed in
// V13 and added at the end.

// Spreading the Q5 fifth-bit mask: TBL gives byte j byte j/8 of the mask
// (qhidx: first 16 bytes for values 0-15, next 16 for 16-31), CMTST against
// qhbit tests bit j%8.
DATA qhidx<>+0(SB)/8, $0x0000000000000000
DATA qhidx<>+8(SB)/8, $0x0101010101010101
DATA qhidx<>+16(SB)/8, $0x0202020202020202
DATA qhidx<>+24(SB)/8, $0x0303030303030303
GLOBL qhidx<>(SB), RODATA|NOPTR, $32

DATA qhbit<>+0(SB)/8, $0x8040201008040201
DATA qhbit<>+8(SB)/8, $0x8040201008040201
GLOBL qhbit<>(SB), RODATA|NOPTR, $16

// Sum the four float lanes of V0 into F0.
#define HSUM_V0 \
	WORD $0x6e20d400 /* faddp v0.4s, v0.4s, v0.4s */ \
	WORD $0x7e30d800 // faddp s0, v0.2s

// Add lane 1 of V13 (the m*s sum) to F0.
#define ADD_MS \
	WORD  $0x5e0c05ae /* mov s14, v13.s[1] */ \
	FADDS F14, F0, F0

// Common set-up: R2 = blocks, V0 = V13 = 0, V30 = 15s, V31 = 16s,
// V27 = qhbit, V28/V29 = qhidx.
#define PROLOGUE \
	MOVD  n+0(FP), R2              \
	MOVD  w_base+8(FP), R0         \
	MOVD  x_base+32(FP), R1        \
	LSR   $5, R2                   \
	VEOR  V0.B16, V0.B16, V0.B16   \
	VEOR  V13.B16, V13.B16, V13.B16 \
	VMOVI $15, V30.B16             \
	VMOVI $16, V31.B16             \
	MOVD  $qhidx<>(SB), R8         \
	VLD1  (R8), [V28.B16, V29.B16] \
	MOVD  $qhbit<>(SB), R8         \
	VLD1  (R8), [V27.B16]

// Nibbles of the block's 16 bytes at a(R0) into V1 (values 0-15) and V2.
#define NIB(a) \
	ADD   $a, R0, R6               \
	VLD1  (R6), [V1.B16]           \
	VUSHR $4, V1.B16, V2.B16       \
	VAND  V30.B16, V1.B16, V1.B16

// Fifth bits (32-bit mask at a(R0)) ORed into V1, V2 as 16s.
#define QH(a) \
	MOVWU a(R0), R7                  \
	VMOV  R7, V4.S[0]                \
	VTBL  V28.B16, [V4.B16], V5.B16  \
	VTBL  V29.B16, [V4.B16], V6.B16  \
	WORD  $0x4e3b8ca5 /* cmtst v5.16b, v5.16b, v27.16b */ \
	WORD  $0x4e3b8cc6 /* cmtst v6.16b, v6.16b, v27.16b */ \
	VAND  V31.B16, V5.B16, V5.B16    \
	VAND  V31.B16, V6.B16, V6.B16    \
	VORR  V5.B16, V1.B16, V1.B16     \
	VORR  V6.B16, V2.B16, V2.B16

// Block scale d(w)*d(x) into lane 0 of V7 (f16s at (R0) and (R1)).
#define SCALE \
	MOVHU (R0), R4       \
	MOVHU (R1), R5       \
	ORR   R5<<16, R4, R4 \
	FMOVS R4, F6         \
	WORD  $0x0e2178c6 /* fcvtl v6.4s, v6.4h */ \
	WORD  $0x5fa690c7 // fmul s7, s6, v6.s[1]

// Offset formats: (d*d, m*s) into V7 from (d, m) at (R0) and (d, s) at
// (R1); m*s summed into V13.
#define MSCALE \
	MOVWU (R0), R4 \
	MOVWU (R1), R5 \
	FMOVS R4, F6   \
	FMOVS R5, F16  \
	WORD  $0x0e2178c6 /* fcvtl v6.4s, v6.4h */ \
	WORD  $0x0e217a10 /* fcvtl v16.4s, v16.4h */ \
	WORD  $0x6e30dcc7 /* fmul v7.4s, v6.4s, v16.4s */ \
	WORD  $0x4e27d5ad // fadd v13.4s, v13.4s, v7.4s

// Integer dot of V1, V2 with the 32 activation bytes at a(R1), scaled by
// lane 0 of V7 into V0.
#define DOTACC(a) \
	ADD  $a, R1, R6                 \
	VLD1 (R6), [V17.B16, V18.B16]   \
	VEOR V3.B16, V3.B16, V3.B16     \
	WORD $0x4e919423 /* sdot v3.4s, v1.16b, v17.16b */ \
	WORD $0x4e929443 /* sdot v3.4s, v2.16b, v18.16b */ \
	WORD $0x4e21d863 /* scvtf v3.4s, v3.4s */ \
	WORD $0x4f871060 // fmla v0.4s, v3.4s, v7.s[0]

// func vdQ4_1DOT(n int, w, x []byte) float32
TEXT ·vdQ4_1DOT(SB), NOSPLIT, $0-60
	PROLOGUE
	CBZ R2, q41done

q41loop:
	NIB(4)
	MSCALE
	DOTACC(4)
	ADD   $20, R0
	ADD   $36, R1
	SUB   $1, R2
	CBNZ  R2, q41loop

q41done:
	HSUM_V0
	ADD_MS
	FMOVS F0, ret+56(FP)
	RET

// func vdQ5_0DOT(n int, w, x []byte) float32
TEXT ·vdQ5_0DOT(SB), NOSPLIT, $0-60
	PROLOGUE
	CBZ R2, q50done

q50loop:
	NIB(6)
	QH(2)
	VSUB V31.B16, V1.B16, V1.B16
	VSUB V31.B16, V2.B16, V2.B16
	SCALE
	DOTACC(2)
	ADD  $22, R0
	ADD  $34, R1
	SUB  $1, R2
	CBNZ R2, q50loop

q50done:
	HSUM_V0
	FMOVS F0, ret+56(FP)
	RET

// func vdQ5_1DOT(n int, w, x []byte) float32
TEXT ·vdQ5_1DOT(SB), NOSPLIT, $0-60
	PROLOGUE
	CBZ R2, q51done

q51loop:
	NIB(8)
	QH(4)
	MSCALE
	DOTACC(4)
	ADD  $24, R0
	ADD  $36, R1
	SUB  $1, R2
	CBNZ R2, q51loop

q51done:
	HSUM_V0
	ADD_MS
	FMOVS F0, ret+56(FP)
	RET

// func vdIQ4NLDOT(n int, w, x []byte) float32
TEXT ·vdIQ4NLDOT(SB), NOSPLIT, $0-60
	PROLOGUE
	MOVD $·iq4nlTab(SB), R8
	VLD1 (R8), [V26.B16]
	CBZ  R2, iq4done

iq4loop:
	NIB(2)
	VTBL V1.B16, [V26.B16], V1.B16
	VTBL V2.B16, [V26.B16], V2.B16
	SCALE
	DOTACC(2)
	ADD  $18, R0
	ADD  $34, R1
	SUB  $1, R2
	CBNZ R2, iq4loop

iq4done:
	HSUM_V0
	FMOVS F0, ret+56(FP)
	RET

// func vdMXFP4DOT(n int, w, x []byte) float32
// The E8M0 exponent indexes mxfp4Scale (halved scales as float32). Scales
// span 2^-128..2^127, so a block's float product can overflow: the integer
// lanes are summed first (ADDV) and the block is added as scale*sumi, in the
// reference's association, so infinities and NaNs come out as they do there.
TEXT ·vdMXFP4DOT(SB), NOSPLIT, $0-60
	PROLOGUE
	MOVD $·mxfp4Tab(SB), R8
	VLD1 (R8), [V26.B16]
	MOVD $·mxfp4Scale(SB), R9
	CBZ  R2, mxdone

mxloop:
	NIB(1)
	VTBL  V1.B16, [V26.B16], V1.B16
	VTBL  V2.B16, [V26.B16], V2.B16
	MOVBU (R0), R4
	ADD   R4<<2, R9, R10
	FMOVS (R10), F7
	MOVHU (R1), R5
	FMOVS R5, F6
	WORD  $0x0e2178c6 // fcvtl v6.4s, v6.4h
	WORD  $0x1e2608e7 // fmul s7, s7, s6
	ADD   $2, R1, R6
	VLD1  (R6), [V17.B16, V18.B16]
	VEOR  V3.B16, V3.B16, V3.B16
	WORD  $0x4e919423 // sdot v3.4s, v1.16b, v17.16b
	WORD  $0x4e929443 // sdot v3.4s, v2.16b, v18.16b
	WORD  $0x4eb1b863 // addv s3, v3.4s
	WORD  $0x5e21d863 // scvtf s3, s3
	FMADDS F7, F0, F3, F0
	ADD   $17, R0
	ADD   $34, R1
	SUB   $1, R2
	CBNZ  R2, mxloop

mxdone:
	HSUM_V0
	FMOVS F0, ret+56(FP)
	RET

// func vdBF16NEON(n int, w, x []byte) float32
// BF16 by BF16: a bf16 is the top half of a float32, so ZIP1/ZIP2 with a
// zero vector (zero in the low half of each 32-bit lane) widens exactly.
TEXT ·vdBF16NEON(SB), NOSPLIT, $0-60
	MOVD n+0(FP), R2
	MOVD w_base+8(FP), R0
	MOVD x_base+32(FP), R1
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V31.B16, V31.B16, V31.B16

bf16loop16:
	CMP    $16, R2
	BLT    bf16loop8
	VLD1.P 32(R0), [V20.H8, V21.H8]
	VLD1.P 32(R1), [V22.H8, V23.H8]
	VZIP1  V20.H8, V31.H8, V4.H8
	VZIP2  V20.H8, V31.H8, V5.H8
	VZIP1  V21.H8, V31.H8, V6.H8
	VZIP2  V21.H8, V31.H8, V7.H8
	VZIP1  V22.H8, V31.H8, V16.H8
	VZIP2  V22.H8, V31.H8, V17.H8
	VZIP1  V23.H8, V31.H8, V18.H8
	VZIP2  V23.H8, V31.H8, V19.H8
	VFMLA  V16.S4, V4.S4, V0.S4
	VFMLA  V17.S4, V5.S4, V1.S4
	VFMLA  V18.S4, V6.S4, V2.S4
	VFMLA  V19.S4, V7.S4, V3.S4
	SUB    $16, R2
	B      bf16loop16

bf16loop8:
	CMP    $8, R2
	BLT    bf16tail
	VLD1.P 16(R0), [V20.H8]
	VLD1.P 16(R1), [V22.H8]
	VZIP1  V20.H8, V31.H8, V4.H8
	VZIP2  V20.H8, V31.H8, V5.H8
	VZIP1  V22.H8, V31.H8, V16.H8
	VZIP2  V22.H8, V31.H8, V17.H8
	VFMLA  V16.S4, V4.S4, V0.S4
	VFMLA  V17.S4, V5.S4, V1.S4
	SUB    $8, R2
	B      bf16loop8

bf16tail:
	WORD $0x4e21d400 // fadd v0.4s, v0.4s, v1.4s
	WORD $0x4e23d442 // fadd v2.4s, v2.4s, v3.4s
	WORD $0x4e22d400 // fadd v0.4s, v0.4s, v2.4s
	HSUM_V0
	CBZ  R2, bf16done

bf16loop1:
	MOVHU.P 2(R0), R4
	MOVHU.P 2(R1), R5
	LSLW    $16, R4
	LSLW    $16, R5
	FMOVS   R4, F4
	FMOVS   R5, F5
	FMADDS  F4, F0, F5, F0
	SUB     $1, R2
	CBNZ    R2, bf16loop1

bf16done:
	FMOVS F0, ret+56(FP)
	RET
