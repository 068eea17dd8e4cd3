#include "textflag.h"
#include "repack_kquant_amd64.h"

// The Q4_K x8 dot (repack_q4k.go has the layout): eight rows against one
// Q8_K vector, one 1152-byte group block (256 values of each row) per
// loop iteration, every vector lane a row.
//
// Per pair of sub-blocks and chunk of four values, one 32-byte load holds
// the codes of both sub-blocks for the eight rows; a VPBROADCASTD of four
// activation bytes per sub-block meets all of them, and VPMADDUBSW leaves
// each row two int16 partial sums in its dword lane. Eight chunks add up
// in int16 without overflow (a pair sum is at most 2*15*128 = 3840, eight
// of them 30720), VPMADDWD applies the row's sub-block scale (VPSHUFB
// puts it in both words of the row's lane), and the block's sums are
// exact int32. The mins take the activations' bsums, summed per 32
// values by VPHADDW and broadcast in pairs, against each row's two mins.
// Then each row's float step is dotQ4KCanon's: isum*(d*yd) and
// summs*(dmin*yd) rounded one by one, subtracted, added to the row's sum.

// One chunk: the codes at wo(R8), the activations of the pair's two
// sub-blocks at xa(R9) and xb(R9), into the int16 sums Y12 (low nibbles)
// and Y11 (high nibbles).
#define Q4X8CHUNK(wo, xa, xb) \
	PREFETCHT0   (wo+PFD)(R8) \
	VMOVDQU      wo(R8), Y0 \
	VPSRLW       $4, Y0, Y1 \
	VPAND        Y15, Y0, Y0 \
	VPAND        Y15, Y1, Y1 \
	VPBROADCASTD xa(R9), Y2 \
	VPBROADCASTD xb(R9), Y3 \
	VPMADDUBSW   Y2, Y0, Y0 \
	VPMADDUBSW   Y3, Y1, Y1 \
	VPADDW       Y0, Y12, Y12 \
	VPADDW       Y1, Y11, Y11

// One pair of sub-blocks: eight chunks, then the two scales (from the
// unpacked scale bytes in sv, picked by ca and cb) into Y13.
#define Q4X8PAIR(sv, ca, cb) \
	VPXOR     Y12, Y12, Y12 \
	VPXOR     Y11, Y11, Y11 \
	Q4X8CHUNK(0, 0, 32) \
	Q4X8CHUNK(32, 4, 36) \
	Q4X8CHUNK(64, 8, 40) \
	Q4X8CHUNK(96, 12, 44) \
	Q4X8CHUNK(128, 16, 48) \
	Q4X8CHUNK(160, 20, 52) \
	Q4X8CHUNK(192, 24, 56) \
	Q4X8CHUNK(224, 28, 60) \
	VBROADCASTI128 ca, Y4 \
	VPSHUFB   Y4, sv, Y4 \
	VPMADDWD  Y4, Y12, Y12 \
	VBROADCASTI128 cb, Y5 \
	VPSHUFB   Y5, sv, Y5 \
	VPMADDWD  Y5, Y11, Y11 \
	VPADDD    Y12, Y13, Y13 \
	VPADDD    Y11, Y13, Y13 \
	ADDQ      $256, R8 \
	ADDQ      $64, R9

// func q4kX8DotAVX2(nb int, w, x *byte, dst *[8]float32)
TEXT ·q4kX8DotAVX2(SB), NOSPLIT, $32-32
	MOVQ nb+0(FP), CX
	MOVQ w+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ dst+24(FP), DX
	VPBROADCASTQ kx8m0f<>(SB), Y15
	VXORPS       Y14, Y14, Y14
	TESTQ CX, CX
	JZ    done

loop:
	KX8SCALEMIN


	// isum of each row over the four pairs of sub-blocks.
	LEAQ  128(SI), R8
	LEAQ  4(DI), R9
	VPXOR Y13, Y13, Y13
	Q4X8PAIR(Y10, kx8sc0<>(SB), kx8sc1<>(SB))
	Q4X8PAIR(Y10, kx8sc2<>(SB), kx8sc3<>(SB))
	Q4X8PAIR(Y9, kx8sc0<>(SB), kx8sc1<>(SB))
	Q4X8PAIR(Y9, kx8sc2<>(SB), kx8sc3<>(SB))

	KX8FLOAT

	ADDQ $1152, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET

