#include "textflag.h"

// PFD is how far ahead the weights are prefetched, as in the Q4_K x8
// kernel (repack_q4k_amd64.s has the measurements), in address order.
#define PFD 2048

// The Q6_K x8 dot (repack_q6k.go has the layout): eight rows against one
// Q8_K vector, one 1680-byte group block (256 values of each row) per
// loop iteration, every vector lane a row.
//
// Per half of the block and chunk of four values, one 32-byte load of qh
// and one of each ql run give the 6-bit codes (0..63) of all four
// quarters for the eight rows; a VPBROADCASTD of four activation bytes per
// quarter meets all of them, and VPMADDUBSW leaves each row two int16
// partial sums in its dword lane. A pair sum is at most 2*63*128 = 16128,
// so two chunks add up in int16 before VPMADDWD applies the row's
// sub-block scale (VPSHUFB puts the scale byte in the high byte of both
// words of the row's lane, VPSRAW sign-extends it). The codes' offset of
// 32 comes out through the bsums: per scale, VPMADDWD of the scales
// against a word broadcast of the sub-block's bsum gives 2*sc*bsum, times
// 16 subtracted from the sums. The block's sums are exact int32, and each
// row's float step is dotQ6KCanon's: isum*(d*yd) rounded, then added.

// Scale byte j of each row's dword (of four scales) into the high byte of
// both words; 0x80 zeroes the low bytes.
DATA q6x8sc0<>+0(SB)/8, $0x0480048000800080
DATA q6x8sc0<>+8(SB)/8, $0x0c800c8008800880
DATA q6x8sc0<>+16(SB)/8, $0x0480048000800080
DATA q6x8sc0<>+24(SB)/8, $0x0c800c8008800880
GLOBL q6x8sc0<>(SB), RODATA|NOPTR, $32
DATA q6x8sc1<>+0(SB)/8, $0x0581058101810181
DATA q6x8sc1<>+8(SB)/8, $0x0d810d8109810981
DATA q6x8sc1<>+16(SB)/8, $0x0581058101810181
DATA q6x8sc1<>+24(SB)/8, $0x0d810d8109810981
GLOBL q6x8sc1<>(SB), RODATA|NOPTR, $32
DATA q6x8sc2<>+0(SB)/8, $0x0682068202820282
DATA q6x8sc2<>+8(SB)/8, $0x0e820e820a820a82
DATA q6x8sc2<>+16(SB)/8, $0x0682068202820282
DATA q6x8sc2<>+24(SB)/8, $0x0e820e820a820a82
GLOBL q6x8sc2<>(SB), RODATA|NOPTR, $32
DATA q6x8sc3<>+0(SB)/8, $0x0783078303830383
DATA q6x8sc3<>+8(SB)/8, $0x0f830f830b830b83
DATA q6x8sc3<>+16(SB)/8, $0x0783078303830383
DATA q6x8sc3<>+24(SB)/8, $0x0f830f830b830b83
GLOBL q6x8sc3<>(SB), RODATA|NOPTR, $32
DATA q6x8m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6x8m0f<>(SB), RODATA|NOPTR, $8
DATA q6x8m30<>+0(SB)/8, $0x3030303030303030
GLOBL q6x8m30<>(SB), RODATA|NOPTR, $8

// Register use: SI the group block, DI the Q8_K block, Y15 0x0f bytes,
// Y14 0x30 bytes, Y13 the rows' float sums, Y12 the block's int32 sums,
// Y8-Y11 the scales of the four quarters' current sub-blocks, Y4-Y7 the
// four quarters' int16 sums of a pair of chunks, Y0-Y3 scratch.

// The codes of the four quarters of one chunk: ql run 0 at l0(SI), run 1
// at l1(SI), qh at hb(SI), the activations of quarter s at xs(DI); each
// quarter's VPMADDUBSW result goes to its register o0..o3 (Q6X8CODES)
// or is added to it in int16 (Q6X8CODESADD).
#define Q6X8CODES(l0, l1, hb, x0, x1, x2, x3, o0, o1, o2, o3) \
	VMOVDQU      hb(SI), Y0 \
	VMOVDQU      l0(SI), Y1 \
	VPAND        Y15, Y1, Y2 \
	VPSLLW       $4, Y0, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPBROADCASTD x0(DI), Y3 \
	VPMADDUBSW   Y3, Y2, o0 \
	VPSRLW       $4, Y1, Y1 \
	VPAND        Y15, Y1, Y1 \
	VPAND        Y14, Y0, Y3 \
	VPOR         Y3, Y1, Y1 \
	VPBROADCASTD x2(DI), Y3 \
	VPMADDUBSW   Y3, Y1, o2 \
	VMOVDQU      l1(SI), Y1 \
	VPAND        Y15, Y1, Y2 \
	VPSLLW       $2, Y0, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPBROADCASTD x1(DI), Y3 \
	VPMADDUBSW   Y3, Y2, o1 \
	VPSRLW       $4, Y1, Y1 \
	VPAND        Y15, Y1, Y1 \
	VPSRLW       $2, Y0, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPOR         Y3, Y1, Y1 \
	VPBROADCASTD x3(DI), Y3 \
	VPMADDUBSW   Y3, Y1, o3


#define Q6X8CODESADD(l0, l1, hb, x0, x1, x2, x3, o0, o1, o2, o3) \
	VMOVDQU      hb(SI), Y0 \
	VMOVDQU      l0(SI), Y1 \
	VPAND        Y15, Y1, Y2 \
	VPSLLW       $4, Y0, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPBROADCASTD x0(DI), Y3 \
	VPMADDUBSW   Y3, Y2, Y2 \
	VPADDW       Y2, o0, o0 \
	VPSRLW       $4, Y1, Y1 \
	VPAND        Y15, Y1, Y1 \
	VPAND        Y14, Y0, Y3 \
	VPOR         Y3, Y1, Y1 \
	VPBROADCASTD x2(DI), Y3 \
	VPMADDUBSW   Y3, Y1, Y1 \
	VPADDW       Y1, o2, o2 \
	VMOVDQU      l1(SI), Y1 \
	VPAND        Y15, Y1, Y2 \
	VPSLLW       $2, Y0, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPOR         Y3, Y2, Y2 \
	VPBROADCASTD x1(DI), Y3 \
	VPMADDUBSW   Y3, Y2, Y2 \
	VPADDW       Y2, o1, o1 \
	VPSRLW       $4, Y1, Y1 \
	VPAND        Y15, Y1, Y1 \
	VPSRLW       $2, Y0, Y3 \
	VPAND        Y14, Y3, Y3 \
	VPOR         Y3, Y1, Y1 \
	VPBROADCASTD x3(DI), Y3 \
	VPMADDUBSW   Y3, Y1, Y1 \
	VPADDW       Y1, o3, o3

// Chunks k and k+1 of the half h: the first into Y4-Y7, the second added
// to them in int16, then each quarter's sums times its scale into Y12.
// The eight pairs of a block prefetch the block PFD ahead in address
// order, at most 53 bytes apart so that every line is touched.
#define Q6X8PAIR(h, k) \
	PREFETCHT0   (PFD+105*(8*(h)+(k)))(SI) \
	PREFETCHT0   (PFD+105*(8*(h)+(k))+53)(SI) \
	PREFETCHT0   (PFD+105*(8*(h)+(k))+106)(SI) \
	PREFETCHT0   (PFD+105*(8*(h)+(k))+159)(SI) \
	Q6X8CODES(128+96*(8*(h)+(k)), 160+96*(8*(h)+(k)), 192+96*(8*(h)+(k)), 4+128*(h)+4*(k), 36+128*(h)+4*(k), 68+128*(h)+4*(k), 100+128*(h)+4*(k), Y4, Y5, Y6, Y7) \
	Q6X8CODESADD(224+96*(8*(h)+(k)), 256+96*(8*(h)+(k)), 288+96*(8*(h)+(k)), 8+128*(h)+4*(k), 40+128*(h)+4*(k), 72+128*(h)+4*(k), 104+128*(h)+4*(k), Y4, Y5, Y6, Y7) \
	VPMADDWD Y8, Y4, Y4 \
	VPMADDWD Y9, Y5, Y5 \
	VPMADDWD Y10, Y6, Y6 \
	VPMADDWD Y11, Y7, Y7 \
	VPADDD   Y4, Y12, Y12 \
	VPADDD   Y5, Y12, Y12 \
	VPADDD   Y6, Y12, Y12 \
	VPADDD   Y7, Y12, Y12

// One sub-block of each quarter of the half h (a = 0: values 0-15 of
// each quarter, a = 1: 16-31): the scales 8h+2s+a of quarter s into
// Y8-Y11 (ma and mb pick scale a and 2+a of a row's four), the offset
// taken out, and the four chunks.
#define Q6X8PHASE(h, a, ma, mb) \
	VMOVDQU      (64*(h))(SI), Y0 \
	VPSHUFB      ma, Y0, Y8 \
	VPSHUFB      mb, Y0, Y9 \
	VMOVDQU      (64*(h)+32)(SI), Y0 \
	VPSHUFB      ma, Y0, Y10 \
	VPSHUFB      mb, Y0, Y11 \
	VPSRAW       $8, Y8, Y8 \
	VPSRAW       $8, Y9, Y9 \
	VPSRAW       $8, Y10, Y10 \
	VPSRAW       $8, Y11, Y11 \
	VPBROADCASTW (260+2*(8*(h)+(a)))(DI), Y0 \
	VPMADDWD     Y8, Y0, Y1 \
	VPBROADCASTW (260+2*(8*(h)+2+(a)))(DI), Y0 \
	VPMADDWD     Y9, Y0, Y0 \
	VPADDD       Y0, Y1, Y1 \
	VPBROADCASTW (260+2*(8*(h)+4+(a)))(DI), Y0 \
	VPMADDWD     Y10, Y0, Y0 \
	VPADDD       Y0, Y1, Y1 \
	VPBROADCASTW (260+2*(8*(h)+6+(a)))(DI), Y0 \
	VPMADDWD     Y11, Y0, Y0 \
	VPADDD       Y0, Y1, Y1 \
	VPSLLD       $4, Y1, Y1 \
	VPSUBD       Y1, Y12, Y12 \
	Q6X8PAIR(h, 4*(a)) \
	Q6X8PAIR(h, 4*(a)+2)

// func q6kX8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q6kX8DotAVX2(SB), NOSPLIT, $0-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ q6x8m0f<>(SB), Y15
	VPBROADCASTQ q6x8m30<>(SB), Y14
	VXORPS       Y13, Y13, Y13
	TESTQ CX, CX
	JZ    done

loop:
	VPXOR Y12, Y12, Y12
	Q6X8PHASE(0, 0, q6x8sc0<>(SB), q6x8sc2<>(SB))
	Q6X8PHASE(0, 1, q6x8sc1<>(SB), q6x8sc3<>(SB))
	Q6X8PHASE(1, 0, q6x8sc0<>(SB), q6x8sc2<>(SB))
	Q6X8PHASE(1, 1, q6x8sc1<>(SB), q6x8sc3<>(SB))

	// acc += isum*(d*yd), rounded as dotQ6KCanon does.
	VCVTDQ2PS    Y12, Y12
	VCVTPH2PS    1664(SI), Y0
	VBROADCASTSS 0(DI), Y1
	VMULPS       Y1, Y0, Y0
	VMULPS       Y0, Y12, Y12
	VADDPS       Y12, Y13, Y13

	ADDQ $1680, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS Y13, (DX)
	VZEROUPPER
	RET
