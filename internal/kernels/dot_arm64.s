//go:build arm64

#include "textflag.h"

// Row dots for arm64 with the Go references' signature
// (n int, w, x []byte) float32; MatMul guarantees the slice lengths.
//
// Go's assembler lacks SDOT, SCVTF, the float vector arithmetic and the
// half->single widening, so those are WORDs; the comment beside each is the
// instruction it encodes.

// Sum the four float lanes of V0 into F0.
#define HSUM_V0 \
	WORD $0x6e20d400 /* faddp v0.4s, v0.4s, v0.4s */ \
	WORD $0x7e30d800 // faddp s0, v0.2s

// Combined block scale d(w)*d(x) into lane 0 of V7, from the f16 at (R0)
// and the f16 at (R1).
#define SCALE \
	MOVHU (R0), R4 \
	MOVHU (R1), R5 \
	ORR   R5<<16, R4, R4 \
	FMOVS R4, F6 \
	WORD $0x0e2178c6 /* fcvtl v6.4s, v6.4h */ \
	WORD $0x5fa690c7 // fmul s7, s6, v6.s[1]

// func vdQ8_0DOT(n int, w, x []byte) float32
// Q8_0 by Q8_0: two SDOTs per block sum four int8 products per int32 lane
// exactly; the lanes are converted to float and multiplied by the block
// scale into the accumulator.
TEXT ·vdQ8_0DOT(SB), NOSPLIT, $0-60
	MOVD n+0(FP), R2
	MOVD w_base+8(FP), R0
	MOVD x_base+32(FP), R1
	LSR  $5, R2
	VEOR V0.B16, V0.B16, V0.B16
	CBZ  R2, q80done

q80loop:
	SCALE
	ADD  $2, R0, R6
	ADD  $2, R1, R7
	VLD1 (R6), [V1.B16, V2.B16]
	VLD1 (R7), [V17.B16, V18.B16]
	VEOR V3.B16, V3.B16, V3.B16
	WORD $0x4e919423 // sdot v3.4s, v1.16b, v17.16b
	WORD $0x4e929443 // sdot v3.4s, v2.16b, v18.16b
	WORD $0x4e21d863 // scvtf v3.4s, v3.4s
	WORD $0x4f871060 // fmla v0.4s, v3.4s, v7.s[0]
	ADD  $34, R0
	ADD  $34, R1
	SUB  $1, R2
	CBNZ R2, q80loop

q80done:
	HSUM_V0
	FMOVS F0, ret+56(FP)
	RET

// func vdQ4_0DOT(n int, w, x []byte) float32
// Q4_0 by Q8_0: nibbles unpacked and offset to [-8, 7], then as Q8_0.
TEXT ·vdQ4_0DOT(SB), NOSPLIT, $0-60
	MOVD  n+0(FP), R2
	MOVD  w_base+8(FP), R0
	MOVD  x_base+32(FP), R1
	LSR   $5, R2
	VEOR  V0.B16, V0.B16, V0.B16
	VMOVI $15, V30.B16
	VMOVI $8, V31.B16
	CBZ   R2, q40done

q40loop:
	SCALE
	ADD   $2, R0, R6
	ADD   $2, R1, R7
	VLD1  (R6), [V1.B16]
	VLD1  (R7), [V17.B16, V18.B16]
	VUSHR $4, V1.B16, V2.B16
	VAND  V30.B16, V1.B16, V1.B16
	VSUB  V31.B16, V1.B16, V1.B16
	VSUB  V31.B16, V2.B16, V2.B16
	VEOR  V3.B16, V3.B16, V3.B16
	WORD $0x4e919423 // sdot v3.4s, v1.16b, v17.16b
	WORD $0x4e929443 // sdot v3.4s, v2.16b, v18.16b
	WORD $0x4e21d863 // scvtf v3.4s, v3.4s
	WORD $0x4f871060 // fmla v0.4s, v3.4s, v7.s[0]
	ADD   $18, R0
	ADD   $34, R1
	SUB   $1, R2
	CBNZ  R2, q40loop

q40done:
	HSUM_V0
	FMOVS F0, ret+56(FP)
	RET

// func vdF32NEON(n int, w, x []byte) float32
TEXT ·vdF32NEON(SB), NOSPLIT, $0-60
	MOVD n+0(FP), R2
	MOVD w_base+8(FP), R0
	MOVD x_base+32(FP), R1
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

f32loop16:
	CMP    $16, R2
	BLT    f32loop4
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA  V16.S4, V4.S4, V0.S4
	VFMLA  V17.S4, V5.S4, V1.S4
	VFMLA  V18.S4, V6.S4, V2.S4
	VFMLA  V19.S4, V7.S4, V3.S4
	SUB    $16, R2
	B      f32loop16

f32loop4:
	CMP    $4, R2
	BLT    f32tail
	VLD1.P 16(R0), [V4.S4]
	VLD1.P 16(R1), [V16.S4]
	VFMLA  V16.S4, V4.S4, V0.S4
	SUB    $4, R2
	B      f32loop4

f32tail:
	WORD $0x4e21d400 // fadd v0.4s, v0.4s, v1.4s
	WORD $0x4e23d442 // fadd v2.4s, v2.4s, v3.4s
	WORD $0x4e22d400 // fadd v0.4s, v0.4s, v2.4s
	HSUM_V0
	CBZ   R2, f32done

f32loop1:
	FMOVS.P 4(R0), F4
	FMOVS.P 4(R1), F5
	FMADDS  F4, F0, F5, F0
	SUB     $1, R2
	CBNZ    R2, f32loop1

f32done:
	FMOVS F0, ret+56(FP)
	RET

// func vdF16NEON(n int, w, x []byte) float32
// F16 by F16, widened to float32 (FCVTL) and multiplied in float32.
TEXT ·vdF16NEON(SB), NOSPLIT, $0-60
	MOVD n+0(FP), R2
	MOVD w_base+8(FP), R0
	MOVD x_base+32(FP), R1
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

f16loop16:
	CMP    $16, R2
	BLT    f16loop8
	VLD1.P 32(R0), [V4.H8, V5.H8]
	VLD1.P 32(R1), [V16.H8, V17.H8]
	WORD $0x0e217886 // fcvtl v6.4s, v4.4h
	WORD $0x4e217887 // fcvtl2 v7.4s, v4.8h
	WORD $0x0e2178a8 // fcvtl v8.4s, v5.4h
	WORD $0x4e2178a9 // fcvtl2 v9.4s, v5.8h
	WORD $0x0e217a12 // fcvtl v18.4s, v16.4h
	WORD $0x4e217a13 // fcvtl2 v19.4s, v16.8h
	WORD $0x0e217a34 // fcvtl v20.4s, v17.4h
	WORD $0x4e217a35 // fcvtl2 v21.4s, v17.8h
	VFMLA  V18.S4, V6.S4, V0.S4
	VFMLA  V19.S4, V7.S4, V1.S4
	VFMLA  V20.S4, V8.S4, V2.S4
	VFMLA  V21.S4, V9.S4, V3.S4
	SUB    $16, R2
	B      f16loop16

f16loop8:
	CMP    $8, R2
	BLT    f16tail
	VLD1.P 16(R0), [V4.H8]
	VLD1.P 16(R1), [V16.H8]
	WORD $0x0e217886 // fcvtl v6.4s, v4.4h
	WORD $0x4e217887 // fcvtl2 v7.4s, v4.8h
	WORD $0x0e217a12 // fcvtl v18.4s, v16.4h
	WORD $0x4e217a13 // fcvtl2 v19.4s, v16.8h
	VFMLA  V18.S4, V6.S4, V0.S4
	VFMLA  V19.S4, V7.S4, V1.S4
	SUB    $8, R2
	B      f16loop8

f16tail:
	WORD $0x4e21d400 // fadd v0.4s, v0.4s, v1.4s
	WORD $0x4e23d442 // fadd v2.4s, v2.4s, v3.4s
	WORD $0x4e22d400 // fadd v0.4s, v0.4s, v2.4s
	HSUM_V0
	CBZ   R2, f16done

f16loop1:
	MOVHU.P 2(R0), R4
	MOVHU.P 2(R1), R5
	FMOVS   R4, F4
	FMOVS   R5, F5
	WORD $0x0e217884 // fcvtl v4.4s, v4.4h
	WORD $0x0e2178a5 // fcvtl v5.4s, v5.4h
	FMADDS  F4, F0, F5, F0
	SUB     $1, R2
	CBNZ    R2, f16loop1

f16done:
	FMOVS F0, ret+56(FP)
	RET
