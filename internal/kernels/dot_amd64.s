//go:build amd64

#include "textflag.h"

// Row dot products for the hot weight formats. Each takes
// (n int, w, x []byte) float32 like the Go references: n values of one weight
// row w against n activations x in the kernel's activation format. The Go
// side guarantees the lengths (MatMul checks the matrix shape once).
//
// Quantized kernels work two 32-value blocks per 512-bit register: the
// integer products of a block are exact (VPDPBUSD sums four u8*s8 products
// into an int32 lane, so each block ends up spread over 8 lanes), then the
// lanes are converted to float and multiplied by the block's combined scale,
// broadcast over its 8 lanes, into a float accumulator.

// Q4_0 nibble unpacking: the block's 16 bytes are broadcast to both 128-bit
// halves of a 256-bit lane pair; the upper half is shifted right by 4, so
// after masking lane 0 holds values 0..15 and lane 1 values 16..31.
DATA q4shift<>+0(SB)/8, $0
DATA q4shift<>+8(SB)/8, $0
DATA q4shift<>+16(SB)/8, $4
DATA q4shift<>+24(SB)/8, $4
DATA q4shift<>+32(SB)/8, $0
DATA q4shift<>+40(SB)/8, $0
DATA q4shift<>+48(SB)/8, $4
DATA q4shift<>+56(SB)/8, $4
GLOBL q4shift<>(SB), RODATA|NOPTR, $64

// Reduce the float accumulator Z0 to Y0 (before the tail, which uses VEX
// encodings that would clear the upper half).
#define REDUCE_Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS        Y1, Y0, Y0

// Sum the 8 lanes of Y0 into X0's low lane (the caller stores it: vet
// checks the result write, and cannot see into macros).
#define HSUM_Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVHLPS     X0, X0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVSHDUP    X0, X1     \
	VADDSS       X1, X0, X0 \
	VZEROUPPER

// Combined scales of two blocks into Z4: lanes 0-7 = d(wA)*d(xA), lanes
// 8-15 = d(wB)*d(xB); wstride/xstride are the block sizes in bytes.
#define SCALES2(wstride, xstride) \
	VPBROADCASTW  (SI), X4            \
	VPBROADCASTW  wstride(SI), X5     \
	VINSERTI128   $1, X5, Y4, Y4      \
	VCVTPH2PS     Y4, Z4              \
	VPBROADCASTW  (DI), X6            \
	VPBROADCASTW  xstride(DI), X7     \
	VINSERTI128   $1, X7, Y6, Y6      \
	VCVTPH2PS     Y6, Z6              \
	VMULPS        Z6, Z4, Z4

// One block's combined scale into Y4 (8 lanes).
#define SCALE1 \
	VPBROADCASTW (SI), X4 \
	VCVTPH2PS    X4, Y4   \
	VPBROADCASTW (DI), X6 \
	VCVTPH2PS    X6, Y6   \
	VMULPS       Y6, Y4, Y4

// func vdQ8_0VNNI(n int, w, x []byte) float32
// Q8_0 weights by Q8_0 activations. VPDPBUSD wants one unsigned operand, so
// the weight's sign moves onto the activation: |w| * (sign(w)*x). Negating x
// cannot overflow because quantized activations lie in [-127, 127]; |w| of
// -128 is 128 as an unsigned byte, which is exact.
TEXT ·vdQ8_0VNNI(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	SHRQ   $5, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z10, Z10, Z10

q80loop2:
	CMPQ          CX, $2
	JLT           q80tail
	VMOVDQU8      2(SI), Y1
	VINSERTI64X4  $1, 36(SI), Z1, Z1
	VMOVDQU8      2(DI), Y2
	VINSERTI64X4  $1, 36(DI), Z2, Z2
	VPMOVB2M      Z1, K1
	VPABSB        Z1, Z1
	VPSUBB        Z2, Z10, K1, Z2
	VPXORD        Z3, Z3, Z3
	VPDPBUSD      Z2, Z1, Z3
	VCVTDQ2PS     Z3, Z3
	SCALES2(34, 34)
	VFMADD231PS   Z4, Z3, Z0
	ADDQ          $68, SI
	ADDQ          $68, DI
	SUBQ          $2, CX
	JMP           q80loop2

q80tail:
	REDUCE_Z0
	TESTQ       CX, CX
	JZ          q80done
	VMOVDQU8    2(SI), Y1
	VMOVDQU8    2(DI), Y2
	VPMOVB2M    Y1, K1
	VPABSB      Y1, Y1
	VPSUBB      Y2, Y10, K1, Y2
	VPXORD      Y3, Y3, Y3
	VPDPBUSD    Y2, Y1, Y3
	VCVTDQ2PS   Y3, Y3
	SCALE1
	VFMADD231PS Y4, Y3, Y0

q80done:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdQ4_0VNNI(n int, w, x []byte) float32
// Q4_0 weights by Q8_0 activations. The nibbles q are unsigned, so VPDPBUSD
// takes them as they are; the -8 offset becomes 8*sum(x), another VPDPBUSD
// with a vector of 8s, subtracted per block.
TEXT ·vdQ4_0VNNI(SB), NOSPLIT, $0-60
	MOVQ         n+0(FP), CX
	MOVQ         w_base+8(FP), SI
	MOVQ         x_base+32(FP), DI
	SHRQ         $5, CX
	VPXORD       Z0, Z0, Z0
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z8
	MOVL         $0x08080808, AX
	VPBROADCASTD AX, Z9
	VMOVDQU64    q4shift<>(SB), Z11

q40loop2:
	CMPQ            CX, $2
	JLT             q40tail
	VBROADCASTI32X4 2(SI), Y1
	VBROADCASTI32X4 20(SI), Y5
	VINSERTI64X4    $1, Y5, Z1, Z1
	VPSRLVQ         Z11, Z1, Z1
	VPANDQ          Z8, Z1, Z1
	VMOVDQU8        2(DI), Y2
	VINSERTI64X4    $1, 36(DI), Z2, Z2
	VPXORD          Z3, Z3, Z3
	VPXORD          Z7, Z7, Z7
	VPDPBUSD        Z2, Z1, Z3
	VPDPBUSD        Z2, Z9, Z7
	VPSUBD          Z7, Z3, Z3
	VCVTDQ2PS       Z3, Z3
	SCALES2(18, 34)
	VFMADD231PS     Z4, Z3, Z0
	ADDQ            $36, SI
	ADDQ            $68, DI
	SUBQ            $2, CX
	JMP             q40loop2

q40tail:
	REDUCE_Z0
	TESTQ           CX, CX
	JZ              q40done
	VBROADCASTI32X4 2(SI), Y1
	VPSRLVQ         Y11, Y1, Y1
	VPANDQ          Y8, Y1, Y1
	VMOVDQU8        2(DI), Y2
	VPXORD          Y3, Y3, Y3
	VPXORD          Y7, Y7, Y7
	VPDPBUSD        Y2, Y1, Y3
	VPDPBUSD        Y2, Y9, Y7
	VPSUBD          Y7, Y3, Y3
	VCVTDQ2PS       Y3, Y3
	SCALE1
	VFMADD231PS     Y4, Y3, Y0

q40done:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func readSumAVX2(a []int64) int64
// Streams a (length a multiple of 16) through four 256-bit accumulators.
TEXT ·readSumAVX2(SB), NOSPLIT, $0-32
	MOVQ   a_base+0(FP), SI
	MOVQ   a_len+8(FP), CX
	SHRQ   $4, CX
	VPXOR  Y0, Y0, Y0
	VPXOR  Y1, Y1, Y1
	VPXOR  Y2, Y2, Y2
	VPXOR  Y3, Y3, Y3
	TESTQ  CX, CX
	JZ     rsdone

rsloop:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	ADDQ   $128, SI
	DECQ   CX
	JNZ    rsloop

rsdone:
	VPADDQ       Y1, Y0, Y0
	VPADDQ       Y3, Y2, Y2
	VPADDQ       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDQ       X1, X0, X0
	VZEROUPPER
	MOVQ         X0, ret+24(FP)
	RET

// func vdF32AVX512(n int, w, x []byte) float32
// Four accumulators hide the FMA latency; the last n%16 values use a
// masked load, which does not fault past the end of the slices.
TEXT ·vdF32AVX512(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

f32z64:
	CMPQ        CX, $64
	JLT         f32z16
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
	JMP         f32z64

f32z16:
	CMPQ        CX, $16
	JLT         f32zmask
	VMOVUPS     (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         f32z16

f32zmask:
	TESTQ       CX, CX
	JZ          f32zdone
	MOVL        $1, AX
	SHLL        CX, AX
	DECL        AX
	KMOVW       AX, K1
	VMOVUPS.Z   (SI), K1, Z4
	VMOVUPS.Z   (DI), K1, Z5
	VFMADD231PS Z5, Z4, Z1

f32zdone:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	REDUCE_Z0
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdF16AVX512(n int, w, x []byte) float32
// F16 weights by F16 activations (llama.cpp's vec_dot_type for F16), both
// widened to float32 by VCVTPH2PS and multiplied in float32.
TEXT ·vdF16AVX512(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3

f16z64:
	CMPQ        CX, $64
	JLT         f16z16
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   32(SI), Z5
	VCVTPH2PS   64(SI), Z6
	VCVTPH2PS   96(SI), Z7
	VCVTPH2PS   (DI), Z8
	VCVTPH2PS   32(DI), Z9
	VCVTPH2PS   64(DI), Z10
	VCVTPH2PS   96(DI), Z11
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z9, Z5, Z1
	VFMADD231PS Z10, Z6, Z2
	VFMADD231PS Z11, Z7, Z3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $64, CX
	JMP         f16z64

f16z16:
	CMPQ        CX, $16
	JLT         f16zmask
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   (DI), Z8
	VFMADD231PS Z8, Z4, Z0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JMP         f16z16

f16zmask:
	TESTQ       CX, CX
	JZ          f16zdone
	MOVL        $1, AX
	SHLL        CX, AX
	DECL        AX
	KMOVW       AX, K1
	VMOVDQU16.Z (SI), K1, Y4
	VMOVDQU16.Z (DI), K1, Y8
	VCVTPH2PS   Y4, Z4
	VCVTPH2PS   Y8, Z8
	VFMADD231PS Z8, Z4, Z1

f16zdone:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	REDUCE_Z0
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdF32AVX2(n int, w, x []byte) float32
TEXT ·vdF32AVX2(SB), NOSPLIT, $0-60
	MOVQ  n+0(FP), CX
	MOVQ  w_base+8(FP), SI
	MOVQ  x_base+32(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f32y32:
	CMPQ        CX, $32
	JLT         f32y8
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
	JMP         f32y32

f32y8:
	CMPQ        CX, $8
	JLT         f32y1
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f32y8

f32y1:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VXORPS X5, X5, X5

f32y1loop:
	TESTQ       CX, CX
	JZ          f32ydone
	VMOVSS      (SI), X4
	VFMADD231SS (DI), X4, X5
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         f32y1loop

f32ydone:
	HSUM_Y0
	VADDSS X5, X0, X0
	MOVSS  X0, ret+56(FP)
	RET

// func vdF16AVX2(n int, w, x []byte) float32
TEXT ·vdF16AVX2(SB), NOSPLIT, $0-60
	MOVQ   n+0(FP), CX
	MOVQ   w_base+8(FP), SI
	MOVQ   x_base+32(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f16y32:
	CMPQ        CX, $32
	JLT         f16y8
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VCVTPH2PS   (DI), Y8
	VCVTPH2PS   16(DI), Y9
	VCVTPH2PS   32(DI), Y10
	VCVTPH2PS   48(DI), Y11
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $32, CX
	JMP         f16y32

f16y8:
	CMPQ        CX, $8
	JLT         f16y1
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   (DI), Y8
	VFMADD231PS Y8, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JMP         f16y8

f16y1:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VXORPS X5, X5, X5

f16y1loop:
	TESTQ       CX, CX
	JZ          f16ydone
	MOVWLZX     (SI), AX
	MOVWLZX     (DI), BX
	VMOVD       AX, X4
	VMOVD       BX, X6
	VCVTPH2PS   X4, X4
	VCVTPH2PS   X6, X6
	VFMADD231SS X6, X4, X5
	ADDQ        $2, SI
	ADDQ        $2, DI
	DECQ        CX
	JMP         f16y1loop

f16ydone:
	HSUM_Y0
	VADDSS X5, X0, X0
	MOVSS  X0, ret+56(FP)
	RET

// func vdQ8_0AVX2(n int, w, x []byte) float32
// Without VNNI: the weight's sign moves onto x (VPSIGNB), VPMADDUBSW
// multiplies |w| by it into int16 pairs (at most 2*128*127, no saturation)
// and VPMADDWD by ones widens the pairs to int32.
TEXT ·vdQ8_0AVX2(SB), NOSPLIT, $0-60
	MOVQ         n+0(FP), CX
	MOVQ         w_base+8(FP), SI
	MOVQ         x_base+32(FP), DI
	SHRQ         $5, CX
	VXORPS       Y0, Y0, Y0
	MOVL         $0x00010001, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10
	TESTQ        CX, CX
	JZ           q80ydone

q80yloop:
	VMOVDQU     2(SI), Y1
	VMOVDQU     2(DI), Y2
	VPSIGNB     Y1, Y2, Y2
	VPABSB      Y1, Y1
	VPMADDUBSW  Y2, Y1, Y3
	VPMADDWD    Y10, Y3, Y3
	VCVTDQ2PS   Y3, Y3
	SCALE1
	VFMADD231PS Y4, Y3, Y0
	ADDQ        $34, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         q80yloop

q80ydone:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET

// func vdQ4_0AVX2(n int, w, x []byte) float32
// Nibbles unpacked to q-8 in [-8, 7], then as Q8_0.
TEXT ·vdQ4_0AVX2(SB), NOSPLIT, $0-60
	MOVQ         n+0(FP), CX
	MOVQ         w_base+8(FP), SI
	MOVQ         x_base+32(FP), DI
	SHRQ         $5, CX
	VXORPS       Y0, Y0, Y0
	MOVL         $0x00010001, AX
	VMOVD        AX, X10
	VPBROADCASTD X10, Y10
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X8
	VPBROADCASTD X8, Y8
	MOVL         $0x08080808, AX
	VMOVD        AX, X9
	VPBROADCASTD X9, Y9
	TESTQ        CX, CX
	JZ           q40ydone

q40yloop:
	VMOVDQU     2(SI), X1
	VPSRLW      $4, X1, X5
	VINSERTI128 $1, X5, Y1, Y1
	VPAND       Y8, Y1, Y1
	VPSUBB      Y9, Y1, Y1
	VMOVDQU     2(DI), Y2
	VPSIGNB     Y1, Y2, Y2
	VPABSB      Y1, Y1
	VPMADDUBSW  Y2, Y1, Y3
	VPMADDWD    Y10, Y3, Y3
	VCVTDQ2PS   Y3, Y3
	SCALE1
	VFMADD231PS Y4, Y3, Y0
	ADDQ        $18, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         q40yloop

q40ydone:
	HSUM_Y0
	MOVSS X0, ret+56(FP)
	RET
