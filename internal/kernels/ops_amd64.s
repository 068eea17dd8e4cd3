//go:build amd64

#include "textflag.h"

// Every kernel here takes n as a multiple of 8. The AVX-512 versions run
// four 16-lane accumulators (64 elements) per iteration to cover the FMA
// latency, then single 16-lane steps, then one 8-lane step.

// Horizontal sum of the 8 float32 lanes of Y0 into X0's low lane.
#define HSUM_Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VHADDPS      X0, X0, X0 \
	VHADDPS      X0, X0, X0

// Folds the 16 lanes of Z0 into Y0.
#define FOLD_Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS        Y1, Y0, Y0

// DOTARGS loads dotF16Rows*'s arguments: dst DI, k SI, stride DX, scale
// X16, n CX, and the query's first 64 values into Z8..Z11.
#define DOTARGS \
	MOVQ    dst+0(FP), DI \
	MOVQ    k+8(FP), SI \
	MOVQ    stride+16(FP), DX \
	MOVQ    q+24(FP), BX \
	VMOVSS  scale+32(FP), X16 \
	MOVQ    n+40(FP), CX \
	VMOVUPS (BX), Z8 \
	VMOVUPS 64(BX), Z9 \
	VMOVUPS 128(BX), Z10 \
	VMOVUPS 192(BX), Z11

#define DOTZERO \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3

// AXPYARGS loads axpyF16Rows*'s arguments: out DI, p BX, v SI, stride
// DX, n CX, and out's first 64 values into Z0..Z3.
#define AXPYARGS \
	MOVQ    out+0(FP), DI \
	MOVQ    p+8(FP), BX \
	MOVQ    v+16(FP), SI \
	MOVQ    stride+24(FP), DX \
	MOVQ    n+32(FP), CX \
	VMOVUPS (DI), Z0 \
	VMOVUPS 64(DI), Z1 \
	VMOVUPS 128(DI), Z2 \
	VMOVUPS 192(DI), Z3

// The loop bodies of the F16 AVX2 kernels, shared by the one-row and the
// many-row versions so that both do the same arithmetic: 32 or 8 halves at
// (SI), against float32s at (q) (dot, into Y0..Y3) or added into float32s at
// (DI) times Y7 (axpy); CX counts the values left.
#define DOTF16_AVX2_32(q) \
	VCVTPH2PS   (SI), Y4 \
	VCVTPH2PS   16(SI), Y5 \
	VCVTPH2PS   32(SI), Y6 \
	VCVTPH2PS   48(SI), Y7 \
	VFMADD231PS (q), Y4, Y0 \
	VFMADD231PS 32(q), Y5, Y1 \
	VFMADD231PS 64(q), Y6, Y2 \
	VFMADD231PS 96(q), Y7, Y3 \
	ADDQ        $64, SI \
	ADDQ        $128, q \
	SUBQ        $32, CX

#define DOTF16_AVX2_8(q) \
	VCVTPH2PS   (SI), Y4 \
	VFMADD231PS (q), Y4, Y0 \
	ADDQ        $16, SI \
	ADDQ        $32, q \
	SUBQ        $8, CX

#define AXPYF16_AVX2_32 \
	VCVTPH2PS   (SI), Y4 \
	VCVTPH2PS   16(SI), Y5 \
	VCVTPH2PS   32(SI), Y6 \
	VCVTPH2PS   48(SI), Y8 \
	VMOVUPS     (DI), Y0 \
	VMOVUPS     32(DI), Y1 \
	VMOVUPS     64(DI), Y2 \
	VMOVUPS     96(DI), Y3 \
	VFMADD231PS Y4, Y7, Y0 \
	VFMADD231PS Y5, Y7, Y1 \
	VFMADD231PS Y6, Y7, Y2 \
	VFMADD231PS Y8, Y7, Y3 \
	VMOVUPS     Y0, (DI) \
	VMOVUPS     Y1, 32(DI) \
	VMOVUPS     Y2, 64(DI) \
	VMOVUPS     Y3, 96(DI) \
	ADDQ        $64, SI \
	ADDQ        $128, DI \
	SUBQ        $32, CX

#define AXPYF16_AVX2_8 \
	VCVTPH2PS   (SI), Y4 \
	VMOVUPS     (DI), Y0 \
	VFMADD231PS Y4, Y7, Y0 \
	VMOVUPS     Y0, (DI) \
	ADDQ        $16, SI \
	ADDQ        $32, DI \
	SUBQ        $8, CX

// func sumSquaresAVX2(x *float32, n int) float64
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3

ss2loop:
	CMPQ      CX, $8
	JLT       ss2done
	VMOVUPS   (SI), Y0
	VMULPS    Y0, Y0, Y0
	VCVTPS2PD X0, Y1
	VADDPD    Y1, Y2, Y2
	VEXTRACTF128 $1, Y0, X0
	VCVTPS2PD X0, Y1
	VADDPD    Y1, Y3, Y3
	ADDQ      $32, SI
	SUBQ      $8, CX
	JMP       ss2loop

ss2done:
	VADDPD       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPD       X3, X2, X2
	VHADDPD      X2, X2, X2
	VZEROUPPER
	MOVSD        X2, ret+16(FP)
	RET

// func sumSquaresAVX512(x *float32, n int) float64
TEXT ·sumSquaresAVX512(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3

ss5loop:
	CMPQ          CX, $16
	JLT           ss5tail
	VMOVUPS       (SI), Z0
	VMULPS        Z0, Z0, Z0
	VCVTPS2PD     Y0, Z1
	VADDPD        Z1, Z2, Z2
	VEXTRACTF64X4 $1, Z0, Y0
	VCVTPS2PD     Y0, Z1
	VADDPD        Z1, Z3, Z3
	ADDQ          $64, SI
	SUBQ          $16, CX
	JMP           ss5loop

ss5tail:
	CMPQ      CX, $8
	JLT       ss5done
	VMOVUPS   (SI), Y0
	VMULPS    Y0, Y0, Y0
	VCVTPS2PD Y0, Z1
	VADDPD    Z1, Z2, Z2

ss5done:
	VADDPD        Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VADDPD        Y3, Y2, Y2
	VEXTRACTF128  $1, Y2, X3
	VADDPD        X3, X2, X2
	VHADDPD       X2, X2, X2
	VZEROUPPER
	MOVSD         X2, ret+16(FP)
	RET

// func dotF32AVX2(a, b *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

d2loop32:
	CMPQ        CX, $32
	JLT         d2loop8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         d2loop32

d2loop8:
	CMPQ        CX, $8
	JLT         d2done
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         d2loop8

d2done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM_Y0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func dotF32AVX512(a, b *float32, n int) float32
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

d5loop64:
	CMPQ        CX, $64
	JLT         d5loop16
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         d5loop64

d5loop16:
	CMPQ        CX, $16
	JLT         d5tail
	VMOVUPS     (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         d5loop16

d5tail:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	FOLD_Z0
	CMPQ        CX, $8
	JLT         d5done
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0

d5done:
	HSUM_Y0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF16AVX2(a *uint16, b *float32, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

h2loop32:
	CMPQ        CX, $32
	JLT         h2loop8
	DOTF16_AVX2_32(DI)
	JMP         h2loop32

h2loop8:
	CMPQ        CX, $8
	JLT         h2done
	DOTF16_AVX2_8(DI)
	JMP         h2loop8

h2done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM_Y0
	VZEROUPPER
	MOVSS  X0, ret+24(FP)
	RET

// func dotF16AVX512(a *uint16, b *float32, n int) float32
TEXT ·dotF16AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

h5loop64:
	CMPQ        CX, $64
	JLT         h5loop16
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   32(SI), Z5
	VCVTPH2PS   64(SI), Z6
	VCVTPH2PS   96(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $128, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         h5loop64

h5loop16:
	CMPQ        CX, $16
	JLT         h5tail
	VCVTPH2PS   (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         h5loop16

h5tail:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	FOLD_Z0
	CMPQ        CX, $8
	JLT         h5done
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0

h5done:
	HSUM_Y0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func axpyF32AVX2(dst *float32, a float32, x *float32, n int)
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y7
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

a2loop32:
	CMPQ        CX, $32
	JLT         a2loop8
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS (SI), Y7, Y0
	VFMADD231PS 32(SI), Y7, Y1
	VFMADD231PS 64(SI), Y7, Y2
	VFMADD231PS 96(SI), Y7, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         a2loop32

a2loop8:
	CMPQ        CX, $8
	JLT         a2done
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y7, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         a2loop8

a2done:
	VZEROUPPER
	RET

// func axpyF32AVX512(dst *float32, a float32, x *float32, n int)
TEXT ·axpyF32AVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Z7
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

a5loop64:
	CMPQ        CX, $64
	JLT         a5loop16
	VMOVUPS     (DI), Z0
	VMOVUPS     64(DI), Z1
	VMOVUPS     128(DI), Z2
	VMOVUPS     192(DI), Z3
	VFMADD231PS (SI), Z7, Z0
	VFMADD231PS 64(SI), Z7, Z1
	VFMADD231PS 128(SI), Z7, Z2
	VFMADD231PS 192(SI), Z7, Z3
	VMOVUPS     Z0, (DI)
	VMOVUPS     Z1, 64(DI)
	VMOVUPS     Z2, 128(DI)
	VMOVUPS     Z3, 192(DI)
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         a5loop64

a5loop16:
	CMPQ        CX, $16
	JLT         a5tail
	VMOVUPS     (DI), Z0
	VFMADD231PS (SI), Z7, Z0
	VMOVUPS     Z0, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         a5loop16

a5tail:
	CMPQ        CX, $8
	JLT         a5done
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y7, Y0
	VMOVUPS     Y0, (DI)

a5done:
	VZEROUPPER
	RET

// func axpyF16AVX2(dst *float32, a float32, x *uint16, n int)
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y7
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

g2loop32:
	CMPQ        CX, $32
	JLT         g2loop8
	AXPYF16_AVX2_32
	JMP         g2loop32

g2loop8:
	CMPQ        CX, $8
	JLT         g2done
	AXPYF16_AVX2_8
	JMP         g2loop8

g2done:
	VZEROUPPER
	RET

// func axpyF16AVX512(dst *float32, a float32, x *uint16, n int)
TEXT ·axpyF16AVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS a+8(FP), Z7
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

g5loop64:
	CMPQ        CX, $64
	JLT         g5loop16
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   32(SI), Z5
	VCVTPH2PS   64(SI), Z6
	VCVTPH2PS   96(SI), Z8
	VMOVUPS     (DI), Z0
	VMOVUPS     64(DI), Z1
	VMOVUPS     128(DI), Z2
	VMOVUPS     192(DI), Z3
	VFMADD231PS Z4, Z7, Z0
	VFMADD231PS Z5, Z7, Z1
	VFMADD231PS Z6, Z7, Z2
	VFMADD231PS Z8, Z7, Z3
	VMOVUPS     Z0, (DI)
	VMOVUPS     Z1, 64(DI)
	VMOVUPS     Z2, 128(DI)
	VMOVUPS     Z3, 192(DI)
	ADDQ        $128, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         g5loop64

g5loop16:
	CMPQ        CX, $16
	JLT         g5tail
	VCVTPH2PS   (SI), Z4
	VMOVUPS     (DI), Z0
	VFMADD231PS Z4, Z7, Z0
	VMOVUPS     Z0, (DI)
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         g5loop16

g5tail:
	CMPQ        CX, $8
	JLT         g5done
	VCVTPH2PS   (SI), Y4
	VMOVUPS     (DI), Y0
	VFMADD231PS Y4, Y7, Y0
	VMOVUPS     Y0, (DI)

g5done:
	VZEROUPPER
	RET

// Rounding immediate 0: round to nearest even regardless of MXCSR, which is
// quant.F32ToF16's rounding.

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

c2loop:
	CMPQ      CX, $8
	JLT       c2done
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       c2loop

c2done:
	VZEROUPPER
	RET

// func f32ToF16AVX512(dst *uint16, src *float32, n int)
TEXT ·f32ToF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

c5loop:
	CMPQ      CX, $16
	JLT       c5tail
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JMP       c5loop

c5tail:
	CMPQ      CX, $8
	JLT       c5done
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)

c5done:
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

e2loop:
	CMPQ      CX, $8
	JLT       e2done
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       e2loop

e2done:
	VZEROUPPER
	RET

// func f16ToF32AVX512(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

e5loop:
	CMPQ      CX, $16
	JLT       e5tail
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JMP       e5loop

e5tail:
	CMPQ      CX, $8
	JLT       e5done
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)

e5done:
	VZEROUPPER
	RET

// Constants of swiGLUAVX512, one dword each (see expF32 in ops.go).
DATA swiC<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA swiC<>+4(SB)/4, $0x3f318000  // ln2 high part
DATA swiC<>+8(SB)/4, $0xb95e8083  // ln2 low part
DATA swiC<>+12(SB)/4, $0x39506967 // polynomial, highest degree first
DATA swiC<>+16(SB)/4, $0x3ab743ce
DATA swiC<>+20(SB)/4, $0x3c088908
DATA swiC<>+24(SB)/4, $0x3d2aa9c1
DATA swiC<>+28(SB)/4, $0x3e2aaaaa
DATA swiC<>+32(SB)/4, $0x3f000000
DATA swiC<>+36(SB)/4, $0x3f800000 // 1
DATA swiC<>+40(SB)/4, $0x42b17218 // above: +Inf
DATA swiC<>+44(SB)/4, $0xc2cff1b5 // below: 0
DATA swiC<>+48(SB)/4, $0x33800000 // 2^-24
DATA swiC<>+52(SB)/4, $127
DATA swiC<>+56(SB)/4, $-126
DATA swiC<>+60(SB)/4, $24
DATA swiC<>+64(SB)/4, $1
DATA swiC<>+68(SB)/4, $0x7f800000 // +Inf
DATA swiC<>+72(SB)/4, $0x80000000 // sign bit
GLOBL swiC<>(SB), RODATA|NOPTR, $76

// func swiGLUAVX512(dst, gate, up *float32, n int)
//
// dst = gate/(1+e^-gate) * up, 16 lanes at a time, with exactly the float32
// operations of expF32 and siluF32 in the same order (no fused
// multiply-adds), so every lane equals the Go reference.
TEXT ·swiGLUAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DX
	MOVQ gate+8(FP), BX
	MOVQ up+16(FP), CX
	MOVQ n+24(FP), SI
	VPBROADCASTD swiC<>+0(SB), Z16
	VPBROADCASTD swiC<>+4(SB), Z17
	VPBROADCASTD swiC<>+8(SB), Z18
	VPBROADCASTD swiC<>+12(SB), Z19
	VPBROADCASTD swiC<>+16(SB), Z20
	VPBROADCASTD swiC<>+20(SB), Z21
	VPBROADCASTD swiC<>+24(SB), Z22
	VPBROADCASTD swiC<>+28(SB), Z23
	VPBROADCASTD swiC<>+32(SB), Z24
	VPBROADCASTD swiC<>+36(SB), Z25
	VPBROADCASTD swiC<>+40(SB), Z26
	VPBROADCASTD swiC<>+44(SB), Z27
	VPBROADCASTD swiC<>+48(SB), Z28
	VPBROADCASTD swiC<>+52(SB), Z30
	VPBROADCASTD swiC<>+56(SB), Z31
	VPBROADCASTD swiC<>+60(SB), Z12
	VPBROADCASTD swiC<>+64(SB), Z13
	VPBROADCASTD swiC<>+68(SB), Z14
	VPBROADCASTD swiC<>+72(SB), Z15

swiloop:
	VMOVUPS   (BX), Z0
	VPXORD    Z15, Z0, Z2        // t = -gate
	VCMPPS    $0x1e, Z26, Z2, K1 // t > hi: e = +Inf
	VCMPPS    $0x11, Z27, Z2, K2 // t < lo: e = 0
	VCMPPS    $0x03, Z2, Z2, K3  // NaN
	VMINPS    Z26, Z2, Z3
	VMAXPS    Z27, Z3, Z3
	VMULPS    Z16, Z3, Z4
	VCVTPS2DQ Z4, Z5             // k, rounded to nearest even
	VCVTDQ2PS Z5, Z6
	VMULPS    Z17, Z6, Z7
	VSUBPS    Z7, Z3, Z7
	VMULPS    Z18, Z6, Z8
	VSUBPS    Z8, Z7, Z7         // r
	VMULPS    Z7, Z19, Z9
	VADDPS    Z20, Z9, Z9
	VMULPS    Z7, Z9, Z9
	VADDPS    Z21, Z9, Z9
	VMULPS    Z7, Z9, Z9
	VADDPS    Z22, Z9, Z9
	VMULPS    Z7, Z9, Z9
	VADDPS    Z23, Z9, Z9
	VMULPS    Z7, Z9, Z9
	VADDPS    Z24, Z9, Z9
	VMULPS    Z7, Z9, Z9
	VMULPS    Z7, Z9, Z9
	VADDPS    Z7, Z9, Z9
	VADDPS    Z25, Z9, Z9        // e^r
	VPCMPGTD  Z30, Z5, K4        // k > 127: p*2, k-1
	VADDPS    Z9, Z9, K4, Z9
	VPSUBD    Z13, Z5, K4, Z5
	VPCMPGTD  Z5, Z31, K5        // k < -126: p*2^-24, k+24
	VMULPS    Z28, Z9, K5, Z9
	VPADDD    Z12, Z5, K5, Z5
	VPADDD    Z30, Z5, Z5
	VPSLLD    $23, Z5, Z5
	VMULPS    Z5, Z9, Z9         // e^t
	VMOVAPS   Z14, K1, Z9
	VPXORD    Z9, Z9, K2, Z9
	VMOVAPS   Z2, K3, Z9
	VADDPS    Z25, Z9, Z10
	VDIVPS    Z10, Z0, Z10       // silu(gate)
	VMULPS    (CX), Z10, Z10
	VMOVUPS   Z10, (DX)
	ADDQ      $64, BX
	ADDQ      $64, CX
	ADDQ      $64, DX
	SUBQ      $16, SI
	JNZ       swiloop
	VZEROUPPER
	RET

// Attention rows: one query (or one probability vector) against n cached
// rows of 64 or 128 halves, stride bytes apart. Each row's arithmetic is
// dotF16AVX512's / axpyF16AVX512's for that length, in the same order, so
// the results are those of calling them row by row, without a call per
// row.

// DOT64 leaves in Z0..Z3 the four 16-lane partial products of the 64
// halves at (SI) with the query chunks Z8..Z11 (zeroed accumulators, one
// FMA each, as dotF16AVX512's first 64-value step).
#define DOT64(off, q0, q1, q2, q3) \
	VCVTPH2PS   off+0(SI), Z4 \
	VCVTPH2PS   off+32(SI), Z5 \
	VCVTPH2PS   off+64(SI), Z6 \
	VCVTPH2PS   off+96(SI), Z7 \
	VFMADD231PS q0, Z4, Z0 \
	VFMADD231PS q1, Z5, Z1 \
	VFMADD231PS q2, Z6, Z2 \
	VFMADD231PS q3, Z7, Z3

// DOTEND sums Z0..Z3 as dotF16AVX512 does, scales by X16 (the scale) and
// stores the result at (DI).
#define DOTEND \
	VADDPS Z1, Z0, Z0 \
	VADDPS Z3, Z2, Z2 \
	VADDPS Z2, Z0, Z0 \
	FOLD_Z0 \
	HSUM_Y0 \
	VMULSS X16, X0, X0 \
	VMOVSS X0, (DI)

// func dotF16Rows64AVX512(dst *float32, k *uint16, stride int, q *float32, scale float32, n int)
TEXT ·dotF16Rows64AVX512(SB), NOSPLIT, $0-48
	DOTARGS

dr64loop:
	DOTZERO
	DOT64(0, Z8, Z9, Z10, Z11)
	DOTEND
	ADDQ   $4, DI
	ADDQ   DX, SI
	DECQ   CX
	JNZ    dr64loop
	VZEROUPPER
	RET

// func dotF16Rows128AVX512(dst *float32, k *uint16, stride int, q *float32, scale float32, n int)
TEXT ·dotF16Rows128AVX512(SB), NOSPLIT, $0-48
	DOTARGS
	VMOVUPS      256(BX), Z12
	VMOVUPS      320(BX), Z13
	VMOVUPS      384(BX), Z14
	VMOVUPS      448(BX), Z15

dr128loop:
	DOTZERO
	DOT64(0, Z8, Z9, Z10, Z11)
	DOT64(128, Z12, Z13, Z14, Z15)
	DOTEND
	ADDQ   $4, DI
	ADDQ   DX, SI
	DECQ   CX
	JNZ    dr128loop
	VZEROUPPER
	RET

// AXPY64 adds Z7 times the 64 halves at off(SI) into the accumulators
// a0..a3 (one FMA per value, as axpyF16AVX512).
#define AXPY64(off, a0, a1, a2, a3) \
	VCVTPH2PS   off+0(SI), Z4 \
	VCVTPH2PS   off+32(SI), Z5 \
	VCVTPH2PS   off+64(SI), Z6 \
	VCVTPH2PS   off+96(SI), Z8 \
	VFMADD231PS Z4, Z7, a0 \
	VFMADD231PS Z5, Z7, a1 \
	VFMADD231PS Z6, Z7, a2 \
	VFMADD231PS Z8, Z7, a3

// func axpyF16Rows64AVX512(out *float32, p *float32, v *uint16, stride int, n int)
TEXT ·axpyF16Rows64AVX512(SB), NOSPLIT, $0-40
	AXPYARGS

ar64loop:
	VBROADCASTSS (BX), Z7
	AXPY64(0, Z0, Z1, Z2, Z3)
	ADDQ         $4, BX
	ADDQ         DX, SI
	DECQ         CX
	JNZ          ar64loop
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	VZEROUPPER
	RET

// func axpyF16Rows128AVX512(out *float32, p *float32, v *uint16, stride int, n int)
TEXT ·axpyF16Rows128AVX512(SB), NOSPLIT, $0-40
	AXPYARGS
	VMOVUPS 256(DI), Z10
	VMOVUPS 320(DI), Z11
	VMOVUPS 384(DI), Z12
	VMOVUPS 448(DI), Z13

ar128loop:
	VBROADCASTSS (BX), Z7
	AXPY64(0, Z0, Z1, Z2, Z3)
	AXPY64(128, Z10, Z11, Z12, Z13)
	ADDQ         $4, BX
	ADDQ         DX, SI
	DECQ         CX
	JNZ          ar128loop
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	VMOVUPS      Z10, 256(DI)
	VMOVUPS      Z11, 320(DI)
	VMOVUPS      Z12, 384(DI)
	VMOVUPS      Z13, 448(DI)
	VZEROUPPER
	RET

// func dotF16RowsAVX2(dst *float32, k *uint16, stride int, q *float32, scale float32, hd int, n int)
//
// Per row, dotF16AVX2's loop on hd values (a multiple of 8), reduction and
// rounding, then the scale: the bits of DotF16 row by row, one call.
TEXT ·dotF16RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ k+8(FP), R8
	MOVQ stride+16(FP), DX
	MOVQ q+24(FP), R9
	MOVQ hd+40(FP), R10
	MOVQ n+48(FP), R11

d2row:
	MOVQ   R8, SI
	MOVQ   R9, BX
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

d2loop32:
	CMPQ        CX, $32
	JLT         d2loop8
	DOTF16_AVX2_32(BX)
	JMP         d2loop32

d2loop8:
	CMPQ        CX, $8
	JLT         d2end
	DOTF16_AVX2_8(BX)
	JMP         d2loop8

d2end:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM_Y0
	VMULSS scale+32(FP), X0, X0
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   DX, R8
	DECQ   R11
	JNZ    d2row
	VZEROUPPER
	RET

// func axpyF16RowsAVX2(out *float32, p *float32, v *uint16, stride int, hd int, n int)
//
// For each column the multiply-adds of axpyF16AVX2 row after row, so the
// bits of AxpyF16 row by row, on hd values (a multiple of 8), one call.
TEXT ·axpyF16RowsAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), R8
	MOVQ stride+24(FP), DX
	MOVQ hd+32(FP), R10

	// Slabs of 64 columns: eight accumulators stay in registers for all
	// the rows, so a row costs its conversions and multiply-adds, not a
	// load and a store of out as well.
a2slab64:
	CMPQ         R10, $64
	JLT          a2slab8
	MOVQ         p+8(FP), BX
	MOVQ         n+40(FP), R11
	MOVQ         R8, SI
	VMOVUPS      (DI), Y0
	VMOVUPS      32(DI), Y1
	VMOVUPS      64(DI), Y2
	VMOVUPS      96(DI), Y3
	VMOVUPS      128(DI), Y4
	VMOVUPS      160(DI), Y5
	VMOVUPS      192(DI), Y6
	VMOVUPS      224(DI), Y7

a2row64:
	VBROADCASTSS (BX), Y12
	VCVTPH2PS    (SI), Y8
	VCVTPH2PS    16(SI), Y9
	VCVTPH2PS    32(SI), Y10
	VCVTPH2PS    48(SI), Y11
	VFMADD231PS  Y8, Y12, Y0
	VFMADD231PS  Y9, Y12, Y1
	VFMADD231PS  Y10, Y12, Y2
	VFMADD231PS  Y11, Y12, Y3
	VCVTPH2PS    64(SI), Y8
	VCVTPH2PS    80(SI), Y9
	VCVTPH2PS    96(SI), Y10
	VCVTPH2PS    112(SI), Y11
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y10, Y12, Y6
	VFMADD231PS  Y11, Y12, Y7
	ADDQ         $4, BX
	ADDQ         DX, SI
	DECQ         R11
	JNZ          a2row64
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	VMOVUPS      Y4, 128(DI)
	VMOVUPS      Y5, 160(DI)
	VMOVUPS      Y6, 192(DI)
	VMOVUPS      Y7, 224(DI)
	ADDQ         $256, DI
	ADDQ         $128, R8
	SUBQ         $64, R10
	JMP          a2slab64

	// The last hd%64 columns eight at a time.
a2slab8:
	CMPQ         R10, $8
	JLT          a2done
	MOVQ         p+8(FP), BX
	MOVQ         n+40(FP), R11
	MOVQ         R8, SI
	VMOVUPS      (DI), Y0

a2row8:
	VBROADCASTSS (BX), Y12
	VCVTPH2PS    (SI), Y8
	VFMADD231PS  Y8, Y12, Y0
	ADDQ         $4, BX
	ADDQ         DX, SI
	DECQ         R11
	JNZ          a2row8
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $16, R8
	SUBQ         $8, R10
	JMP          a2slab8

a2done:
	VZEROUPPER
	RET

// Y constants of swiGLUAVX2: the dwords of swiC broadcast where used.
#define SWIB(off, reg) VBROADCASTSS swiC<>+off(SB), reg

// EXP8_AVX2 sets Y8 to expF32 of each lane of Y2, with Y12 = 1, Y13 = lo
// and Y14 = hi broadcast; it clobbers Y3-Y11. The float32 operations of
// expF32 in its order, with compare vectors and blends for its branches
// (k > 127 and k < -126 by two exact factors; above hi +Inf, below lo 0,
// NaN passed through).
#define EXP8_AVX2 \
	VCMPPS    $0x1e, Y14, Y2, Y9 \
	VCMPPS    $0x11, Y13, Y2, Y10 \
	VCMPPS    $0x03, Y2, Y2, Y11 \
	VMINPS    Y14, Y2, Y3 \
	VMAXPS    Y13, Y3, Y3 \
	SWIB(0, Y4) \
	VMULPS    Y4, Y3, Y4 \
	VCVTPS2DQ Y4, Y5 \
	VCVTDQ2PS Y5, Y6 \
	SWIB(4, Y7) \
	VMULPS    Y7, Y6, Y7 \
	VSUBPS    Y7, Y3, Y7 \
	SWIB(8, Y8) \
	VMULPS    Y8, Y6, Y8 \
	VSUBPS    Y8, Y7, Y7 \
	SWIB(12, Y8) \
	VMULPS    Y7, Y8, Y8 \
	SWIB(16, Y6) \
	VADDPS    Y6, Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	SWIB(20, Y6) \
	VADDPS    Y6, Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	SWIB(24, Y6) \
	VADDPS    Y6, Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	SWIB(28, Y6) \
	VADDPS    Y6, Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	SWIB(32, Y6) \
	VADDPS    Y6, Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VMULPS    Y7, Y8, Y8 \
	VADDPS    Y7, Y8, Y8 \
	VADDPS    Y12, Y8, Y8 \
	SWIB(52, Y6) \
	VPCMPGTD  Y6, Y5, Y4 \
	VADDPS    Y8, Y8, Y7 \
	VBLENDVPS Y4, Y7, Y8, Y8 \
	VPADDD    Y4, Y5, Y5 \
	SWIB(56, Y6) \
	VPCMPGTD  Y5, Y6, Y4 \
	SWIB(48, Y7) \
	VMULPS    Y7, Y8, Y7 \
	VBLENDVPS Y4, Y7, Y8, Y8 \
	SWIB(60, Y7) \
	VPAND     Y7, Y4, Y4 \
	VPADDD    Y4, Y5, Y5 \
	SWIB(52, Y6) \
	VPADDD    Y6, Y5, Y5 \
	VPSLLD    $23, Y5, Y5 \
	VMULPS    Y5, Y8, Y8 \
	SWIB(68, Y7) \
	VBLENDVPS Y9, Y7, Y8, Y8 \
	VANDNPS   Y8, Y10, Y8 \
	VBLENDVPS Y11, Y2, Y8, Y8

// func swiGLUAVX2(dst, gate, up *float32, n int)
//
// swiGLUAVX512 on 8 lanes: the same float32 operations in the same order,
// with compare vectors and blends for the AVX-512 masks (bit-identical to
// the Go reference, tested).
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DX
	MOVQ gate+8(FP), BX
	MOVQ up+16(FP), CX
	MOVQ n+24(FP), SI
	SWIB(72, Y15)                // sign bit
	SWIB(40, Y14)                // hi
	SWIB(44, Y13)                // lo
	SWIB(36, Y12)                // 1

s2loop:
	VMOVUPS   (BX), Y0
	VXORPS    Y15, Y0, Y2        // t = -gate
	EXP8_AVX2
	VADDPS    Y12, Y8, Y1
	VDIVPS    Y1, Y0, Y1         // silu(gate)
	VMULPS    (CX), Y1, Y1
	VMOVUPS   Y1, (DX)
	ADDQ      $32, BX
	ADDQ      $32, CX
	ADDQ      $32, DX
	SUBQ      $8, SI
	JNZ       s2loop
	VZEROUPPER
	RET

// func softmaxExpAVX2(x *float32, n int, m float32, acc *[8]float64)
//
// x[i] = expF32(x[i]-m) for n, a multiple of 8, values, each added in
// float64 to lane i%8 of acc (softmaxExpGeneric's order).
TEXT ·softmaxExpAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DX
	MOVQ         n+8(FP), SI
	VBROADCASTSS m+16(FP), Y15
	MOVQ         acc+24(FP), BX
	VMOVUPD      (BX), Y0
	VMOVUPD      32(BX), Y1
	SWIB(40, Y14)
	SWIB(44, Y13)
	SWIB(36, Y12)

sxloop:
	VMOVUPS      (DX), Y2
	VSUBPS       Y15, Y2, Y2
	EXP8_AVX2
	VMOVUPS      Y8, (DX)
	VCVTPS2PD    X8, Y3
	VADDPD       Y3, Y0, Y0
	VEXTRACTF128 $1, Y8, X8
	VCVTPS2PD    X8, Y3
	VADDPD       Y3, Y1, Y1
	ADDQ         $32, DX
	SUBQ         $8, SI
	JNZ          sxloop
	VMOVUPD      Y0, (BX)
	VMOVUPD      Y1, 32(BX)
	VZEROUPPER
	RET

// func dotF16Rows2AVX2(dst0, dst1 *float32, k *uint16, stride int, q0, q1 *float32, scale float32, hd int, n int)
//
// dotF16RowsAVX2 for two query vectors against the same key rows: each key
// chunk is converted once for both, and each vector's accumulators,
// multiply-adds and reduction are dotF16RowsAVX2's, so each gets its bits.
// R12 and R13 hold dst1-dst0 and q1-q0.
TEXT ·dotF16Rows2AVX2(SB), NOSPLIT, $0-72
	MOVQ dst0+0(FP), DI
	MOVQ dst1+8(FP), R12
	SUBQ DI, R12
	MOVQ k+16(FP), R8
	MOVQ stride+24(FP), DX
	MOVQ q0+32(FP), R9
	MOVQ q1+40(FP), R13
	SUBQ R9, R13
	MOVQ hd+56(FP), R10
	MOVQ n+64(FP), R11

p2row:
	MOVQ   R8, SI
	MOVQ   R9, BX
	MOVQ   R10, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

p2loop32:
	CMPQ        CX, $32
	JLT         p2loop8
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	VFMADD231PS (BX)(R13*1), Y4, Y8
	VFMADD231PS 32(BX)(R13*1), Y5, Y9
	VFMADD231PS 64(BX)(R13*1), Y6, Y10
	VFMADD231PS 96(BX)(R13*1), Y7, Y11
	ADDQ        $64, SI
	ADDQ        $128, BX
	SUBQ        $32, CX
	JMP         p2loop32

p2loop8:
	CMPQ        CX, $8
	JLT         p2end
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS (BX)(R13*1), Y4, Y8
	ADDQ        $16, SI
	ADDQ        $32, BX
	SUBQ        $8, CX
	JMP         p2loop8

p2end:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VADDPS       Y9, Y8, Y8
	VADDPS       Y11, Y10, Y10
	VADDPS       Y10, Y8, Y8
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VEXTRACTF128 $1, Y8, X9
	VADDPS       X9, X8, X8
	VHADDPS      X8, X8, X8
	VHADDPS      X8, X8, X8
	VMULSS       scale+48(FP), X0, X0
	VMULSS       scale+48(FP), X8, X8
	VMOVSS       X0, (DI)
	VMOVSS       X8, (DI)(R12*1)
	ADDQ         $4, DI
	ADDQ         DX, R8
	DECQ         R11
	JNZ          p2row
	VZEROUPPER
	RET
