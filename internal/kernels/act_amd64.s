//go:build amd64

#include "textflag.h"

// Activation conversions (AVX2, F16C), byte for byte those of package
// quant (quant.Quantize, F32ToF16, F32ToBF16), for every input: NaNs,
// infinities and denormals included. They take (dst []byte, src []float32)
// with whole blocks; act_amd64.go checks the lengths.
//
// Exactness rests on doing the Go code's float operations, one rounding
// each (no fused multiply-add), under Go's MXCSR (round to nearest even,
// no flush to zero), and on three observations:
//   - the block maximum ignores NaNs like the Go loop does: VMAXPS/VMINPS
//     return their second source when either is NaN, so with the value as
//     first source and the (never NaN) accumulator as second, a NaN value
//     leaves the accumulator as it was;
//   - the inverse scale is never NaN (127/amax, -127/x with x the non-NaN
//     value of largest magnitude), so a product's NaN, if any, is the
//     value's own (quieted) or the default NaN of inf*0, on either side;
//   - rounding is the Go code's: add 1.5*2^23, subtract the bits 0x4B400000
//     as integers (the same constant, as float and as int), so even NaN
//     and infinite products give the Go code's integers; the saturating
//     packs clamp to [-128, 127] as Q8_0's max/min do, while Q8_K, which
//     keeps the low byte of min(127, q), masks and packs unsigned.

DATA actAbs<>+0(SB)/4, $0x7fffffff
GLOBL actAbs<>(SB), RODATA|NOPTR, $4

// 12582912.0 = 1.5*2^23, whose bits are also the integer to subtract.
DATA actMagic<>+0(SB)/4, $0x4b400000
GLOBL actMagic<>(SB), RODATA|NOPTR, $4

DATA act127<>+0(SB)/4, $0x42fe0000 // 127.0
GLOBL act127<>(SB), RODATA|NOPTR, $4

DATA actM127<>+0(SB)/4, $0xc2fe0000 // -127.0
GLOBL actM127<>(SB), RODATA|NOPTR, $4

DATA actOne<>+0(SB)/4, $0x3f800000 // 1.0
GLOBL actOne<>(SB), RODATA|NOPTR, $4

DATA actI127<>+0(SB)/4, $127
GLOBL actI127<>(SB), RODATA|NOPTR, $4

DATA actFF<>+0(SB)/4, $0xff
GLOBL actFF<>(SB), RODATA|NOPTR, $4

DATA actFFFF<>+0(SB)/4, $0xffff
GLOBL actFFFF<>(SB), RODATA|NOPTR, $4

DATA actInf<>+0(SB)/4, $0x7f800000
GLOBL actInf<>(SB), RODATA|NOPTR, $4

DATA act7FFF<>+0(SB)/4, $0x7fff
GLOBL act7FFF<>(SB), RODATA|NOPTR, $4

DATA actBit1<>+0(SB)/4, $1
GLOBL actBit1<>(SB), RODATA|NOPTR, $4

DATA actBit64<>+0(SB)/4, $64
GLOBL actBit64<>(SB), RODATA|NOPTR, $4

DATA actOnes8<>+0(SB)/4, $0x01010101
GLOBL actOnes8<>(SB), RODATA|NOPTR, $4

DATA actOnes16<>+0(SB)/4, $0x00010001
GLOBL actOnes16<>(SB), RODATA|NOPTR, $4

// The packs work within 128-bit lanes: packing four vectors of dwords
// (values 0-7, 8-15, 16-23, 24-31) to bytes leaves the dwords of 4 values
// in the order 0, 2, 4, 6, 1, 3, 5, 7; VPERMD with this puts them back.
DATA actPerm<>+0(SB)/4, $0
DATA actPerm<>+4(SB)/4, $4
DATA actPerm<>+8(SB)/4, $1
DATA actPerm<>+12(SB)/4, $5
DATA actPerm<>+16(SB)/4, $2
DATA actPerm<>+20(SB)/4, $6
DATA actPerm<>+24(SB)/4, $3
DATA actPerm<>+28(SB)/4, $7
GLOBL actPerm<>(SB), RODATA|NOPTR, $32

// Quantizes the 32 values at SI as q8Block does: Y0 = the 32 int8 quants
// in order, X10 lane 0 = d = amax/127. Needs Y11 = 0, X12 = 127.0,
// Y13 = actPerm, Y14 = actMagic, Y15 = actAbs; uses Y0-Y10. The maximum
// of |x| takes |x| as VMAXPS's first source (a NaN keeps the accumulator);
// id = 127/amax is masked to 0 for an all-zero block, as the Go code's.
#define Q8_BLOCK \
	VMOVUPS      (SI), Y0          \
	VMOVUPS      32(SI), Y1        \
	VMOVUPS      64(SI), Y2        \
	VMOVUPS      96(SI), Y3        \
	VANDPS       Y15, Y0, Y4       \
	VANDPS       Y15, Y1, Y5       \
	VANDPS       Y15, Y2, Y6       \
	VANDPS       Y15, Y3, Y7       \
	VMAXPS       Y11, Y4, Y8       \
	VMAXPS       Y11, Y5, Y9       \
	VMAXPS       Y8, Y6, Y8        \
	VMAXPS       Y9, Y7, Y9        \
	VMAXPS       Y9, Y8, Y8        \
	VEXTRACTF128 $1, Y8, X9        \
	VMAXPS       X9, X8, X8        \
	VPERMILPS    $0x4e, X8, X9     \
	VMAXPS       X9, X8, X8        \
	VPERMILPS    $0xb1, X8, X9     \
	VMAXPS       X9, X8, X8        \
	VDIVSS       X12, X8, X10      \
	VDIVSS       X8, X12, X9       \
	VCMPSS       $4, X11, X8, X8   \
	VANDPS       X8, X9, X9        \
	VBROADCASTSS X9, Y9            \
	VMULPS       Y9, Y0, Y0        \
	VMULPS       Y9, Y1, Y1        \
	VMULPS       Y9, Y2, Y2        \
	VMULPS       Y9, Y3, Y3        \
	VADDPS       Y14, Y0, Y0       \
	VADDPS       Y14, Y1, Y1       \
	VADDPS       Y14, Y2, Y2       \
	VADDPS       Y14, Y3, Y3       \
	VPSUBD       Y14, Y0, Y0       \
	VPSUBD       Y14, Y1, Y1       \
	VPSUBD       Y14, Y2, Y2       \
	VPSUBD       Y14, Y3, Y3       \
	VPACKSSDW    Y1, Y0, Y0        \
	VPACKSSDW    Y3, Y2, Y2        \
	VPACKSSWB    Y2, Y0, Y0        \
	VPERMD       Y0, Y13, Y0

#define Q8_CONSTS \
	VXORPS       Y11, Y11, Y11     \
	VMOVSS       act127<>(SB), X12 \
	VMOVDQU      actPerm<>(SB), Y13 \
	VPBROADCASTD actMagic<>(SB), Y14 \
	VPBROADCASTD actAbs<>(SB), Y15

// func actQ8_0AVX2(dst []byte, src []float32)
// len(src)/32 blocks of 34 bytes: the f16 d, then 32 int8.
TEXT ·actQ8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ   q80done
	Q8_CONSTS

q80loop:
	Q8_BLOCK
	VCVTPS2PH $0, X10, X10
	VMOVD     X10, AX
	MOVW      AX, (DI)
	VMOVDQU   Y0, 2(DI)
	ADDQ      $128, SI
	ADDQ      $34, DI
	DECQ      CX
	JNZ       q80loop

q80done:
	VZEROUPPER
	RET

// func actQ8_1AVX2(dst []byte, src []float32)
// len(src)/32 blocks of 36 bytes: the f16 d, the f16 s = d*sum(q), then
// 32 int8.
TEXT ·actQ8_1AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ   q81done
	Q8_CONSTS

q81loop:
	Q8_BLOCK
	VPBROADCASTB  actOnes8<>(SB), Y1
	VPMADDUBSW    Y0, Y1, Y1         // pairs of quants (signed) as int16
	VPBROADCASTD  actOnes16<>(SB), Y2
	VPMADDWD      Y2, Y1, Y1
	VEXTRACTI128  $1, Y1, X2
	VPADDD        X2, X1, X1
	VPSHUFD       $0x4e, X1, X2
	VPADDD        X2, X1, X1
	VPSHUFD       $0xb1, X1, X2
	VPADDD        X2, X1, X1
	VMOVD         X1, AX
	VCVTSI2SSL    AX, X2, X2
	VMULSS        X2, X10, X2        // d*float32(sum)
	VUNPCKLPS     X2, X10, X10       // lane 0 d, lane 1 s
	VCVTPS2PH     $0, X10, X10
	VMOVD         X10, AX
	MOVL          AX, (DI)
	VMOVDQU       Y0, 4(DI)
	ADDQ          $128, SI
	ADDQ          $36, DI
	DECQ          CX
	JNZ           q81loop

q81done:
	VZEROUPPER
	RET

// Quantizes the 32 values at R8 (two groups of 16) with Y15 = iscale:
// their 32 bytes to R9, and into h the pairwise sums of the two groups'
// int32 quants, VPHADDD-style (lane 0: group 1's values 0-3 (two sums),
// group 2's values 0-3, lane 1 the same for values 4-7 of each half).
// Needs Y11 = actPerm, Y12 = 0xff, Y13 = 127, Y14 = actMagic; uses Y0-Y5.
#define QK_CHUNK(h) \
	VMULPS    (R8), Y15, Y0   \
	VMULPS    32(R8), Y15, Y1 \
	VMULPS    64(R8), Y15, Y2 \
	VMULPS    96(R8), Y15, Y3 \
	VADDPS    Y14, Y0, Y0     \
	VADDPS    Y14, Y1, Y1     \
	VADDPS    Y14, Y2, Y2     \
	VADDPS    Y14, Y3, Y3     \
	VPSUBD    Y14, Y0, Y0     \
	VPSUBD    Y14, Y1, Y1     \
	VPSUBD    Y14, Y2, Y2     \
	VPSUBD    Y14, Y3, Y3     \
	VPMINSD   Y13, Y0, Y0     \
	VPMINSD   Y13, Y1, Y1     \
	VPMINSD   Y13, Y2, Y2     \
	VPMINSD   Y13, Y3, Y3     \
	VPADDD    Y1, Y0, Y4      \
	VPADDD    Y3, Y2, Y5      \
	VPHADDD   Y5, Y4, h       \
	VPAND     Y12, Y0, Y0     \
	VPAND     Y12, Y1, Y1     \
	VPAND     Y12, Y2, Y2     \
	VPAND     Y12, Y3, Y3     \
	VPACKUSDW Y1, Y0, Y0      \
	VPACKUSDW Y3, Y2, Y2      \
	VPACKUSWB Y2, Y0, Y0      \
	VPERMD    Y0, Y11, Y0     \
	VMOVDQU   Y0, (R9)        \
	ADDQ      $128, R8        \
	ADDQ      $32, R9

// Eight groups (four chunks) into t: their int32 sums in order.
#define QK_HALF(t) \
	QK_CHUNK(Y6)                  \
	QK_CHUNK(Y7)                  \
	VPHADDD    Y7, Y6, Y8         \
	QK_CHUNK(Y6)                  \
	QK_CHUNK(Y7)                  \
	VPHADDD    Y7, Y6, Y9         \
	VPERM2I128 $0x20, Y9, Y8, Y6  \
	VPERM2I128 $0x31, Y9, Y8, Y7  \
	VPADDD     Y7, Y6, t

// One pass-1 step: 8 values at off(R8) into the max acc mx and min acc mn.
#define QK_MINMAX(off, v, mx, mn) \
	VMOVUPS off(R8), v  \
	VMAXPS  mx, v, mx   \
	VMINPS  mn, v, mn

// func actQ8_KAVX2(dst []byte, src []float32)
// len(src)/256 blocks of 292 bytes: the float32 d, 256 int8, 16 int16
// sums of 16 quants, as quantQ8_K (llama.cpp's quantize_row_q8_K_ref).
TEXT ·actQ8_KAVX2(SB), NOSPLIT, $0-48
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), CX
	SHRQ         $8, CX
	JZ           qkdone
	VMOVDQU      actPerm<>(SB), Y11
	VPBROADCASTD actFF<>(SB), Y12
	VPBROADCASTD actI127<>(SB), Y13
	VPBROADCASTD actMagic<>(SB), Y14

qkloop:
	// Pass 1: the largest and the smallest non-NaN value (accumulators
	// from +0, so an all-negative block has largest +0 and the other way).
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   SI, R8
	MOVQ   $8, DX

qkmax:
	QK_MINMAX(0, Y8, Y0, Y4)
	QK_MINMAX(32, Y9, Y1, Y5)
	QK_MINMAX(64, Y10, Y2, Y6)
	QK_MINMAX(96, Y15, Y3, Y7)
	ADDQ $128, R8
	DECQ DX
	JNZ  qkmax

	VMAXPS       Y1, Y0, Y0
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0 // largest value P >= +0
	VMINPS       Y5, Y4, Y4
	VMINPS       Y7, Y6, Y6
	VMINPS       Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMINPS       X5, X4, X4
	VPERMILPS    $0x4e, X4, X5
	VMINPS       X5, X4, X4
	VPERMILPS    $0xb1, X4, X5
	VMINPS       X5, X4, X4 // smallest value N <= +0

	// The value of largest magnitude is P if P > |N|, N if |N| > P;
	// if both are the same non-zero magnitude, the first of +P and N in
	// the block, as the Go loop keeps the first maximum.
	VMOVD X0, AX
	VMOVD X4, BX
	ANDL  $0x7fffffff, BX
	CMPL  AX, BX
	JHI   qkpos
	JCS   qkneg
	TESTL AX, AX
	JZ    qkzero
	MOVQ  SI, R8
	LEAQ  1024(SI), R10

qkscan:
	MOVL  (R8), R9
	MOVL  R9, BX
	ANDL  $0x7fffffff, BX
	CMPL  BX, AX
	JEQ   qkfound
	ADDQ  $4, R8
	CMPQ  R8, R10
	JCS   qkscan
	JMP   qkpos // unreachable: P is one of the values

qkfound:
	VMOVD R9, X8
	JMP   qkscale

qkneg:
	VMOVAPS X4, X8
	JMP     qkscale

qkpos:
	VMOVAPS X0, X8

qkscale:
	VMOVSS       actM127<>(SB), X9
	VDIVSS       X8, X9, X9 // iscale = -127/x
	VMOVSS       actOne<>(SB), X10
	VDIVSS       X9, X10, X10 // d = 1/iscale
	VMOVSS       X10, (DI)
	VBROADCASTSS X9, Y15

	// Pass 2: quants and sums, group by group.
	MOVQ SI, R8
	LEAQ 4(DI), R9
	QK_HALF(Y10)
	QK_HALF(Y8)

	// The sums as int16, keeping the low 16 bits as the Go code's
	// int16() does (they exceed int16 only for NaN products).
	VPBROADCASTD actFFFF<>(SB), Y9
	VPAND        Y9, Y10, Y10
	VPAND        Y9, Y8, Y8
	VPACKUSDW    Y8, Y10, Y10
	VPERMQ       $0xd8, Y10, Y10
	VMOVDQU      Y10, 260(DI)
	JMP          qknext

qkzero:
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVDQU Y0, 96(DI)
	VMOVDQU Y0, 128(DI)
	VMOVDQU Y0, 160(DI)
	VMOVDQU Y0, 192(DI)
	VMOVDQU Y0, 224(DI)
	VMOVDQU Y0, 256(DI)
	MOVL    $0, 288(DI)

qknext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  qkloop

qkdone:
	VZEROUPPER
	RET

// func actF16AVX2(dst []byte, src []float32)
// len(src) a multiple of 16; as quant.F32ToF16 (VCVTPS2PH, nearest even).
TEXT ·actF16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $4, CX
	JZ   f16done

f16loop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       f16loop

f16done:
	VZEROUPPER
	RET

// The BF16 of the 8 float32 in v into v, as dwords: (b + 0x7fff + bit 16
// of b) >> 16, or for a NaN (|b| > inf) b >> 16 | 64. Needs Y10 = 1,
// Y11 = 0x7fff, Y12 = 64, Y13 = inf, Y15 = actAbs; uses t1-t3.
#define BF16_ROUND(v, t1, t2, t3) \
	VPSRLD    $16, v, t1     \
	VPAND     Y10, t1, t2    \
	VPADDD    Y11, t2, t2    \
	VPADDD    v, t2, t2      \
	VPSRLD    $16, t2, t2    \
	VPOR      Y12, t1, t1    \
	VPAND     Y15, v, t3     \
	VPCMPGTD  Y13, t3, t3    \
	VPBLENDVB t3, t1, t2, v

// func actBF16AVX2(dst []byte, src []float32)
// len(src) a multiple of 16; as quant.F32ToBF16.
TEXT ·actBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ         dst_base+0(FP), DI
	MOVQ         src_base+24(FP), SI
	MOVQ         src_len+32(FP), CX
	SHRQ         $4, CX
	JZ           bf16done
	VPBROADCASTD actBit1<>(SB), Y10
	VPBROADCASTD act7FFF<>(SB), Y11
	VPBROADCASTD actBit64<>(SB), Y12
	VPBROADCASTD actInf<>(SB), Y13
	VPBROADCASTD actAbs<>(SB), Y15

bf16loop:
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	BF16_ROUND(Y0, Y2, Y3, Y4)
	BF16_ROUND(Y1, Y5, Y6, Y7)
	VPACKUSDW Y1, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bf16loop

bf16done:
	VZEROUPPER
	RET
