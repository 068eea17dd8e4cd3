#include "textflag.h"

// PFD is how far ahead the weights are prefetched: without it one core
// streamed the layout at 9.8-11 GB/s from DRAM here (Zen 3, 14 GB/s read
// bandwidth); 1, 2 and 4 KiB ahead gave 12.3-13.9, 2 KiB the best
// (BenchmarkX8Decode/Cold, 3 runs each).
#define PFD 2048

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

// Each word of a row's dword lane takes the row's byte j (scales) or the
// bytes j and j+1 (pairs of mins); 0x80 zeroes the high bytes.
DATA q4x8sc0<>+0(SB)/8, $0x8004800480008000
DATA q4x8sc0<>+8(SB)/8, $0x800c800c80088008
GLOBL q4x8sc0<>(SB), RODATA|NOPTR, $16
DATA q4x8sc1<>+0(SB)/8, $0x8005800580018001
DATA q4x8sc1<>+8(SB)/8, $0x800d800d80098009
GLOBL q4x8sc1<>(SB), RODATA|NOPTR, $16
DATA q4x8sc2<>+0(SB)/8, $0x8006800680028002
DATA q4x8sc2<>+8(SB)/8, $0x800e800e800a800a
GLOBL q4x8sc2<>(SB), RODATA|NOPTR, $16
DATA q4x8sc3<>+0(SB)/8, $0x8007800780038003
DATA q4x8sc3<>+8(SB)/8, $0x800f800f800b800b
GLOBL q4x8sc3<>(SB), RODATA|NOPTR, $16
DATA q4x8mn01<>+0(SB)/8, $0x8005800480018000
DATA q4x8mn01<>+8(SB)/8, $0x800d800c80098008
GLOBL q4x8mn01<>(SB), RODATA|NOPTR, $16
DATA q4x8mn23<>+0(SB)/8, $0x8007800680038002
DATA q4x8mn23<>+8(SB)/8, $0x800f800e800b800a
GLOBL q4x8mn23<>(SB), RODATA|NOPTR, $16
DATA q4x8m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q4x8m0f<>(SB), RODATA|NOPTR, $8
DATA q4x8m3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL q4x8m3f<>(SB), RODATA|NOPTR, $8
DATA q4x8m30<>+0(SB)/8, $0x3030303030303030
GLOBL q4x8m30<>(SB), RODATA|NOPTR, $8

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
	VPBROADCASTQ q4x8m0f<>(SB), Y15
	VXORPS       Y14, Y14, Y14
	TESTQ CX, CX
	JZ    done

loop:
	// Scales and mins of the eight rows: bytes 0-3, 4-7 and 8-11 of each.
	VMOVDQU      32(SI), Y0
	VMOVDQU      64(SI), Y1
	VMOVDQU      96(SI), Y2
	VPBROADCASTQ q4x8m3f<>(SB), Y6
	VPBROADCASTQ q4x8m30<>(SB), Y7
	VPAND        Y6, Y0, Y10 // scales 0-3
	VPAND        Y6, Y1, Y3  // mins 0-3
	VPAND        Y15, Y2, Y9
	VPSRLW       $2, Y0, Y4
	VPAND        Y7, Y4, Y4
	VPOR         Y4, Y9, Y9  // scales 4-7
	VPSRLW       $4, Y2, Y5
	VPAND        Y15, Y5, Y5
	VPSRLW       $2, Y1, Y4
	VPAND        Y7, Y4, Y4
	VPOR         Y4, Y5, Y5  // mins 4-7

	// summs of each row: its mins against the bsums of 32 values.
	VMOVDQU        260(DI), Y0
	VPHADDW        Y0, Y0, Y0
	VMOVDQU        Y0, (SP)
	VBROADCASTI128 q4x8mn01<>(SB), Y6
	VBROADCASTI128 q4x8mn23<>(SB), Y7
	VPSHUFB        Y6, Y3, Y1
	VPBROADCASTD   0(SP), Y2
	VPMADDWD       Y2, Y1, Y8
	VPSHUFB        Y7, Y3, Y1
	VPBROADCASTD   4(SP), Y2
	VPMADDWD       Y2, Y1, Y1
	VPADDD         Y1, Y8, Y8
	VPSHUFB        Y6, Y5, Y1
	VPBROADCASTD   16(SP), Y2
	VPMADDWD       Y2, Y1, Y1
	VPADDD         Y1, Y8, Y8
	VPSHUFB        Y7, Y5, Y1
	VPBROADCASTD   20(SP), Y2
	VPMADDWD       Y2, Y1, Y1
	VPADDD         Y1, Y8, Y8

	// isum of each row over the four pairs of sub-blocks.
	LEAQ  128(SI), R8
	LEAQ  4(DI), R9
	VPXOR Y13, Y13, Y13
	Q4X8PAIR(Y10, q4x8sc0<>(SB), q4x8sc1<>(SB))
	Q4X8PAIR(Y10, q4x8sc2<>(SB), q4x8sc3<>(SB))
	Q4X8PAIR(Y9, q4x8sc0<>(SB), q4x8sc1<>(SB))
	Q4X8PAIR(Y9, q4x8sc2<>(SB), q4x8sc3<>(SB))

	// acc += isum*(d*yd) - summs*(dmin*yd), rounded as dotQ4KCanon does.
	VCVTDQ2PS    Y13, Y13
	VCVTDQ2PS    Y8, Y8
	VCVTPH2PS    0(SI), Y0
	VCVTPH2PS    16(SI), Y1
	VBROADCASTSS 0(DI), Y2
	VMULPS       Y2, Y0, Y0
	VMULPS       Y2, Y1, Y1
	VMULPS       Y0, Y13, Y13
	VMULPS       Y1, Y8, Y8
	VSUBPS       Y8, Y13, Y13
	VADDPS       Y13, Y14, Y14

	ADDQ $1152, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  loop

done:
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET

