//go:build arm64

#include "textflag.h"

// Go's assembler has no mnemonics for the floating-point vector add,
// multiply, pairwise add and the half<->single conversions (FCVTL/FCVTN), so
// those are encoded as WORDs; the comment beside each gives the instruction.
// Every kernel takes n as a multiple of 4: a 16-element step with four
// accumulators, then 4-element steps.

// func sumSquaresNEON(x *float32, n int) float64
TEXT ·sumSquaresNEON(SB), NOSPLIT, $0-24
	MOVD x+0(FP), R0
	MOVD n+8(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16

ssloop8:
	CMP    $8, R2
	BLT    ssloop4
	VLD1.P 32(R0), [V0.S4, V1.S4]
	WORD $0x6e20dc00 // fmul v0.4s, v0.4s, v0.4s
	WORD $0x6e21dc21 // fmul v1.4s, v1.4s, v1.4s
	WORD $0x0e617804 // fcvtl v4.2d, v0.2s
	WORD $0x4e617805 // fcvtl2 v5.2d, v0.4s
	WORD $0x0e617826 // fcvtl v6.2d, v1.2s
	WORD $0x4e617827 // fcvtl2 v7.2d, v1.4s
	WORD $0x4e64d610 // fadd v16.2d, v16.2d, v4.2d
	WORD $0x4e65d631 // fadd v17.2d, v17.2d, v5.2d
	WORD $0x4e66d652 // fadd v18.2d, v18.2d, v6.2d
	WORD $0x4e67d673 // fadd v19.2d, v19.2d, v7.2d
	SUB    $8, R2
	B      ssloop8

ssloop4:
	CMP    $4, R2
	BLT    ssdone
	VLD1.P 16(R0), [V0.S4]
	WORD $0x6e20dc00 // fmul v0.4s, v0.4s, v0.4s
	WORD $0x0e617804 // fcvtl v4.2d, v0.2s
	WORD $0x4e617805 // fcvtl2 v5.2d, v0.4s
	WORD $0x4e64d610 // fadd v16.2d, v16.2d, v4.2d
	WORD $0x4e65d631 // fadd v17.2d, v17.2d, v5.2d
	SUB    $4, R2
	B      ssloop4

ssdone:
	WORD $0x4e71d610 // fadd v16.2d, v16.2d, v17.2d
	WORD $0x4e73d652 // fadd v18.2d, v18.2d, v19.2d
	WORD $0x4e72d610 // fadd v16.2d, v16.2d, v18.2d
	WORD $0x7e70da00 // faddp d0, v16.2d
	FMOVD F0, ret+16(FP)
	RET

// Sums the four accumulators V0..V3 into F0: fadd v0.4s, v0.4s, v1.4s;
// fadd v2.4s, v2.4s, v3.4s; fadd v0.4s, v0.4s, v2.4s;
// faddp v0.4s, v0.4s, v0.4s; faddp s0, v0.2s.
#define HSUM_V0_V3 \
	WORD $0x4e21d400 \
	WORD $0x4e23d442 \
	WORD $0x4e22d400 \
	WORD $0x6e20d400 \
	WORD $0x7e30d800

// func dotF32NEON(a, b *float32, n int) float32
TEXT ·dotF32NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

dloop16:
	CMP    $16, R2
	BLT    dloop4
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V8.S4, V9.S4, V10.S4, V11.S4]
	VFMLA  V4.S4, V8.S4, V0.S4
	VFMLA  V5.S4, V9.S4, V1.S4
	VFMLA  V6.S4, V10.S4, V2.S4
	VFMLA  V7.S4, V11.S4, V3.S4
	SUB    $16, R2
	B      dloop16

dloop4:
	CMP    $4, R2
	BLT    ddone
	VLD1.P 16(R0), [V4.S4]
	VLD1.P 16(R1), [V8.S4]
	VFMLA  V4.S4, V8.S4, V0.S4
	SUB    $4, R2
	B      dloop4

ddone:
	HSUM_V0_V3
	FMOVS F0, ret+24(FP)
	RET

// func dotF16NEON(a *uint16, b *float32, n int) float32
TEXT ·dotF16NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

hloop16:
	CMP    $16, R2
	BLT    hloop4
	VLD1.P 32(R0), [V4.H8, V5.H8]
	VLD1.P 64(R1), [V8.S4, V9.S4, V10.S4, V11.S4]
	WORD $0x0e217890 // fcvtl v16.4s, v4.4h
	WORD $0x4e217891 // fcvtl2 v17.4s, v4.8h
	WORD $0x0e2178b2 // fcvtl v18.4s, v5.4h
	WORD $0x4e2178b3 // fcvtl2 v19.4s, v5.8h
	VFMLA  V16.S4, V8.S4, V0.S4
	VFMLA  V17.S4, V9.S4, V1.S4
	VFMLA  V18.S4, V10.S4, V2.S4
	VFMLA  V19.S4, V11.S4, V3.S4
	SUB    $16, R2
	B      hloop16

hloop4:
	CMP    $4, R2
	BLT    hdone
	VLD1.P 8(R0), [V4.H4]
	VLD1.P 16(R1), [V8.S4]
	WORD $0x0e217890 // fcvtl v16.4s, v4.4h
	VFMLA  V16.S4, V8.S4, V0.S4
	SUB    $4, R2
	B      hloop4

hdone:
	HSUM_V0_V3
	FMOVS F0, ret+24(FP)
	RET

// func axpyF32NEON(dst *float32, a float32, x *float32, n int)
TEXT ·axpyF32NEON(SB), NOSPLIT, $0-32
	MOVD  dst+0(FP), R0
	FMOVS a+8(FP), F31
	MOVD  x+16(FP), R1
	MOVD  n+24(FP), R2
	VDUP  V31.S[0], V31.S4

aloop16:
	CMP    $16, R2
	BLT    aloop4
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFMLA  V4.S4, V31.S4, V0.S4
	VFMLA  V5.S4, V31.S4, V1.S4
	VFMLA  V6.S4, V31.S4, V2.S4
	VFMLA  V7.S4, V31.S4, V3.S4
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUB    $16, R2
	B      aloop16

aloop4:
	CMP    $4, R2
	BLT    adone
	VLD1   (R0), [V0.S4]
	VLD1.P 16(R1), [V4.S4]
	VFMLA  V4.S4, V31.S4, V0.S4
	VST1.P [V0.S4], 16(R0)
	SUB    $4, R2
	B      aloop4

adone:
	RET

// func axpyF16NEON(dst *float32, a float32, x *uint16, n int)
TEXT ·axpyF16NEON(SB), NOSPLIT, $0-32
	MOVD  dst+0(FP), R0
	FMOVS a+8(FP), F31
	MOVD  x+16(FP), R1
	MOVD  n+24(FP), R2
	VDUP  V31.S[0], V31.S4

gloop16:
	CMP    $16, R2
	BLT    gloop4
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 32(R1), [V4.H8, V5.H8]
	WORD $0x0e217890 // fcvtl v16.4s, v4.4h
	WORD $0x4e217891 // fcvtl2 v17.4s, v4.8h
	WORD $0x0e2178b2 // fcvtl v18.4s, v5.4h
	WORD $0x4e2178b3 // fcvtl2 v19.4s, v5.8h
	VFMLA  V16.S4, V31.S4, V0.S4
	VFMLA  V17.S4, V31.S4, V1.S4
	VFMLA  V18.S4, V31.S4, V2.S4
	VFMLA  V19.S4, V31.S4, V3.S4
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUB    $16, R2
	B      gloop16

gloop4:
	CMP    $4, R2
	BLT    gdone
	VLD1   (R0), [V0.S4]
	VLD1.P 8(R1), [V4.H4]
	WORD $0x0e217890 // fcvtl v16.4s, v4.4h
	VFMLA  V16.S4, V31.S4, V0.S4
	VST1.P [V0.S4], 16(R0)
	SUB    $4, R2
	B      gloop4

gdone:
	RET

// FCVTN rounds by FPCR, which Go leaves at round-to-nearest-even with
// subnormals kept and NaNs propagated, matching quant.F32ToF16.

// func f32ToF16NEON(dst *uint16, src *float32, n int)
TEXT ·f32ToF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2

cloop16:
	CMP    $16, R2
	BLT    cloop4
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	WORD $0x0e216804 // fcvtn v4.4h, v0.4s
	WORD $0x4e216824 // fcvtn2 v4.8h, v1.4s
	WORD $0x0e216845 // fcvtn v5.4h, v2.4s
	WORD $0x4e216865 // fcvtn2 v5.8h, v3.4s
	VST1.P [V4.H8, V5.H8], 32(R0)
	SUB    $16, R2
	B      cloop16

cloop4:
	CMP    $4, R2
	BLT    cdone
	VLD1.P 16(R1), [V0.S4]
	WORD $0x0e216804 // fcvtn v4.4h, v0.4s
	VST1.P [V4.H4], 8(R0)
	SUB    $4, R2
	B      cloop4

cdone:
	RET

// func f16ToF32NEON(dst *float32, src *uint16, n int)
TEXT ·f16ToF32NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2

eloop16:
	CMP    $16, R2
	BLT    eloop4
	VLD1.P 32(R1), [V4.H8, V5.H8]
	WORD $0x0e217880 // fcvtl v0.4s, v4.4h
	WORD $0x4e217881 // fcvtl2 v1.4s, v4.8h
	WORD $0x0e2178a2 // fcvtl v2.4s, v5.4h
	WORD $0x4e2178a3 // fcvtl2 v3.4s, v5.8h
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUB    $16, R2
	B      eloop16

eloop4:
	CMP    $4, R2
	BLT    edone
	VLD1.P 8(R1), [V4.H4]
	WORD $0x0e217880 // fcvtl v0.4s, v4.4h
	VST1.P [V0.S4], 16(R0)
	SUB    $4, R2
	B      eloop4

edone:
	RET
