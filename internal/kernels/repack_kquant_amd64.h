// Shared by the Q4_K and Q5_K x8 kernels (repack_q4k_amd64.s,
// repack_q5k_amd64.s), whose scales, mins and float step are the same:
// the pshufb masks and constants, and the two steps of a group block
// that do not touch the codes. Each including file gets its own copy of
// the (file-local) constants.

// PFD is how far ahead the weights are prefetched: without it one core
// streamed the Q4_K layout at 9.8-11 GB/s from DRAM here (Zen 3, 14 GB/s
// read bandwidth); 1, 2 and 4 KiB ahead gave 12.3-13.9, 2 KiB the best
// (BenchmarkX8Decode/Cold, 3 runs each).
#define PFD 2048

// Each word of a row's dword lane takes the row's byte j (scales) or the
// bytes j and j+1 (pairs of mins); 0x80 zeroes the high bytes.
DATA kx8sc0<>+0(SB)/8, $0x8004800480008000
DATA kx8sc0<>+8(SB)/8, $0x800c800c80088008
GLOBL kx8sc0<>(SB), RODATA|NOPTR, $16
DATA kx8sc1<>+0(SB)/8, $0x8005800580018001
DATA kx8sc1<>+8(SB)/8, $0x800d800d80098009
GLOBL kx8sc1<>(SB), RODATA|NOPTR, $16
DATA kx8sc2<>+0(SB)/8, $0x8006800680028002
DATA kx8sc2<>+8(SB)/8, $0x800e800e800a800a
GLOBL kx8sc2<>(SB), RODATA|NOPTR, $16
DATA kx8sc3<>+0(SB)/8, $0x8007800780038003
DATA kx8sc3<>+8(SB)/8, $0x800f800f800b800b
GLOBL kx8sc3<>(SB), RODATA|NOPTR, $16
DATA kx8mn01<>+0(SB)/8, $0x8005800480018000
DATA kx8mn01<>+8(SB)/8, $0x800d800c80098008
GLOBL kx8mn01<>(SB), RODATA|NOPTR, $16
DATA kx8mn23<>+0(SB)/8, $0x8007800680038002
DATA kx8mn23<>+8(SB)/8, $0x800f800e800b800a
GLOBL kx8mn23<>(SB), RODATA|NOPTR, $16
DATA kx8m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kx8m0f<>(SB), RODATA|NOPTR, $8
DATA kx8m3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL kx8m3f<>(SB), RODATA|NOPTR, $8
DATA kx8m30<>+0(SB)/8, $0x3030303030303030
GLOBL kx8m30<>(SB), RODATA|NOPTR, $8

// KX8SCALEMIN unpacks the eight rows' scales of the block at SI (bytes
// 0-3 to Y10, 4-7 to Y9) and takes each row's summs (its mins against
// the bsums of 32 values of the Q8_K block at DI, broadcast in pairs)
// into Y8; Y15 must hold 0x0f bytes, 32 bytes at (SP) are scratch, Y0-Y7
// are clobbered.
#define KX8SCALEMIN \
	VMOVDQU      32(SI), Y0 \
	VMOVDQU      64(SI), Y1 \
	VMOVDQU      96(SI), Y2 \
	VPBROADCASTQ kx8m3f<>(SB), Y6 \
	VPBROADCASTQ kx8m30<>(SB), Y7 \
	VPAND        Y6, Y0, Y10 \
	VPAND        Y6, Y1, Y3 \
	VPAND        Y15, Y2, Y9 \
	VPSRLW       $2, Y0, Y4 \
	VPAND        Y7, Y4, Y4 \
	VPOR         Y4, Y9, Y9 \
	VPSRLW       $4, Y2, Y5 \
	VPAND        Y15, Y5, Y5 \
	VPSRLW       $2, Y1, Y4 \
	VPAND        Y7, Y4, Y4 \
	VPOR         Y4, Y5, Y5 \
	VMOVDQU        260(DI), Y0 \
	VPHADDW        Y0, Y0, Y0 \
	VMOVDQU        Y0, (SP) \
	VBROADCASTI128 kx8mn01<>(SB), Y6 \
	VBROADCASTI128 kx8mn23<>(SB), Y7 \
	VPSHUFB        Y6, Y3, Y1 \
	VPBROADCASTD   0(SP), Y2 \
	VPMADDWD       Y2, Y1, Y8 \
	VPSHUFB        Y7, Y3, Y1 \
	VPBROADCASTD   4(SP), Y2 \
	VPMADDWD       Y2, Y1, Y1 \
	VPADDD         Y1, Y8, Y8 \
	VPSHUFB        Y6, Y5, Y1 \
	VPBROADCASTD   16(SP), Y2 \
	VPMADDWD       Y2, Y1, Y1 \
	VPADDD         Y1, Y8, Y8 \
	VPSHUFB        Y7, Y5, Y1 \
	VPBROADCASTD   20(SP), Y2 \
	VPMADDWD       Y2, Y1, Y1 \
	VPADDD         Y1, Y8, Y8

// KX8FLOAT adds each row's isum*(d*yd) - summs*(dmin*yd) (isum in Y13,
// summs in Y8), rounded as dotQ4KCanon does, to Y14.
#define KX8FLOAT \
	VCVTDQ2PS    Y13, Y13 \
	VCVTDQ2PS    Y8, Y8 \
	VCVTPH2PS    0(SI), Y0 \
	VCVTPH2PS    16(SI), Y1 \
	VBROADCASTSS 0(DI), Y2 \
	VMULPS       Y2, Y0, Y0 \
	VMULPS       Y2, Y1, Y1 \
	VMULPS       Y0, Y13, Y13 \
	VMULPS       Y1, Y8, Y8 \
	VSUBPS       Y8, Y13, Y13 \
	VADDPS       Y13, Y14, Y14
