#include "textflag.h"

// K-quant x Q8_K dot products for arm64 with the dot-product extension.
// Go's assembler has no SDOT, by-element MLA/FMLA or vector SCVTF, so those
// (and their neighbours, for one consistent style) are WORD-encoded with the
// instruction in the comment. SDOT sums four int8 x int8 products into each
// int32 lane exactly, for any int8 activation (-128 included); sub-block
// scales are applied with integer MLA, and only the per-block combination
// with d (and dmin) is float32, spread over four lanes, so results differ
// from the reference in the last bits only.


// func kqQ2KNEONDot(w, x *byte, nb int) float32
TEXT ·kqQ2KNEONDot(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	WORD $0x4f00e5ff // movi v31.16b, #0x0f
	WORD $0x4f00e47e // movi v30.16b, #0x03
	VEOR V29.B16, V29.B16, V29.B16
	VEOR V28.B16, V28.B16, V28.B16

q2kloop:
	VLD1 (R0), [V20.B16]
	WORD $0x4e3f1e95 // and v21.16b, v20.16b, v31.16b
	WORD $0x6f0c0696 // ushr v22.16b, v20.16b, #4
	// mins . bsums, scaled by dmin*yd and subtracted
	ADD $260, R1, R6
	VLD1 (R6), [V16.H8, V17.H8]
	WORD $0x2f08a6d2 // ushll v18.8h, v22.8b, #0
	WORD $0x6f08a6d3 // ushll2 v19.8h, v22.16b, #0
	WORD $0x0e72c217 // smull v23.4s, v16.4h, v18.4h
	WORD $0x4e728217 // smlal2 v23.4s, v16.8h, v18.8h
	WORD $0x0e738237 // smlal v23.4s, v17.4h, v19.4h
	WORD $0x4e738237 // smlal2 v23.4s, v17.8h, v19.8h
	WORD $0x4e21daf7 // scvtf v23.4s, v23.4s
	MOVWU 80(R0), R7
	VMOV R7, V18.S[0]
	WORD $0x0e217a52 // fcvtl v18.4s, v18.4h
	FMOVS (R1), F19
	WORD $0x4f939252 // fmul v18.4s, v18.4s, v19.s[0]
	WORD $0x4fb252fc // fmls v28.4s, v23.4s, v18.s[1]
	// the 16 4-bit scales as int32 lanes for MLA by element
	WORD $0x2f08a6b6 // ushll v22.8h, v21.8b, #0
	WORD $0x6f08a6b7 // ushll2 v23.8h, v21.16b, #0
	WORD $0x2f10a6d8 // ushll v24.4s, v22.4h, #0
	WORD $0x6f10a6d9 // ushll2 v25.4s, v22.8h, #0
	WORD $0x2f10a6fa // ushll v26.4s, v23.4h, #0
	WORD $0x6f10a6fb // ushll2 v27.4s, v23.8h, #0
	ADD $16, R0, R5
	ADD $4, R1, R6
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V8.B16, V9.B16, V10.B16, V11.B16]
	VLD1.P 64(R6), [V12.B16, V13.B16, V14.B16, V15.B16]
	WORD $0x4e3e1c02 // and v2.16b, v0.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e889444 // sdot v4.4s, v2.16b, v8.16b
	WORD $0x4f988086 // mul v6.4s, v4.4s, v24.s[0]
	WORD $0x4e3e1c23 // and v3.16b, v1.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e899465 // sdot v5.4s, v3.16b, v9.16b
	WORD $0x4fb880a7 // mul v7.4s, v5.4s, v24.s[1]
	WORD $0x6f0e0402 // ushr v2.16b, v0.16b, #2
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8a9444 // sdot v4.4s, v2.16b, v10.16b
	WORD $0x6f980886 // mla v6.4s, v4.4s, v24.s[2]
	WORD $0x6f0e0423 // ushr v3.16b, v1.16b, #2
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8b9465 // sdot v5.4s, v3.16b, v11.16b
	WORD $0x6fb808a7 // mla v7.4s, v5.4s, v24.s[3]
	WORD $0x6f0c0402 // ushr v2.16b, v0.16b, #4
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8c9444 // sdot v4.4s, v2.16b, v12.16b
	WORD $0x6f990086 // mla v6.4s, v4.4s, v25.s[0]
	WORD $0x6f0c0423 // ushr v3.16b, v1.16b, #4
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8d9465 // sdot v5.4s, v3.16b, v13.16b
	WORD $0x6fb900a7 // mla v7.4s, v5.4s, v25.s[1]
	WORD $0x6f0a0402 // ushr v2.16b, v0.16b, #6
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8e9444 // sdot v4.4s, v2.16b, v14.16b
	WORD $0x6f990886 // mla v6.4s, v4.4s, v25.s[2]
	WORD $0x6f0a0423 // ushr v3.16b, v1.16b, #6
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8f9465 // sdot v5.4s, v3.16b, v15.16b
	WORD $0x6fb908a7 // mla v7.4s, v5.4s, v25.s[3]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V8.B16, V9.B16, V10.B16, V11.B16]
	VLD1.P 64(R6), [V12.B16, V13.B16, V14.B16, V15.B16]
	WORD $0x4e3e1c02 // and v2.16b, v0.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e889444 // sdot v4.4s, v2.16b, v8.16b
	WORD $0x6f9a0086 // mla v6.4s, v4.4s, v26.s[0]
	WORD $0x4e3e1c23 // and v3.16b, v1.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e899465 // sdot v5.4s, v3.16b, v9.16b
	WORD $0x6fba00a7 // mla v7.4s, v5.4s, v26.s[1]
	WORD $0x6f0e0402 // ushr v2.16b, v0.16b, #2
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8a9444 // sdot v4.4s, v2.16b, v10.16b
	WORD $0x6f9a0886 // mla v6.4s, v4.4s, v26.s[2]
	WORD $0x6f0e0423 // ushr v3.16b, v1.16b, #2
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8b9465 // sdot v5.4s, v3.16b, v11.16b
	WORD $0x6fba08a7 // mla v7.4s, v5.4s, v26.s[3]
	WORD $0x6f0c0402 // ushr v2.16b, v0.16b, #4
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8c9444 // sdot v4.4s, v2.16b, v12.16b
	WORD $0x6f9b0086 // mla v6.4s, v4.4s, v27.s[0]
	WORD $0x6f0c0423 // ushr v3.16b, v1.16b, #4
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8d9465 // sdot v5.4s, v3.16b, v13.16b
	WORD $0x6fbb00a7 // mla v7.4s, v5.4s, v27.s[1]
	WORD $0x6f0a0402 // ushr v2.16b, v0.16b, #6
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8e9444 // sdot v4.4s, v2.16b, v14.16b
	WORD $0x6f9b0886 // mla v6.4s, v4.4s, v27.s[2]
	WORD $0x6f0a0423 // ushr v3.16b, v1.16b, #6
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8f9465 // sdot v5.4s, v3.16b, v15.16b
	WORD $0x6fbb08a7 // mla v7.4s, v5.4s, v27.s[3]
	WORD $0x4ea784c6 // add v6.4s, v6.4s, v7.4s
	WORD $0x4e21d8c6 // scvtf v6.4s, v6.4s
	WORD $0x4f9210dd // fmla v29.4s, v6.4s, v18.s[0]
	ADD $84, R0
	ADD $292, R1
	SUBS $1, R2
	BNE q2kloop
	WORD $0x4e3cd7bd // fadd v29.4s, v29.4s, v28.4s
	WORD $0x6e3dd7bd // faddp v29.4s, v29.4s, v29.4s
	WORD $0x7e30dba0 // faddp s0, v29.2s
	FMOVS F0, ret+24(FP)
	RET

// func kqQ3KNEONDot(w, x *byte, nb int) float32
//
// Codes are used as value+4 (0..7: two low bits from qs, the third from
// hmask); 4 * sum(scale_g * bsum_g) is taken off in int32 per block.
TEXT ·kqQ3KNEONDot(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD $0x0303030303030303, R12
	MOVD $0x0f0f0f0f0f0f0f0f, R13
	WORD $0x4f00e4ff // movi v31.16b, #0x07
	WORD $0x4f00e47e // movi v30.16b, #0x03
	WORD $0x4f01841d // movi v29.8h, #32
	VEOR V28.B16, V28.B16, V28.B16

q3kloop:
	// 16 6-bit scales: low nibbles from bytes 0-7, top 2 bits from 8-11
	// (ggml's kmask arithmetic, two 32-bit halves at a time).
	MOVD 96(R0), R8
	MOVWU 104(R0), R9
	LSR $2, R9, R3
	ORR R3<<32, R9, R9
	AND R13, R8, R10
	AND R12, R9, R3
	ORR R3<<4, R10, R10
	LSR $4, R8, R8
	AND R13, R8, R8
	LSR $4, R9, R9
	AND R12, R9, R9
	ORR R9<<4, R8, R8
	VMOV R10, V20.D[0]
	VMOV R8, V20.D[1]
	WORD $0x2f08a695 // ushll v21.8h, v20.8b, #0
	WORD $0x6f08a696 // ushll2 v22.8h, v20.16b, #0
	WORD $0x6e7d86b5 // sub v21.8h, v21.8h, v29.8h
	WORD $0x6e7d86d6 // sub v22.8h, v22.8h, v29.8h
	ADD $260, R1, R6
	VLD1 (R6), [V16.H8, V17.H8]
	WORD $0x0e75c217 // smull v23.4s, v16.4h, v21.4h
	WORD $0x4e758217 // smlal2 v23.4s, v16.8h, v21.8h
	WORD $0x0e768237 // smlal v23.4s, v17.4h, v22.4h
	WORD $0x4e768237 // smlal2 v23.4s, v17.8h, v22.8h
	WORD $0x4f2256f7 // shl v23.4s, v23.4s, #2
	WORD $0x0f10a6b8 // sshll v24.4s, v21.4h, #0
	WORD $0x4f10a6b9 // sshll2 v25.4s, v21.8h, #0
	WORD $0x0f10a6da // sshll v26.4s, v22.4h, #0
	WORD $0x4f10a6db // sshll2 v27.4s, v22.8h, #0
	VLD1 (R0), [V18.B16, V19.B16]
	ADD $32, R0, R5
	ADD $4, R1, R6
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V8.B16, V9.B16, V10.B16, V11.B16]
	VLD1.P 64(R6), [V12.B16, V13.B16, V14.B16, V15.B16]
	WORD $0x4e3e1c02 // and v2.16b, v0.16b, v30.16b
	WORD $0x6f0a5642 // sli v2.16b, v18.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e889444 // sdot v4.4s, v2.16b, v8.16b
	WORD $0x4f988086 // mul v6.4s, v4.4s, v24.s[0]
	WORD $0x4e3e1c23 // and v3.16b, v1.16b, v30.16b
	WORD $0x6f0a5663 // sli v3.16b, v19.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e899465 // sdot v5.4s, v3.16b, v9.16b
	WORD $0x4fb880a7 // mul v7.4s, v5.4s, v24.s[1]
	WORD $0x6f0e0402 // ushr v2.16b, v0.16b, #2
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f0f0650 // ushr v16.16b, v18.16b, #1
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8a9444 // sdot v4.4s, v2.16b, v10.16b
	WORD $0x6f980886 // mla v6.4s, v4.4s, v24.s[2]
	WORD $0x6f0e0423 // ushr v3.16b, v1.16b, #2
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f0f0671 // ushr v17.16b, v19.16b, #1
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8b9465 // sdot v5.4s, v3.16b, v11.16b
	WORD $0x6fb808a7 // mla v7.4s, v5.4s, v24.s[3]
	WORD $0x6f0c0402 // ushr v2.16b, v0.16b, #4
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f0e0650 // ushr v16.16b, v18.16b, #2
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8c9444 // sdot v4.4s, v2.16b, v12.16b
	WORD $0x6f990086 // mla v6.4s, v4.4s, v25.s[0]
	WORD $0x6f0c0423 // ushr v3.16b, v1.16b, #4
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f0e0671 // ushr v17.16b, v19.16b, #2
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8d9465 // sdot v5.4s, v3.16b, v13.16b
	WORD $0x6fb900a7 // mla v7.4s, v5.4s, v25.s[1]
	WORD $0x6f0a0402 // ushr v2.16b, v0.16b, #6
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f0d0650 // ushr v16.16b, v18.16b, #3
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8e9444 // sdot v4.4s, v2.16b, v14.16b
	WORD $0x6f990886 // mla v6.4s, v4.4s, v25.s[2]
	WORD $0x6f0a0423 // ushr v3.16b, v1.16b, #6
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f0d0671 // ushr v17.16b, v19.16b, #3
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8f9465 // sdot v5.4s, v3.16b, v15.16b
	WORD $0x6fb908a7 // mla v7.4s, v5.4s, v25.s[3]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V8.B16, V9.B16, V10.B16, V11.B16]
	VLD1.P 64(R6), [V12.B16, V13.B16, V14.B16, V15.B16]
	WORD $0x4e3e1c02 // and v2.16b, v0.16b, v30.16b
	WORD $0x6f0c0650 // ushr v16.16b, v18.16b, #4
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e889444 // sdot v4.4s, v2.16b, v8.16b
	WORD $0x6f9a0086 // mla v6.4s, v4.4s, v26.s[0]
	WORD $0x4e3e1c23 // and v3.16b, v1.16b, v30.16b
	WORD $0x6f0c0671 // ushr v17.16b, v19.16b, #4
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e899465 // sdot v5.4s, v3.16b, v9.16b
	WORD $0x6fba00a7 // mla v7.4s, v5.4s, v26.s[1]
	WORD $0x6f0e0402 // ushr v2.16b, v0.16b, #2
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f0b0650 // ushr v16.16b, v18.16b, #5
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8a9444 // sdot v4.4s, v2.16b, v10.16b
	WORD $0x6f9a0886 // mla v6.4s, v4.4s, v26.s[2]
	WORD $0x6f0e0423 // ushr v3.16b, v1.16b, #2
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f0b0671 // ushr v17.16b, v19.16b, #5
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8b9465 // sdot v5.4s, v3.16b, v11.16b
	WORD $0x6fba08a7 // mla v7.4s, v5.4s, v26.s[3]
	WORD $0x6f0c0402 // ushr v2.16b, v0.16b, #4
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f0a0650 // ushr v16.16b, v18.16b, #6
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8c9444 // sdot v4.4s, v2.16b, v12.16b
	WORD $0x6f9b0086 // mla v6.4s, v4.4s, v27.s[0]
	WORD $0x6f0c0423 // ushr v3.16b, v1.16b, #4
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f0a0671 // ushr v17.16b, v19.16b, #6
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8d9465 // sdot v5.4s, v3.16b, v13.16b
	WORD $0x6fbb00a7 // mla v7.4s, v5.4s, v27.s[1]
	WORD $0x6f0a0402 // ushr v2.16b, v0.16b, #6
	WORD $0x4e3e1c42 // and v2.16b, v2.16b, v30.16b
	WORD $0x6f090650 // ushr v16.16b, v18.16b, #7
	WORD $0x6f0a5602 // sli v2.16b, v16.16b, #2
	WORD $0x4e3f1c42 // and v2.16b, v2.16b, v31.16b
	WORD $0x6f00e404 // movi v4.2d, #0
	WORD $0x4e8e9444 // sdot v4.4s, v2.16b, v14.16b
	WORD $0x6f9b0886 // mla v6.4s, v4.4s, v27.s[2]
	WORD $0x6f0a0423 // ushr v3.16b, v1.16b, #6
	WORD $0x4e3e1c63 // and v3.16b, v3.16b, v30.16b
	WORD $0x6f090671 // ushr v17.16b, v19.16b, #7
	WORD $0x6f0a5623 // sli v3.16b, v17.16b, #2
	WORD $0x4e3f1c63 // and v3.16b, v3.16b, v31.16b
	WORD $0x6f00e405 // movi v5.2d, #0
	WORD $0x4e8f9465 // sdot v5.4s, v3.16b, v15.16b
	WORD $0x6fbb08a7 // mla v7.4s, v5.4s, v27.s[3]
	WORD $0x4ea784c6 // add v6.4s, v6.4s, v7.4s
	WORD $0x6eb784c6 // sub v6.4s, v6.4s, v23.4s
	WORD $0x4e21d8c6 // scvtf v6.4s, v6.4s
	MOVHU 108(R0), R3
	VMOV R3, V16.H[0]
	WORD $0x0e217a10 // fcvtl v16.4s, v16.4h
	FMOVS (R1), F17
	WORD $0x4f919210 // fmul v16.4s, v16.4s, v17.s[0]
	WORD $0x4f9010dc // fmla v28.4s, v6.4s, v16.s[0]
	ADD $110, R0
	ADD $292, R1
	SUBS $1, R2
	BNE q3kloop
	WORD $0x6e3cd79c // faddp v28.4s, v28.4s, v28.4s
	WORD $0x7e30db80 // faddp s0, v28.2s
	FMOVS F0, ret+24(FP)
	RET

// func kqQ4KNEONDot(w, x *byte, nb int) float32
TEXT ·kqQ4KNEONDot(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD $0x3f3f3f3f3f3f3f3f, R11
	MOVD $0x0303030303030303, R12
	MOVD $0x0f0f0f0f0f0f0f0f, R13
	WORD $0x4f00e5ff // movi v31.16b, #0x0f
	VEOR V30.B16, V30.B16, V30.B16
	VEOR V29.B16, V29.B16, V29.B16

q4kloop:
	// 6-bit scales and mins, two 32-bit halves at a time:
	// low6 = [sc0-3, m0-3], hi = [sc4-7, m4-7].
	MOVD 4(R0), R8
	MOVWU 12(R0), R9
	AND R11, R8, R10
	LSR $6, R8, R8
	AND R12, R8, R8
	LSL $4, R8, R8
	LSR $4, R9, R3
	ORR R3<<32, R9, R9
	AND R13, R9, R9
	ORR R8, R9, R9
	MOVWU R10, R3
	ORR R9<<32, R3, R3
	LSR $32, R10, R4
	LSR $32, R9, R5
	ORR R5<<32, R4, R4
	VMOV R3, V20.D[0]
	VMOV R4, V20.D[1]
	WORD $0x2f08a695 // ushll v21.8h, v20.8b, #0
	WORD $0x6f08a696 // ushll2 v22.8h, v20.16b, #0
	WORD $0x2f10a6b7 // ushll v23.4s, v21.4h, #0
	WORD $0x6f10a6b8 // ushll2 v24.4s, v21.8h, #0
	WORD $0x2f10a6d9 // ushll v25.4s, v22.4h, #0
	WORD $0x6f10a6da // ushll2 v26.4s, v22.8h, #0
	// mins . (bsum pairs), scaled by dmin*yd and subtracted
	ADD $260, R1, R6
	VLD1 (R6), [V16.H8, V17.H8]
	WORD $0x4e602a10 // saddlp v16.4s, v16.8h
	WORD $0x4e602a31 // saddlp v17.4s, v17.8h
	WORD $0x4eb99e10 // mul v16.4s, v16.4s, v25.4s
	WORD $0x4eba9630 // mla v16.4s, v17.4s, v26.4s
	WORD $0x4e21da10 // scvtf v16.4s, v16.4s
	MOVWU (R0), R7
	VMOV R7, V18.S[0]
	WORD $0x0e217a52 // fcvtl v18.4s, v18.4h
	FMOVS (R1), F19
	WORD $0x4f939252 // fmul v18.4s, v18.4s, v19.s[0]
	WORD $0x4fb2521d // fmls v29.4s, v16.4s, v18.s[1]
	ADD $16, R0, R5
	ADD $4, R1, R6
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x4f97837c // mul v28.4s, v27.4s, v23.s[0]
	WORD $0x4fb78359 // mul v25.4s, v26.4s, v23.s[1]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x6f970b7c // mla v28.4s, v27.4s, v23.s[2]
	WORD $0x6fb70b59 // mla v25.4s, v26.4s, v23.s[3]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x6f98037c // mla v28.4s, v27.4s, v24.s[0]
	WORD $0x6fb80359 // mla v25.4s, v26.4s, v24.s[1]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x6f980b7c // mla v28.4s, v27.4s, v24.s[2]
	WORD $0x6fb80b59 // mla v25.4s, v26.4s, v24.s[3]
	WORD $0x4eb9879c // add v28.4s, v28.4s, v25.4s
	WORD $0x4e21db9c // scvtf v28.4s, v28.4s
	WORD $0x4f92139e // fmla v30.4s, v28.4s, v18.s[0]
	ADD $144, R0
	ADD $292, R1
	SUBS $1, R2
	BNE q4kloop
	WORD $0x4e3dd7de // fadd v30.4s, v30.4s, v29.4s
	WORD $0x6e3ed7de // faddp v30.4s, v30.4s, v30.4s
	WORD $0x7e30dbc0 // faddp s0, v30.2s
	FMOVS F0, ret+24(FP)
	RET

// func kqQ5KNEONDot(w, x *byte, nb int) float32
//
// As Q4_K, with the fifth bit of each code from qh shifted into bit 4.
TEXT ·kqQ5KNEONDot(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD $0x3f3f3f3f3f3f3f3f, R11
	MOVD $0x0303030303030303, R12
	MOVD $0x0f0f0f0f0f0f0f0f, R13
	WORD $0x4f00e5ff // movi v31.16b, #0x0f
	VEOR V30.B16, V30.B16, V30.B16
	VEOR V29.B16, V29.B16, V29.B16
	WORD $0x4f00e7ef // movi v15.16b, #0x1f

q5kloop:
	// 6-bit scales and mins, two 32-bit halves at a time:
	// low6 = [sc0-3, m0-3], hi = [sc4-7, m4-7].
	MOVD 4(R0), R8
	MOVWU 12(R0), R9
	AND R11, R8, R10
	LSR $6, R8, R8
	AND R12, R8, R8
	LSL $4, R8, R8
	LSR $4, R9, R3
	ORR R3<<32, R9, R9
	AND R13, R9, R9
	ORR R8, R9, R9
	MOVWU R10, R3
	ORR R9<<32, R3, R3
	LSR $32, R10, R4
	LSR $32, R9, R5
	ORR R5<<32, R4, R4
	VMOV R3, V20.D[0]
	VMOV R4, V20.D[1]
	WORD $0x2f08a695 // ushll v21.8h, v20.8b, #0
	WORD $0x6f08a696 // ushll2 v22.8h, v20.16b, #0
	WORD $0x2f10a6b7 // ushll v23.4s, v21.4h, #0
	WORD $0x6f10a6b8 // ushll2 v24.4s, v21.8h, #0
	WORD $0x2f10a6d9 // ushll v25.4s, v22.4h, #0
	WORD $0x6f10a6da // ushll2 v26.4s, v22.8h, #0
	// mins . (bsum pairs), scaled by dmin*yd and subtracted
	ADD $260, R1, R6
	VLD1 (R6), [V16.H8, V17.H8]
	WORD $0x4e602a10 // saddlp v16.4s, v16.8h
	WORD $0x4e602a31 // saddlp v17.4s, v17.8h
	WORD $0x4eb99e10 // mul v16.4s, v16.4s, v25.4s
	WORD $0x4eba9630 // mla v16.4s, v17.4s, v26.4s
	WORD $0x4e21da10 // scvtf v16.4s, v16.4s
	MOVWU (R0), R7
	VMOV R7, V18.S[0]
	WORD $0x0e217a52 // fcvtl v18.4s, v18.4h
	FMOVS (R1), F19
	WORD $0x4f939252 // fmul v18.4s, v18.4s, v19.s[0]
	WORD $0x4fb2521d // fmls v29.4s, v16.4s, v18.s[1]
	ADD $48, R0, R5
	ADD $4, R1, R6
	ADD $16, R0, R7
	VLD1 (R7), [V8.B16, V9.B16]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f0c5506 // sli v6.16b, v8.16b, #4
	WORD $0x4e2f1cc6 // and v6.16b, v6.16b, v15.16b
	WORD $0x6f0c5527 // sli v7.16b, v9.16b, #4
	WORD $0x4e2f1ce7 // and v7.16b, v7.16b, v15.16b
	WORD $0x6f0f050a // ushr v10.16b, v8.16b, #1
	WORD $0x6f0c5540 // sli v0.16b, v10.16b, #4
	WORD $0x4e2f1c00 // and v0.16b, v0.16b, v15.16b
	WORD $0x6f0f052b // ushr v11.16b, v9.16b, #1
	WORD $0x6f0c5561 // sli v1.16b, v11.16b, #4
	WORD $0x4e2f1c21 // and v1.16b, v1.16b, v15.16b
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x4f97837c // mul v28.4s, v27.4s, v23.s[0]
	WORD $0x4fb78359 // mul v25.4s, v26.4s, v23.s[1]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f0e050a // ushr v10.16b, v8.16b, #2
	WORD $0x6f0c5546 // sli v6.16b, v10.16b, #4
	WORD $0x4e2f1cc6 // and v6.16b, v6.16b, v15.16b
	WORD $0x6f0e052b // ushr v11.16b, v9.16b, #2
	WORD $0x6f0c5567 // sli v7.16b, v11.16b, #4
	WORD $0x4e2f1ce7 // and v7.16b, v7.16b, v15.16b
	WORD $0x6f0d050a // ushr v10.16b, v8.16b, #3
	WORD $0x6f0c5540 // sli v0.16b, v10.16b, #4
	WORD $0x4e2f1c00 // and v0.16b, v0.16b, v15.16b
	WORD $0x6f0d052b // ushr v11.16b, v9.16b, #3
	WORD $0x6f0c5561 // sli v1.16b, v11.16b, #4
	WORD $0x4e2f1c21 // and v1.16b, v1.16b, v15.16b
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x6f970b7c // mla v28.4s, v27.4s, v23.s[2]
	WORD $0x6fb70b59 // mla v25.4s, v26.4s, v23.s[3]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f0c050a // ushr v10.16b, v8.16b, #4
	WORD $0x6f0c5546 // sli v6.16b, v10.16b, #4
	WORD $0x4e2f1cc6 // and v6.16b, v6.16b, v15.16b
	WORD $0x6f0c052b // ushr v11.16b, v9.16b, #4
	WORD $0x6f0c5567 // sli v7.16b, v11.16b, #4
	WORD $0x4e2f1ce7 // and v7.16b, v7.16b, v15.16b
	WORD $0x6f0b050a // ushr v10.16b, v8.16b, #5
	WORD $0x6f0c5540 // sli v0.16b, v10.16b, #4
	WORD $0x4e2f1c00 // and v0.16b, v0.16b, v15.16b
	WORD $0x6f0b052b // ushr v11.16b, v9.16b, #5
	WORD $0x6f0c5561 // sli v1.16b, v11.16b, #4
	WORD $0x4e2f1c21 // and v1.16b, v1.16b, v15.16b
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x6f98037c // mla v28.4s, v27.4s, v24.s[0]
	WORD $0x6fb80359 // mla v25.4s, v26.4s, v24.s[1]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VLD1.P 64(R6), [V2.B16, V3.B16, V4.B16, V5.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x4e3f1c27 // and v7.16b, v1.16b, v31.16b
	WORD $0x6f0c0400 // ushr v0.16b, v0.16b, #4
	WORD $0x6f0c0421 // ushr v1.16b, v1.16b, #4
	WORD $0x6f0a050a // ushr v10.16b, v8.16b, #6
	WORD $0x6f0c5546 // sli v6.16b, v10.16b, #4
	WORD $0x4e2f1cc6 // and v6.16b, v6.16b, v15.16b
	WORD $0x6f0a052b // ushr v11.16b, v9.16b, #6
	WORD $0x6f0c5567 // sli v7.16b, v11.16b, #4
	WORD $0x4e2f1ce7 // and v7.16b, v7.16b, v15.16b
	WORD $0x6f09050a // ushr v10.16b, v8.16b, #7
	WORD $0x6f0c5540 // sli v0.16b, v10.16b, #4
	WORD $0x4e2f1c00 // and v0.16b, v0.16b, v15.16b
	WORD $0x6f09052b // ushr v11.16b, v9.16b, #7
	WORD $0x6f0c5561 // sli v1.16b, v11.16b, #4
	WORD $0x4e2f1c21 // and v1.16b, v1.16b, v15.16b
	WORD $0x6f00e41b // movi v27.2d, #0
	WORD $0x4e8294db // sdot v27.4s, v6.16b, v2.16b
	WORD $0x4e8394fb // sdot v27.4s, v7.16b, v3.16b
	WORD $0x6f00e41a // movi v26.2d, #0
	WORD $0x4e84941a // sdot v26.4s, v0.16b, v4.16b
	WORD $0x4e85943a // sdot v26.4s, v1.16b, v5.16b
	WORD $0x6f980b7c // mla v28.4s, v27.4s, v24.s[2]
	WORD $0x6fb80b59 // mla v25.4s, v26.4s, v24.s[3]
	WORD $0x4eb9879c // add v28.4s, v28.4s, v25.4s
	WORD $0x4e21db9c // scvtf v28.4s, v28.4s
	WORD $0x4f92139e // fmla v30.4s, v28.4s, v18.s[0]
	ADD $176, R0
	ADD $292, R1
	SUBS $1, R2
	BNE q5kloop
	WORD $0x4e3dd7de // fadd v30.4s, v30.4s, v29.4s
	WORD $0x6e3ed7de // faddp v30.4s, v30.4s, v30.4s
	WORD $0x7e30dbc0 // faddp s0, v30.2s
	FMOVS F0, ret+24(FP)
	RET

// func kqQ6KNEONDot(w, x *byte, nb int) float32
//
// The 6-bit codes are used unsigned (0..63); the -32 offset is applied once
// per block as 32 * sum(scale_g * bsum_g) from the activations' bsums.
TEXT ·kqQ6KNEONDot(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	WORD $0x4f00e5ff // movi v31.16b, #0x0f
	WORD $0x4f01e7fe // movi v30.16b, #0x3f
	WORD $0x4f01e61d // movi v29.16b, #0x30
	VEOR V28.B16, V28.B16, V28.B16

q6kloop:
	ADD $192, R0, R5
	VLD1 (R5), [V20.B16]
	WORD $0x0f08a695 // sshll v21.8h, v20.8b, #0
	WORD $0x4f08a696 // sshll2 v22.8h, v20.16b, #0
	WORD $0x0f10a6b8 // sshll v24.4s, v21.4h, #0
	WORD $0x4f10a6b9 // sshll2 v25.4s, v21.8h, #0
	WORD $0x0f10a6da // sshll v26.4s, v22.4h, #0
	WORD $0x4f10a6db // sshll2 v27.4s, v22.8h, #0
	ADD $260, R1, R6
	VLD1 (R6), [V16.H8, V17.H8]
	WORD $0x0e75c217 // smull v23.4s, v16.4h, v21.4h
	WORD $0x4e758217 // smlal2 v23.4s, v16.8h, v21.8h
	WORD $0x0e768237 // smlal v23.4s, v17.4h, v22.4h
	WORD $0x4e768237 // smlal2 v23.4s, v17.8h, v22.8h
	WORD $0x4f2556f7 // shl v23.4s, v23.4s, #5
	MOVD R0, R5
	ADD $128, R0, R7
	ADD $4, R1, R6
	VLD1.P 64(R5), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R7), [V4.B16, V5.B16]
	VLD1.P 64(R6), [V8.B16, V9.B16, V10.B16, V11.B16]
	VLD1.P 64(R6), [V12.B16, V13.B16, V14.B16, V15.B16]
	WORD $0x6f0e0486 // ushr v6.16b, v4.16b, #2
	WORD $0x6f0e04a7 // ushr v7.16b, v5.16b, #2
	WORD $0x4e3f1c10 // and v16.16b, v0.16b, v31.16b
	WORD $0x6f0c5490 // sli v16.16b, v4.16b, #4
	WORD $0x4e3e1e10 // and v16.16b, v16.16b, v30.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e889613 // sdot v19.4s, v16.16b, v8.16b
	WORD $0x4f988276 // mul v22.4s, v19.4s, v24.s[0]
	WORD $0x4e3f1c32 // and v18.16b, v1.16b, v31.16b
	WORD $0x6f0c54b2 // sli v18.16b, v5.16b, #4
	WORD $0x4e3e1e52 // and v18.16b, v18.16b, v30.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e899654 // sdot v20.4s, v18.16b, v9.16b
	WORD $0x4fb88295 // mul v21.4s, v20.4s, v24.s[1]
	WORD $0x4e3f1c50 // and v16.16b, v2.16b, v31.16b
	WORD $0x6f0c54d0 // sli v16.16b, v6.16b, #4
	WORD $0x4e3e1e10 // and v16.16b, v16.16b, v30.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8a9613 // sdot v19.4s, v16.16b, v10.16b
	WORD $0x6f980a76 // mla v22.4s, v19.4s, v24.s[2]
	WORD $0x4e3f1c72 // and v18.16b, v3.16b, v31.16b
	WORD $0x6f0c54f2 // sli v18.16b, v7.16b, #4
	WORD $0x4e3e1e52 // and v18.16b, v18.16b, v30.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e8b9654 // sdot v20.4s, v18.16b, v11.16b
	WORD $0x6fb80a95 // mla v21.4s, v20.4s, v24.s[3]
	WORD $0x6f0c0410 // ushr v16.16b, v0.16b, #4
	WORD $0x4e3d1c91 // and v17.16b, v4.16b, v29.16b
	WORD $0x4eb11e10 // orr v16.16b, v16.16b, v17.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8c9613 // sdot v19.4s, v16.16b, v12.16b
	WORD $0x6f990276 // mla v22.4s, v19.4s, v25.s[0]
	WORD $0x6f0c0432 // ushr v18.16b, v1.16b, #4
	WORD $0x4e3d1cb1 // and v17.16b, v5.16b, v29.16b
	WORD $0x4eb11e52 // orr v18.16b, v18.16b, v17.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e8d9654 // sdot v20.4s, v18.16b, v13.16b
	WORD $0x6fb90295 // mla v21.4s, v20.4s, v25.s[1]
	WORD $0x6f0c0450 // ushr v16.16b, v2.16b, #4
	WORD $0x4e3d1cd1 // and v17.16b, v6.16b, v29.16b
	WORD $0x4eb11e10 // orr v16.16b, v16.16b, v17.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8e9613 // sdot v19.4s, v16.16b, v14.16b
	WORD $0x6f990a76 // mla v22.4s, v19.4s, v25.s[2]
	WORD $0x6f0c0472 // ushr v18.16b, v3.16b, #4
	WORD $0x4e3d1cf1 // and v17.16b, v7.16b, v29.16b
	WORD $0x4eb11e52 // orr v18.16b, v18.16b, v17.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e8f9654 // sdot v20.4s, v18.16b, v15.16b
	WORD $0x6fb90a95 // mla v21.4s, v20.4s, v25.s[3]
	VLD1.P 64(R5), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 32(R7), [V4.B16, V5.B16]
	VLD1.P 64(R6), [V8.B16, V9.B16, V10.B16, V11.B16]
	VLD1.P 64(R6), [V12.B16, V13.B16, V14.B16, V15.B16]
	WORD $0x6f0e0486 // ushr v6.16b, v4.16b, #2
	WORD $0x6f0e04a7 // ushr v7.16b, v5.16b, #2
	WORD $0x4e3f1c10 // and v16.16b, v0.16b, v31.16b
	WORD $0x6f0c5490 // sli v16.16b, v4.16b, #4
	WORD $0x4e3e1e10 // and v16.16b, v16.16b, v30.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e889613 // sdot v19.4s, v16.16b, v8.16b
	WORD $0x6f9a0276 // mla v22.4s, v19.4s, v26.s[0]
	WORD $0x4e3f1c32 // and v18.16b, v1.16b, v31.16b
	WORD $0x6f0c54b2 // sli v18.16b, v5.16b, #4
	WORD $0x4e3e1e52 // and v18.16b, v18.16b, v30.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e899654 // sdot v20.4s, v18.16b, v9.16b
	WORD $0x6fba0295 // mla v21.4s, v20.4s, v26.s[1]
	WORD $0x4e3f1c50 // and v16.16b, v2.16b, v31.16b
	WORD $0x6f0c54d0 // sli v16.16b, v6.16b, #4
	WORD $0x4e3e1e10 // and v16.16b, v16.16b, v30.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8a9613 // sdot v19.4s, v16.16b, v10.16b
	WORD $0x6f9a0a76 // mla v22.4s, v19.4s, v26.s[2]
	WORD $0x4e3f1c72 // and v18.16b, v3.16b, v31.16b
	WORD $0x6f0c54f2 // sli v18.16b, v7.16b, #4
	WORD $0x4e3e1e52 // and v18.16b, v18.16b, v30.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e8b9654 // sdot v20.4s, v18.16b, v11.16b
	WORD $0x6fba0a95 // mla v21.4s, v20.4s, v26.s[3]
	WORD $0x6f0c0410 // ushr v16.16b, v0.16b, #4
	WORD $0x4e3d1c91 // and v17.16b, v4.16b, v29.16b
	WORD $0x4eb11e10 // orr v16.16b, v16.16b, v17.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8c9613 // sdot v19.4s, v16.16b, v12.16b
	WORD $0x6f9b0276 // mla v22.4s, v19.4s, v27.s[0]
	WORD $0x6f0c0432 // ushr v18.16b, v1.16b, #4
	WORD $0x4e3d1cb1 // and v17.16b, v5.16b, v29.16b
	WORD $0x4eb11e52 // orr v18.16b, v18.16b, v17.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e8d9654 // sdot v20.4s, v18.16b, v13.16b
	WORD $0x6fbb0295 // mla v21.4s, v20.4s, v27.s[1]
	WORD $0x6f0c0450 // ushr v16.16b, v2.16b, #4
	WORD $0x4e3d1cd1 // and v17.16b, v6.16b, v29.16b
	WORD $0x4eb11e10 // orr v16.16b, v16.16b, v17.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8e9613 // sdot v19.4s, v16.16b, v14.16b
	WORD $0x6f9b0a76 // mla v22.4s, v19.4s, v27.s[2]
	WORD $0x6f0c0472 // ushr v18.16b, v3.16b, #4
	WORD $0x4e3d1cf1 // and v17.16b, v7.16b, v29.16b
	WORD $0x4eb11e52 // orr v18.16b, v18.16b, v17.16b
	WORD $0x6f00e414 // movi v20.2d, #0
	WORD $0x4e8f9654 // sdot v20.4s, v18.16b, v15.16b
	WORD $0x6fbb0a95 // mla v21.4s, v20.4s, v27.s[3]
	MOVHU 208(R0), R3
	VMOV R3, V16.H[0]
	WORD $0x0e217a10 // fcvtl v16.4s, v16.4h
	FMOVS (R1), F17
	WORD $0x4f919210 // fmul v16.4s, v16.4s, v17.s[0]
	WORD $0x4eb586d6 // add v22.4s, v22.4s, v21.4s
	WORD $0x6eb786d6 // sub v22.4s, v22.4s, v23.4s
	WORD $0x4e21dad6 // scvtf v22.4s, v22.4s
	WORD $0x4f9012dc // fmla v28.4s, v22.4s, v16.s[0]
	ADD $210, R0
	ADD $292, R1
	SUBS $1, R2
	BNE q6kloop
	WORD $0x6e3cd79c // faddp v28.4s, v28.4s, v28.4s
	WORD $0x7e30db80 // faddp s0, v28.2s
	FMOVS F0, ret+24(FP)
	RET

// func kqIQ4XSNEONDot(w, x *byte, nb int) float32
//
// Codes go through the IQ4_NL codebook with TBL; SDOT takes the signed
// values as they are, so no offset correction is needed.
TEXT ·kqIQ4XSNEONDot(SB), NOSPLIT, $0-28
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	MOVD $kqIQ4Tab<>(SB), R5
	VLD1 (R5), [V30.B16]
	MOVD $kqIQ4Shift<>(SB), R5
	VLD1 (R5), [V29.B16]
	WORD $0x4f00e5ff // movi v31.16b, #0x0f
	WORD $0x4f00e47c // movi v28.16b, #0x03
	WORD $0x4f01841b // movi v27.8h, #32
	VEOR V26.B16, V26.B16, V26.B16

iq4xsloop:
	// ls_j = scales_l nibble j | (scales_h >> 2j & 3) << 4, minus 32
	MOVWU 4(R0), R3
	VMOV R3, V16.S[0]
	WORD $0x0e3f1e11 // and v17.8b, v16.8b, v31.8b
	WORD $0x2f0c0612 // ushr v18.8b, v16.8b, #4
	WORD $0x0e123a31 // zip1 v17.8b, v17.8b, v18.8b
	MOVHU 2(R0), R4
	WORD $0x4e020c93 // dup v19.8h, w4
	WORD $0x6e7d4673 // ushl v19.8h, v19.8h, v29.8h
	WORD $0x0e212a73 // xtn v19.8b, v19.8h
	WORD $0x0e3c1e73 // and v19.8b, v19.8b, v28.8b
	WORD $0x0f0c5673 // shl v19.8b, v19.8b, #4
	WORD $0x0eb31e31 // orr v17.8b, v17.8b, v19.8b
	WORD $0x2f08a631 // ushll v17.8h, v17.8b, #0
	WORD $0x6e7b8631 // sub v17.8h, v17.8h, v27.8h
	WORD $0x0f10a636 // sshll v22.4s, v17.4h, #0
	WORD $0x4f10a637 // sshll2 v23.4s, v17.8h, #0
	MOVHU (R0), R3
	VMOV R3, V16.H[0]
	WORD $0x0e217a10 // fcvtl v16.4s, v16.4h
	FMOVS (R1), F17
	WORD $0x4f919210 // fmul v16.4s, v16.4s, v17.s[0]
	ADD $8, R0, R5
	ADD $4, R1, R6
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e412 // movi v18.2d, #0
	WORD $0x4e8294d2 // sdot v18.4s, v6.16b, v2.16b
	WORD $0x4e8394f2 // sdot v18.4s, v7.16b, v3.16b
	WORD $0x4f968258 // mul v24.4s, v18.4s, v22.s[0]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8294d3 // sdot v19.4s, v6.16b, v2.16b
	WORD $0x4e8394f3 // sdot v19.4s, v7.16b, v3.16b
	WORD $0x4fb68279 // mul v25.4s, v19.4s, v22.s[1]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e412 // movi v18.2d, #0
	WORD $0x4e8294d2 // sdot v18.4s, v6.16b, v2.16b
	WORD $0x4e8394f2 // sdot v18.4s, v7.16b, v3.16b
	WORD $0x6f960a58 // mla v24.4s, v18.4s, v22.s[2]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8294d3 // sdot v19.4s, v6.16b, v2.16b
	WORD $0x4e8394f3 // sdot v19.4s, v7.16b, v3.16b
	WORD $0x6fb60a79 // mla v25.4s, v19.4s, v22.s[3]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e412 // movi v18.2d, #0
	WORD $0x4e8294d2 // sdot v18.4s, v6.16b, v2.16b
	WORD $0x4e8394f2 // sdot v18.4s, v7.16b, v3.16b
	WORD $0x6f970258 // mla v24.4s, v18.4s, v23.s[0]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8294d3 // sdot v19.4s, v6.16b, v2.16b
	WORD $0x4e8394f3 // sdot v19.4s, v7.16b, v3.16b
	WORD $0x6fb70279 // mla v25.4s, v19.4s, v23.s[1]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e412 // movi v18.2d, #0
	WORD $0x4e8294d2 // sdot v18.4s, v6.16b, v2.16b
	WORD $0x4e8394f2 // sdot v18.4s, v7.16b, v3.16b
	WORD $0x6f970a58 // mla v24.4s, v18.4s, v23.s[2]
	VLD1.P 16(R5), [V0.B16]
	VLD1.P 32(R6), [V2.B16, V3.B16]
	WORD $0x4e3f1c06 // and v6.16b, v0.16b, v31.16b
	WORD $0x6f0c0407 // ushr v7.16b, v0.16b, #4
	WORD $0x4e0603c6 // tbl v6.16b, {v30.16b}, v6.16b
	WORD $0x4e0703c7 // tbl v7.16b, {v30.16b}, v7.16b
	WORD $0x6f00e413 // movi v19.2d, #0
	WORD $0x4e8294d3 // sdot v19.4s, v6.16b, v2.16b
	WORD $0x4e8394f3 // sdot v19.4s, v7.16b, v3.16b
	WORD $0x6fb70a79 // mla v25.4s, v19.4s, v23.s[3]
	WORD $0x4eb98718 // add v24.4s, v24.4s, v25.4s
	WORD $0x4e21db18 // scvtf v24.4s, v24.4s
	WORD $0x4f90131a // fmla v26.4s, v24.4s, v16.s[0]
	ADD $136, R0
	ADD $292, R1
	SUBS $1, R2
	BNE iq4xsloop
	WORD $0x6e3ad75a // faddp v26.4s, v26.4s, v26.4s
	WORD $0x7e30db40 // faddp s0, v26.2s
	FMOVS F0, ret+24(FP)
	RET

// ggml's kvalues_iq4nl, and the per-halfword right shifts 0, 2, ..., 14.
DATA kqIQ4Tab<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA kqIQ4Tab<>+8(SB)/8, $0x7159453526190d01
GLOBL kqIQ4Tab<>(SB), RODATA|NOPTR, $16
DATA kqIQ4Shift<>+0(SB)/8, $0xfffafffcfffe0000
DATA kqIQ4Shift<>+8(SB)/8, $0xfff2fff4fff6fff8
GLOBL kqIQ4Shift<>(SB), RODATA|NOPTR, $16
