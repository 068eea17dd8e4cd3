#include "textflag.h"

// Grid-format (IQ1/IQ2/IQ3) and ternary (TQ1_0/TQ2_0) x Q8_K dot products
// for amd64, one super-block (256 values) per loop iteration.
//
// A grid format stores, per 8 (IQ3: 4) values, an index into a codebook of
// magnitudes (iq_tables.go) and the values' signs. The kernels look the
// entries up with scalar loads (the index arithmetic is scalar anyway, and
// gathers were slower), build the signed weights w = s*g, and multiply them
// with the activations as unsigned 64 + w (at most 64 + 62 = 126) times
// signed activations: VPMADDUBSW pairs stay below 2*126*128 < 32768 for any
// int8 activation, -128 included, so nothing saturates. The 64 comes back
// out per block as 64 * sum(ls_j * bsum_j) from Q8_K's bsums. The sub-block
// scales ls = 2s+1 apply in int16 x int16 -> int32 (VPMADDWD), so the
// integer sum of a super-block is exact; only its combination with the
// scales d*yd is float32, spread over vector lanes, so results differ from
// the reference in the last bits only.

DATA iqB64<>+0(SB)/8, $0x4040404040404040
DATA iqB64<>+8(SB)/8, $0x4040404040404040
DATA iqB64<>+16(SB)/8, $0x4040404040404040
DATA iqB64<>+24(SB)/8, $0x4040404040404040
GLOBL iqB64<>(SB), RODATA|NOPTR, $32

// VPERMD indices that undo the interleave of the scale gathering below.
DATA iqScalePerm<>+0(SB)/8, $0x0000000200000000
DATA iqScalePerm<>+8(SB)/8, $0x0000000600000004
DATA iqScalePerm<>+16(SB)/8, $0x0000000300000001
DATA iqScalePerm<>+24(SB)/8, $0x0000000700000005
GLOBL iqScalePerm<>(SB), RODATA|NOPTR, $32

DATA iqLanePerm<>+0(SB)/8, $0x0000000000000000
DATA iqLanePerm<>+8(SB)/8, $0x0000000000000000
DATA iqLanePerm<>+16(SB)/8, $0x0000000100000001
DATA iqLanePerm<>+24(SB)/8, $0x0000000100000001
GLOBL iqLanePerm<>(SB), RODATA|NOPTR, $32

// VPSHUFB indices replicating byte k of each dword's 4 (one sign byte per
// 8 values) over 8 bytes, and the bit each byte then tests.
DATA iqSignRep<>+0(SB)/8, $0x0000000000000000
DATA iqSignRep<>+8(SB)/8, $0x0101010101010101
DATA iqSignRep<>+16(SB)/8, $0x0202020202020202
DATA iqSignRep<>+24(SB)/8, $0x0303030303030303
GLOBL iqSignRep<>(SB), RODATA|NOPTR, $32
DATA iqBitSel<>+0(SB)/8, $0x8040201008040201
DATA iqBitSel<>+8(SB)/8, $0x8040201008040201
DATA iqBitSel<>+16(SB)/8, $0x8040201008040201
DATA iqBitSel<>+24(SB)/8, $0x8040201008040201
GLOBL iqBitSel<>(SB), RODATA|NOPTR, $32
DATA iqB01<>+0(SB)/8, $0x0101010101010101
DATA iqB01<>+8(SB)/8, $0x0101010101010101
DATA iqB01<>+16(SB)/8, $0x0101010101010101
DATA iqB01<>+24(SB)/8, $0x0101010101010101
GLOBL iqB01<>(SB), RODATA|NOPTR, $32
DATA iqB03<>+0(SB)/8, $0x0303030303030303
DATA iqB03<>+8(SB)/8, $0x0303030303030303
DATA iqB03<>+16(SB)/8, $0x0303030303030303
DATA iqB03<>+24(SB)/8, $0x0303030303030303
GLOBL iqB03<>(SB), RODATA|NOPTR, $32
DATA iqW1<>+0(SB)/8, $0x0001000100010001
DATA iqW1<>+8(SB)/8, $0x0001000100010001
DATA iqW1<>+16(SB)/8, $0x0001000100010001
DATA iqW1<>+24(SB)/8, $0x0001000100010001
GLOBL iqW1<>(SB), RODATA|NOPTR, $32
DATA iqW3<>+0(SB)/8, $0x0003000300030003
DATA iqW3<>+8(SB)/8, $0x0003000300030003
DATA iqW3<>+16(SB)/8, $0x0003000300030003
DATA iqW3<>+24(SB)/8, $0x0003000300030003
GLOBL iqW3<>(SB), RODATA|NOPTR, $32
DATA iqW7<>+0(SB)/8, $0x0007000700070007
DATA iqW7<>+8(SB)/8, $0x0007000700070007
DATA iqW7<>+16(SB)/8, $0x0007000700070007
DATA iqW7<>+24(SB)/8, $0x0007000700070007
GLOBL iqW7<>(SB), RODATA|NOPTR, $32
DATA iqWLo<>+0(SB)/8, $0x00ff00ff00ff00ff
DATA iqWLo<>+8(SB)/8, $0x00ff00ff00ff00ff
DATA iqWLo<>+16(SB)/8, $0x00ff00ff00ff00ff
DATA iqWLo<>+24(SB)/8, $0x00ff00ff00ff00ff
GLOBL iqWLo<>(SB), RODATA|NOPTR, $32

// TQ1_0 digit multipliers 3^n as words: per digit for the 32-byte run,
// per 128-bit lane for the 16-byte run (two digits at once), per dword
// for the 4 qh bytes (four digits at once).
DATA iqPow3<>+0(SB)/8, $0x0003000300030003
DATA iqPow3<>+8(SB)/8, $0x0003000300030003
DATA iqPow3<>+16(SB)/8, $0x0003000300030003
DATA iqPow3<>+24(SB)/8, $0x0003000300030003
DATA iqPow3<>+32(SB)/8, $0x0009000900090009
DATA iqPow3<>+40(SB)/8, $0x0009000900090009
DATA iqPow3<>+48(SB)/8, $0x0009000900090009
DATA iqPow3<>+56(SB)/8, $0x0009000900090009
DATA iqPow3<>+64(SB)/8, $0x001b001b001b001b
DATA iqPow3<>+72(SB)/8, $0x001b001b001b001b
DATA iqPow3<>+80(SB)/8, $0x001b001b001b001b
DATA iqPow3<>+88(SB)/8, $0x001b001b001b001b
DATA iqPow3<>+96(SB)/8, $0x0051005100510051
DATA iqPow3<>+104(SB)/8, $0x0051005100510051
DATA iqPow3<>+112(SB)/8, $0x0051005100510051
DATA iqPow3<>+120(SB)/8, $0x0051005100510051
DATA iqPow3<>+128(SB)/8, $0x0001000100010001
DATA iqPow3<>+136(SB)/8, $0x0001000100010001
DATA iqPow3<>+144(SB)/8, $0x0003000300030003
DATA iqPow3<>+152(SB)/8, $0x0003000300030003
DATA iqPow3<>+160(SB)/8, $0x0009000900090009
DATA iqPow3<>+168(SB)/8, $0x0009000900090009
DATA iqPow3<>+176(SB)/8, $0x001b001b001b001b
DATA iqPow3<>+184(SB)/8, $0x001b001b001b001b
DATA iqPow3<>+192(SB)/8, $0x0051005100510051
DATA iqPow3<>+200(SB)/8, $0x0051005100510051
DATA iqPow3<>+208(SB)/8, $0x0000000000000000
DATA iqPow3<>+216(SB)/8, $0x0000000000000000
DATA iqPow3<>+224(SB)/8, $0x0003000300010001
DATA iqPow3<>+232(SB)/8, $0x001b001b00090009
DATA iqPow3<>+240(SB)/8, $0x0000000000000000
DATA iqPow3<>+248(SB)/8, $0x0000000000000000
GLOBL iqPow3<>(SB), RODATA|NOPTR, $256

// One prefetch line per block, 2 KiB ahead (see KQ_PREFETCH3 in
// kquant_amd64.s): these kernels are compute bound, so a light touch is
// enough to keep the stream ahead.
#define IQ_PREFETCH \
	PREFETCHT0 2048(SI) \
	PREFETCHT2 8192(SI)

// Horizontal sum of the float lanes of Y12 into X0.
#define IQ_REDUCE256 \
	VEXTRACTF128 $1, Y12, X1 \
	VADDPS X1, X12, X0 \
	VPERMILPS $0x0e, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	VZEROUPPER

// Y12 += float(Y10) * (f16 d at dof(SI)) * (Q8_K d at 0(DI)).
#define IQ_FINISH256(dof) \
	VCVTDQ2PS Y10, Y10 \
	VPBROADCASTW dof(SI), X8 \
	VCVTPH2PS X8, Y8 \
	VBROADCASTSS (DI), Y9 \
	VMULPS Y9, Y8, Y8 \
	VFMADD231PS Y8, Y10, Y12

// Y0 = the four 8-byte grid entries of table R8 indexed by the bytes at
// qo..qo+3 (SI).
#define IQ_GRID4_B(qo) \
	MOVBQZX qo+0(SI), AX \
	MOVBQZX qo+1(SI), BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVBQZX qo+2(SI), AX \
	MOVBQZX qo+3(SI), BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0

// Y1 = the +-1 sign bytes of the four 7-bit sign indices in bits 0-27 of
// DX (iqSignPM at R9; BEXTR controls in R10, R11, R12, R13).
#define IQ_SIGNS4 \
	BEXTRL R10, DX, AX \
	BEXTRL R11, DX, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	BEXTRL R12, DX, AX \
	BEXTRL R13, DX, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1

// One 32-value sub-block: magnitudes in Y0, signs in Y1, activations at
// xo(DI), its scale word pair at so(SP); summed into Y10.
#define IQ_SUB256(xo, so) \
	VPSIGNB Y1, Y0, Y0 \
	VPADDB Y15, Y0, Y0 \
	VPMADDUBSW xo(DI), Y0, Y0 \
	VPBROADCASTD so(SP), Y1 \
	VPMADDWD Y1, Y0, Y0 \
	VPADDD Y0, Y10, Y10

// Y0 = 8 dwords s_j, one 4-bit scale per 32 values: the word pairs of
// ls_j = 2s_j+1 go to 0(SP) (for IQ_SUB256) and Y10 starts the block at
// -64 * sum_j ls_j * (bsum_2j + bsum_2j+1).
#define IQ_LS8 \
	VPADDD Y0, Y0, Y0 \
	VPADDD Y13, Y0, Y0 \
	VPSLLD $16, Y0, Y1 \
	VPOR Y1, Y0, Y0 \
	VMOVDQU Y0, 0(SP) \
	VPMADDWD 260(DI), Y0, Y1 \
	VPSLLD $6, Y1, Y1 \
	VPXOR Y10, Y10, Y10 \
	VPSUBD Y1, Y10, Y10

// X0 = 16 bytes s_g, one 4-bit scale per 16 values: the word pairs of
// ls_g go to 0(SP) (groups 0-7) and 32(SP) (8-15), for IQ_SUB256L, and
// Y10 starts the block at -64 * sum_g ls_g * bsum_g.
#define IQ_LS16 \
	VPMOVZXBW X0, Y1 \
	VPSLLW $1, Y1, Y1 \
	VPOR iqW1<>(SB), Y1, Y1 \
	VPMADDWD 260(DI), Y1, Y1 \
	VPSLLD $6, Y1, Y1 \
	VPXOR Y10, Y10, Y10 \
	VPSUBD Y1, Y10, Y10 \
	VPMOVZXBD X0, Y1 \
	VPSRLDQ $8, X0, X2 \
	VPMOVZXBD X2, Y2 \
	VPADDD Y1, Y1, Y1 \
	VPADDD Y13, Y1, Y1 \
	VPSLLD $16, Y1, Y3 \
	VPOR Y3, Y1, Y1 \
	VMOVDQU Y1, 0(SP) \
	VPADDD Y2, Y2, Y2 \
	VPADDD Y13, Y2, Y2 \
	VPSLLD $16, Y2, Y3 \
	VPOR Y3, Y2, Y2 \
	VMOVDQU Y2, 32(SP)

// The 16 scale nibbles of the 8 bytes at so(SI) into X0 (R14 =
// 0x0f0f0f0f0f0f0f0f), then IQ_LS16.
#define IQ_LS16_NIB(so) \
	MOVL so(SI), AX \
	PDEPQ R14, AX, AX \
	MOVL so+4(SI), BX \
	PDEPQ R14, BX, BX \
	VMOVQ AX, X0 \
	VPINSRQ $1, BX, X0, X0 \
	IQ_LS16

// One 32-value sub-block whose two halves have their own scales: the
// dword pairs at so(SP) go to the two 128-bit lanes (Y11 = iqLanePerm).
#define IQ_SUB256L(xo, so) \
	VPSIGNB Y1, Y0, Y0 \
	VPADDB Y15, Y0, Y0 \
	VPMADDUBSW xo(DI), Y0, Y0 \
	VPBROADCASTQ so(SP), Y1 \
	VPERMD Y1, Y11, Y1 \
	VPMADDWD Y1, Y0, Y0 \
	VPADDD Y0, Y10, Y10

// Y1 = +-1 bytes from the 4 plain sign bytes at so(SI) (IQ2_S, IQ3_S: bit
// k of byte l is the sign of value 8l+k). Y7 = iqSignRep, Y6 = iqBitSel,
// Y5 = iqB01.
#define IQ_SIGNS_BYTES(so) \
	VPBROADCASTD so(SI), Y1 \
	VPSHUFB Y7, Y1, Y1 \
	VPAND Y6, Y1, Y1 \
	VPCMPEQB Y6, Y1, Y1 \
	VPOR Y5, Y1, Y1

// Y0 = four 8-byte entries of table R8 indexed by the four u16 of AX
// (AX is consumed).
#define IQ_GRID4_Q \
	MOVWQZX AX, BX \
	VMOVQ (R8)(BX*8), X0 \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VMOVQ (R8)(BX*8), X1 \
	SHRQ $16, AX \
	VPINSRQ $1, (R8)(AX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0

// xr = four 4-byte entries of table R8 (IQ3) indexed by the four u16 of
// AX (consumed).
#define IQ_GRID4D_Q(xr) \
	MOVWQZX AX, BX \
	VMOVD (R8)(BX*4), xr \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPINSRD $1, (R8)(BX*4), xr, xr \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPINSRD $2, (R8)(BX*4), xr, xr \
	SHRQ $16, AX \
	VPINSRD $3, (R8)(AX*4), xr, xr

// xr = four 4-byte entries of table R8 indexed by the bytes at qo(SI).
#define IQ_GRID4D_B(qo, xr) \
	MOVBQZX qo(SI), AX \
	MOVBQZX qo+1(SI), BX \
	VMOVD (R8)(AX*4), xr \
	VPINSRD $1, (R8)(BX*4), xr, xr \
	MOVBQZX qo+2(SI), AX \
	MOVBQZX qo+3(SI), BX \
	VPINSRD $2, (R8)(AX*4), xr, xr \
	VPINSRD $3, (R8)(BX*4), xr, xr

#define IQ_SETUP256 \
	MOVQ w+0(FP), SI \
	MOVQ x+8(FP), DI \
	MOVQ nb+16(FP), CX \
	VMOVDQU iqB64<>(SB), Y15 \
	VMOVDQU iqScalePerm<>(SB), Y14 \
	MOVL $1, AX \
	VMOVD AX, X13 \
	VPBROADCASTD X13, Y13 \
	VXORPS Y12, Y12, Y12

// The eight 32-value sub-blocks of an IQ2_XXS super-block at SI, for OP
// as in IQ3XXS_SUBS.
#define IQ2XXS_SUBS(OP) \
	IQ_GRID4_B(2) \
	MOVL 6(SI), DX \
	IQ_SIGNS4 \
	OP(4, 0) \
	IQ_GRID4_B(10) \
	MOVL 14(SI), DX \
	IQ_SIGNS4 \
	OP(36, 4) \
	IQ_GRID4_B(18) \
	MOVL 22(SI), DX \
	IQ_SIGNS4 \
	OP(68, 8) \
	IQ_GRID4_B(26) \
	MOVL 30(SI), DX \
	IQ_SIGNS4 \
	OP(100, 12) \
	IQ_GRID4_B(34) \
	MOVL 38(SI), DX \
	IQ_SIGNS4 \
	OP(132, 16) \
	IQ_GRID4_B(42) \
	MOVL 46(SI), DX \
	IQ_SIGNS4 \
	OP(164, 20) \
	IQ_GRID4_B(50) \
	MOVL 54(SI), DX \
	IQ_SIGNS4 \
	OP(196, 24) \
	IQ_GRID4_B(58) \
	MOVL 62(SI), DX \
	IQ_SIGNS4 \
	OP(228, 28)

// func iqIQ2XXSAVX2(w, x *byte, nb int) float32
//
// Per 32 values: 4 grid index bytes, then a u32 of four 7-bit sign indices
// and the 4-bit scale; the scales of a block are the top nibbles of its
// odd dwords, gathered with two loads and one VPERMD.
TEXT ·iqIQ2XXSAVX2(SB), NOSPLIT, $32-28
	IQ_SETUP256
	VMOVDQU iqScalePerm<>(SB), Y14
	LEAQ ·iqGrid2XXS(SB), R8
	LEAQ ·iqSignPM(SB), R9
	MOVL $0x700, R10
	MOVL $0x707, R11
	MOVL $0x70e, R12
	MOVL $0x715, R13

iq2xxs256loop:
	IQ_PREFETCH
	VMOVDQU 2(SI), Y0
	VMOVDQU 34(SI), Y1
	VPSRLQ $60, Y0, Y0
	VPSRLQ $60, Y1, Y1
	VPSLLQ $32, Y1, Y1
	VPOR Y1, Y0, Y0
	VPERMD Y0, Y14, Y0
	IQ_LS8
	IQ2XXS_SUBS(IQ_SUB256)
	IQ_FINISH256(0)

	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xxs256loop

	IQ_REDUCE256
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// The eight 32-value sub-blocks of an IQ2_XS super-block at SI, for OP
// as in IQ3XXS_SUBS.
#define IQ2XS_SUBS(OP) \
	MOVWLZX 2(SI), AX \
	ANDL $511, AX \
	MOVWLZX 4(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 6(SI), AX \
	ANDL $511, AX \
	MOVWLZX 8(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 3(SI), AX \
	SHRL $1, AX \
	MOVBLZX 5(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 7(SI), AX \
	SHRL $1, AX \
	MOVBLZX 9(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(4, 0) \
	MOVWLZX 10(SI), AX \
	ANDL $511, AX \
	MOVWLZX 12(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 14(SI), AX \
	ANDL $511, AX \
	MOVWLZX 16(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 11(SI), AX \
	SHRL $1, AX \
	MOVBLZX 13(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 15(SI), AX \
	SHRL $1, AX \
	MOVBLZX 17(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(36, 8) \
	MOVWLZX 18(SI), AX \
	ANDL $511, AX \
	MOVWLZX 20(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 22(SI), AX \
	ANDL $511, AX \
	MOVWLZX 24(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 19(SI), AX \
	SHRL $1, AX \
	MOVBLZX 21(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 23(SI), AX \
	SHRL $1, AX \
	MOVBLZX 25(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(68, 16) \
	MOVWLZX 26(SI), AX \
	ANDL $511, AX \
	MOVWLZX 28(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 30(SI), AX \
	ANDL $511, AX \
	MOVWLZX 32(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 27(SI), AX \
	SHRL $1, AX \
	MOVBLZX 29(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 31(SI), AX \
	SHRL $1, AX \
	MOVBLZX 33(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(100, 24) \
	MOVWLZX 34(SI), AX \
	ANDL $511, AX \
	MOVWLZX 36(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 38(SI), AX \
	ANDL $511, AX \
	MOVWLZX 40(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 35(SI), AX \
	SHRL $1, AX \
	MOVBLZX 37(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 39(SI), AX \
	SHRL $1, AX \
	MOVBLZX 41(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(132, 32) \
	MOVWLZX 42(SI), AX \
	ANDL $511, AX \
	MOVWLZX 44(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 46(SI), AX \
	ANDL $511, AX \
	MOVWLZX 48(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 43(SI), AX \
	SHRL $1, AX \
	MOVBLZX 45(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 47(SI), AX \
	SHRL $1, AX \
	MOVBLZX 49(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(164, 40) \
	MOVWLZX 50(SI), AX \
	ANDL $511, AX \
	MOVWLZX 52(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 54(SI), AX \
	ANDL $511, AX \
	MOVWLZX 56(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 51(SI), AX \
	SHRL $1, AX \
	MOVBLZX 53(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 55(SI), AX \
	SHRL $1, AX \
	MOVBLZX 57(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(196, 48) \
	MOVWLZX 58(SI), AX \
	ANDL $511, AX \
	MOVWLZX 60(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X0 \
	VPINSRQ $1, (R8)(BX*8), X0, X0 \
	MOVWLZX 62(SI), AX \
	ANDL $511, AX \
	MOVWLZX 64(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), X1 \
	VPINSRQ $1, (R8)(BX*8), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVBLZX 59(SI), AX \
	SHRL $1, AX \
	MOVBLZX 61(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X1 \
	VPINSRQ $1, (R9)(BX*8), X1, X1 \
	MOVBLZX 63(SI), AX \
	SHRL $1, AX \
	MOVBLZX 65(SI), BX \
	SHRL $1, BX \
	VMOVQ (R9)(AX*8), X2 \
	VPINSRQ $1, (R9)(BX*8), X2, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	OP(228, 56)

// func iqIQ2XSAVX2(w, x *byte, nb int) float32
//
// Per 32 values: four u16, a 9-bit grid index and a 7-bit sign index each;
// a scale nibble per 16 values in the 8 bytes at 66.
TEXT ·iqIQ2XSAVX2(SB), NOSPLIT, $64-28
	IQ_SETUP256
	VMOVDQU iqLanePerm<>(SB), Y11
	LEAQ ·iqGrid2XS(SB), R8
	LEAQ ·iqSignPM(SB), R9
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iq2xs256loop:
	IQ_PREFETCH
	IQ_LS16_NIB(66)
	IQ2XS_SUBS(IQ_SUB256L)
	IQ_FINISH256(0)

	ADDQ $74, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xs256loop

	IQ_REDUCE256
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// The eight 32-value sub-blocks of an IQ2_S super-block at SI, for OP
// as in IQ3XXS_SUBS.
#define IQ2S_SUBS(OP) \
	MOVL 2(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 66(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(34) \
	OP(4, 0) \
	MOVL 6(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 67(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(38) \
	OP(36, 8) \
	MOVL 10(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 68(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(42) \
	OP(68, 16) \
	MOVL 14(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 69(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(46) \
	OP(100, 24) \
	MOVL 18(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 70(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(50) \
	OP(132, 32) \
	MOVL 22(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 71(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(54) \
	OP(164, 40) \
	MOVL 26(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 72(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(58) \
	OP(196, 48) \
	MOVL 30(SI), AX \
	PDEPQ R11, AX, AX \
	MOVBLZX 73(SI), BX \
	PDEPQ R10, BX, BX \
	ORQ BX, AX \
	IQ_GRID4_Q \
	IQ_SIGNS_BYTES(62) \
	OP(228, 56)

// func iqIQ2SAVX2(w, x *byte, nb int) float32
//
// Per 32 values: 4 low index bytes at 2, 4 plain sign bytes at 34, the
// 2-bit high index parts in one qh byte at 66; scale nibbles at 74.
// PDEP puts the four indices into the four u16 of AX.
TEXT ·iqIQ2SAVX2(SB), NOSPLIT, $64-28
	IQ_SETUP256
	VMOVDQU iqLanePerm<>(SB), Y11
	VMOVDQU iqSignRep<>(SB), Y7
	VMOVDQU iqBitSel<>(SB), Y6
	VMOVDQU iqB01<>(SB), Y5
	LEAQ ·iqGrid2S(SB), R8
	MOVQ $0x0300030003000300, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iq2s256loop:
	IQ_PREFETCH
	IQ_LS16_NIB(74)
	IQ2S_SUBS(IQ_SUB256L)
	IQ_FINISH256(0)

	ADDQ $82, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2s256loop

	IQ_REDUCE256
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// The eight 32-value sub-blocks of an IQ3_XXS super-block at SI: OP(xo,
// so) gets each one's magnitudes in Y0 and signs in Y1, xo being 4 + its
// first value's offset (a Q8_K block's quants start at 4) and so its
// scale's offset in the frame. The row dot sums them (IQ_SUB256), the
// panel decoder stores them (IQP_PUT).
#define IQ3XXS_SUBS(OP) \
	IQ_GRID4D_B(2, X0) \
	IQ_GRID4D_B(6, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 66(SI), DX \
	IQ_SIGNS4 \
	OP(4, 0) \
	IQ_GRID4D_B(10, X0) \
	IQ_GRID4D_B(14, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 70(SI), DX \
	IQ_SIGNS4 \
	OP(36, 4) \
	IQ_GRID4D_B(18, X0) \
	IQ_GRID4D_B(22, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 74(SI), DX \
	IQ_SIGNS4 \
	OP(68, 8) \
	IQ_GRID4D_B(26, X0) \
	IQ_GRID4D_B(30, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 78(SI), DX \
	IQ_SIGNS4 \
	OP(100, 12) \
	IQ_GRID4D_B(34, X0) \
	IQ_GRID4D_B(38, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 82(SI), DX \
	IQ_SIGNS4 \
	OP(132, 16) \
	IQ_GRID4D_B(42, X0) \
	IQ_GRID4D_B(46, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 86(SI), DX \
	IQ_SIGNS4 \
	OP(164, 20) \
	IQ_GRID4D_B(50, X0) \
	IQ_GRID4D_B(54, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 90(SI), DX \
	IQ_SIGNS4 \
	OP(196, 24) \
	IQ_GRID4D_B(58, X0) \
	IQ_GRID4D_B(62, X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	MOVL 94(SI), DX \
	IQ_SIGNS4 \
	OP(228, 28)

// func iqIQ3XXSAVX2(w, x *byte, nb int) float32
//
// Per 32 values: 8 grid index bytes (4 values each) at 2; the u32s at 66
// hold four 7-bit sign indices and the 4-bit scale each.
TEXT ·iqIQ3XXSAVX2(SB), NOSPLIT, $32-28
	IQ_SETUP256
	LEAQ ·iqGrid3XXS(SB), R8
	LEAQ ·iqSignPM(SB), R9
	MOVL $0x700, R10
	MOVL $0x707, R11
	MOVL $0x70e, R12
	MOVL $0x715, R13

iq3xxs256loop:
	IQ_PREFETCH
	VMOVDQU 66(SI), Y0
	VPSRLD $28, Y0, Y0
	IQ_LS8
	IQ3XXS_SUBS(IQ_SUB256)
	IQ_FINISH256(0)

	ADDQ $98, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3xxs256loop

	IQ_REDUCE256
	MOVL $0x3e800000, AX // 0.25
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// The eight 32-value sub-blocks of an IQ3_S super-block at SI, for OP
// as in IQ3XXS_SUBS.
#define IQ3S_SUBS(OP) \
	MOVBLZX 66(SI), DX \
	MOVL 2(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 6(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(74) \
	OP(4, 0) \
	MOVBLZX 67(SI), DX \
	MOVL 10(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 14(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(78) \
	OP(36, 4) \
	MOVBLZX 68(SI), DX \
	MOVL 18(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 22(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(82) \
	OP(68, 8) \
	MOVBLZX 69(SI), DX \
	MOVL 26(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 30(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(86) \
	OP(100, 12) \
	MOVBLZX 70(SI), DX \
	MOVL 34(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 38(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(90) \
	OP(132, 16) \
	MOVBLZX 71(SI), DX \
	MOVL 42(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 46(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(94) \
	OP(164, 20) \
	MOVBLZX 72(SI), DX \
	MOVL 50(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 54(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(98) \
	OP(196, 24) \
	MOVBLZX 73(SI), DX \
	MOVL 58(SI), AX \
	PDEPQ R11, AX, AX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X0) \
	MOVL 62(SI), AX \
	PDEPQ R11, AX, AX \
	SHRL $4, DX \
	PDEPQ R10, DX, BX \
	ORQ BX, AX \
	IQ_GRID4D_Q(X1) \
	VINSERTI128 $1, X1, Y0, Y0 \
	IQ_SIGNS_BYTES(102) \
	OP(228, 28)

// func iqIQ3SAVX2(w, x *byte, nb int) float32
//
// Per 32 values: 8 low index bytes at 2, one qh byte at 66 holding the 9th
// index bit of each, 4 plain sign bytes at 74; a scale nibble per 32 values
// at 106. No constant factor: the grid holds the odd levels 1..15.
TEXT ·iqIQ3SAVX2(SB), NOSPLIT, $32-28
	IQ_SETUP256
	VMOVDQU iqSignRep<>(SB), Y7
	VMOVDQU iqBitSel<>(SB), Y6
	VMOVDQU iqB01<>(SB), Y5
	LEAQ ·iqGrid3S(SB), R8
	MOVQ $0x0100010001000100, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iq3s256loop:
	IQ_PREFETCH
	MOVL 106(SI), AX
	PDEPQ R14, AX, AX
	VMOVQ AX, X0
	VPMOVZXBD X0, Y0
	IQ_LS8
	IQ3S_SUBS(IQ_SUB256)
	IQ_FINISH256(0)

	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3s256loop

	IQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ1SAVX2(w, x *byte, nb int) float32
//
// The grid enters as g+1 in {0, 1, 2} (iqGrid1SU), so VPMADDUBSW takes it
// directly; per 32 values the integer sum is ls*(8*(sum (g+1)x - B) +
// delta*B) with B the activations' sum (bsums), i.e. 8*ls on the products
// and ls*(delta-8) = -ls*(7 + 2*[delta<0]) on B, scaled by 1/8 at the end.
// Per 32 values: 4 low index bytes at 2; a u16 at 34 with the 3-bit high
// index parts, the scale (bits 12-14) and the delta's sign (bit 15).
TEXT ·iqIQ1SAVX2(SB), NOSPLIT, $32-28
	IQ_SETUP256
	LEAQ ·iqGrid1SU(SB), R8
	MOVQ $0x0700070007000700, R10
	MOVQ $0x00ff00ff00ff00ff, R11

iq1s256loop:
	IQ_PREFETCH
	VMOVDQU 34(SI), X0
	VPSRLW $12, X0, X0
	VPAND iqW7<>(SB), X0, X1
	VPSLLW $1, X1, X1
	VPOR iqW1<>(SB), X1, X1
	VPSRLW $3, X0, X0
	VPSLLW $1, X0, X0
	VPADDW iqW7<>(SB), X0, X0
	VPMULLW X1, X0, X0
	VPSLLW $3, X1, X1
	VPMOVZXWD X1, Y1
	VPSLLD $16, Y1, Y2
	VPOR Y2, Y1, Y1
	VMOVDQU Y1, 0(SP)
	VPMOVZXWD X0, Y0
	VPSLLD $16, Y0, Y2
	VPOR Y2, Y0, Y0
	VPMADDWD 260(DI), Y0, Y0
	VPXOR Y10, Y10, Y10
	VPSUBD Y0, Y10, Y10
	MOVL 2(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 34(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 4(DI), Y0, Y0
	VPBROADCASTD 0(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 6(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 36(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 36(DI), Y0, Y0
	VPBROADCASTD 4(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 10(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 38(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 68(DI), Y0, Y0
	VPBROADCASTD 8(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 14(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 40(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 100(DI), Y0, Y0
	VPBROADCASTD 12(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 18(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 42(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 132(DI), Y0, Y0
	VPBROADCASTD 16(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 22(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 44(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 164(DI), Y0, Y0
	VPBROADCASTD 20(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 26(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 46(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 196(DI), Y0, Y0
	VPBROADCASTD 24(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 30(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 48(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 228(DI), Y0, Y0
	VPBROADCASTD 28(SP), Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	IQ_FINISH256(0)

	ADDQ $50, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1s256loop

	IQ_REDUCE256
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ1MAVX2(w, x *byte, nb int) float32
//
// IQ1_M's delta sign is per 8 values, finer than bsums, so it goes into the
// table: iqGrid1M holds 8g + 9 + delta (0..18), indexed by the 11-bit grid
// index plus the delta's sign as bit 11, which is where the layout puts it
// (the qh nibble of each 8 values is 3 index bits and the sign). The 9 comes
// out as 9 * sum ls_g * bsum_g, the 8 and the 1/8 at the end. Per 32
// values: 4 low index bytes at 0, two qh bytes at 32; scales: 3 bits per 16
// values in the four u16 at 48, whose top nibbles make the f16 d.
TEXT ·iqIQ1MAVX2(SB), NOSPLIT, $64-28
	IQ_SETUP256
	VMOVDQU iqLanePerm<>(SB), Y11
	LEAQ ·iqGrid1M(SB), R8
	MOVQ $0x0f000f000f000f00, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0007000700070007, R12
	MOVQ $0xf000f000f000f000, R13

iq1m256loop:
	IQ_PREFETCH
	MOVWLZX 48(SI), AX
	PDEPQ R12, AX, AX
	MOVWLZX 50(SI), BX
	PDEPQ R12, BX, BX
	VMOVQ AX, X0
	VPINSRQ $1, BX, X0, X0
	MOVWLZX 52(SI), AX
	PDEPQ R12, AX, AX
	MOVWLZX 54(SI), BX
	PDEPQ R12, BX, BX
	VMOVQ AX, X1
	VPINSRQ $1, BX, X1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPSLLW $1, Y0, Y0
	VPOR iqW1<>(SB), Y0, Y0
	VPMADDWD 260(DI), Y0, Y1
	VPSLLD $3, Y1, Y2
	VPADDD Y2, Y1, Y1
	VPXOR Y10, Y10, Y10
	VPSUBD Y1, Y10, Y10
	VPMOVZXWD X0, Y1
	VEXTRACTI128 $1, Y0, X2
	VPMOVZXWD X2, Y2
	VPSLLD $16, Y1, Y3
	VPOR Y3, Y1, Y1
	VMOVDQU Y1, 0(SP)
	VPSLLD $16, Y2, Y3
	VPOR Y3, Y2, Y2
	VMOVDQU Y2, 32(SP)
	MOVL 0(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 32(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 4(DI), Y0, Y0
	VPBROADCASTQ 0(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 4(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 34(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 36(DI), Y0, Y0
	VPBROADCASTQ 8(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 8(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 36(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 68(DI), Y0, Y0
	VPBROADCASTQ 16(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 12(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 38(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 100(DI), Y0, Y0
	VPBROADCASTQ 24(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 16(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 40(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 132(DI), Y0, Y0
	VPBROADCASTQ 32(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 20(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 42(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 164(DI), Y0, Y0
	VPBROADCASTQ 40(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 24(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 44(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 196(DI), Y0, Y0
	VPBROADCASTQ 48(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	MOVL 28(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 46(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_Q
	VPMADDUBSW 228(DI), Y0, Y0
	VPBROADCASTQ 56(SP), Y1
	VPERMD Y1, Y11, Y1
	VPMADDWD Y1, Y0, Y0
	VPADDD Y0, Y10, Y10
	VCVTDQ2PS Y10, Y10
	MOVQ 48(SI), AX
	PEXTQ R13, AX, AX
	VMOVD AX, X8
	VPBROADCASTW X8, X8
	VCVTPH2PS X8, Y8
	VBROADCASTSS (DI), Y9
	VMULPS Y9, Y8, Y8
	VFMADD231PS Y8, Y10, Y12

	ADDQ $56, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1m256loop

	IQ_REDUCE256
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// func iqTQ2AVX2(w, x *byte, nb int) float32
//
// TQ2_0 codes q are used unsigned (0..3) and the -1 comes back out as the
// sum of all bsums. Each 32-byte half holds four runs of 32 values at bit
// pairs 0, 2, 4, 6. The word sums stay below 8*2*3*128.
TEXT ·iqTQ2AVX2(SB), NOSPLIT, $0-28
	IQ_SETUP256
	VMOVDQU iqB03<>(SB), Y14

tq2256loop:
	IQ_PREFETCH
	VPXOR Y2, Y2, Y2
	VMOVDQU 0(SI), Y0
	VPAND Y14, Y0, Y1
	VPMADDUBSW 4(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VPSRLW $2, Y0, Y1
	VPAND Y14, Y1, Y1
	VPMADDUBSW 36(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y1, Y1
	VPMADDUBSW 68(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VPSRLW $6, Y0, Y1
	VPAND Y14, Y1, Y1
	VPMADDUBSW 100(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VMOVDQU 32(SI), Y0
	VPAND Y14, Y0, Y1
	VPMADDUBSW 132(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VPSRLW $2, Y0, Y1
	VPAND Y14, Y1, Y1
	VPMADDUBSW 164(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y1, Y1
	VPMADDUBSW 196(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VPSRLW $6, Y0, Y1
	VPAND Y14, Y1, Y1
	VPMADDUBSW 228(DI), Y1, Y1
	VPADDW Y1, Y2, Y2
	VMOVDQU iqW1<>(SB), Y3
	VPMADDWD Y3, Y2, Y10
	VPMADDWD 260(DI), Y3, Y1
	VPSUBD Y1, Y10, Y10
	IQ_FINISH256(64)

	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  tq2256loop

	IQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// Y4 = the base-3 digits selected by the word multipliers pow of the bytes
// in Y3: each byte q times 3^n (mod 256) has digit n on top, and times 3
// over 256 (VPMULHUW of the byte moved to the top of its word) extracts it.
// Bytes are multiplied as words, the low and high bytes of each apart.
// Y14 = iqWLo, Y11 = iqW3.
#define TQ1_DIGITS(pow) \
	VPAND Y14, Y3, Y4 \
	VPMULLW pow, Y4, Y4 \
	VPSLLW $8, Y4, Y4 \
	VPMULHUW Y11, Y4, Y4 \
	VPANDN Y3, Y14, Y5 \
	VPMULLW pow, Y5, Y5 \
	VPMULHUW Y11, Y5, Y5 \
	VPSLLW $8, Y5, Y5 \
	VPOR Y5, Y4, Y4

// Digit 0 (3^0 = 1) needs no multiply.
#define TQ1_DIGITS0 \
	VPSLLW $8, Y3, Y4 \
	VPMULHUW Y11, Y4, Y4 \
	VPANDN Y3, Y14, Y5 \
	VPMULHUW Y11, Y5, Y5 \
	VPSLLW $8, Y5, Y5 \
	VPOR Y5, Y4, Y4

// func iqTQ1AVX2(w, x *byte, nb int) float32
//
// TQ1_0 bytes hold five (qh: four) base-3 digits: bytes 0-31 give values
// 32n+m, bytes 32-47 values 160+16n+m (two digits per ymm, one per lane),
// the 4 qh bytes values 240+4n+j (four digits per xmm, one per dword). The
// digits are used unsigned (0..2) and the -1 comes back out as the sum of
// all bsums; lanes multiplied by 0 pad the last two runs.
TEXT ·iqTQ1AVX2(SB), NOSPLIT, $0-28
	IQ_SETUP256
	VMOVDQU iqWLo<>(SB), Y14
	VMOVDQU iqW3<>(SB), Y11

tq1256loop:
	IQ_PREFETCH
	VPXOR Y2, Y2, Y2
	VMOVDQU 0(SI), Y3
	TQ1_DIGITS0
	VPMADDUBSW 4(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	TQ1_DIGITS(iqPow3<>+0(SB))
	VPMADDUBSW 36(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	TQ1_DIGITS(iqPow3<>+32(SB))
	VPMADDUBSW 68(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	TQ1_DIGITS(iqPow3<>+64(SB))
	VPMADDUBSW 100(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	TQ1_DIGITS(iqPow3<>+96(SB))
	VPMADDUBSW 132(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	VBROADCASTI128 32(SI), Y3
	TQ1_DIGITS(iqPow3<>+128(SB))
	VPMADDUBSW 164(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	TQ1_DIGITS(iqPow3<>+160(SB))
	VPMADDUBSW 196(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	TQ1_DIGITS(iqPow3<>+192(SB))
	VPMADDUBSW 228(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	VPBROADCASTD 48(SI), Y3
	TQ1_DIGITS(iqPow3<>+224(SB))
	VPMADDUBSW 244(DI), Y4, Y4
	VPADDW Y4, Y2, Y2
	VMOVDQU iqW1<>(SB), Y3
	VPMADDWD Y3, Y2, Y10
	VPMADDWD 260(DI), Y3, Y1
	VPSUBD Y1, Y10, Y10
	IQ_FINISH256(52)

	ADDQ $54, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  tq1256loop

	IQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// ---------------------------------------------------------------------
// AVX-512 versions (F, BW, VL, VNNI, VBMI, BITALG): 64 values per step,
// VPMADDUBSW then VPDPWSSD against the sub-block scales (VPERMD'd to the
// lanes from Z16), signs as k-masks: the stored sign bytes of IQ3_S load
// straight into K1; the 7-bit sign indices of IQ2_XXS, IQ2_XS and IQ3_XXS
// are cut out of a whole block at once with VPMULTISHIFTQB, their implied
// eighth bit (even parity) added with VPOPCNTB, and the 32 resulting sign
// bytes kept at 64(SP). The weights enter as 64 + s*g as in the AVX2
// kernels: VPADDB, then a masked VPSUBB for the negative lanes.
//
// The grid fetches stay scalar-indexed loads, which bound these kernels,
// so the wider vectors gain 5-20 % on Zen 4 (whose 512-bit units are
// double-pumped). IQ2_S and the TQ formats have no version here: theirs
// ran no faster than the AVX2 ones. Computing a block's indices with
// vector arithmetic into a stack array, to spare the scalar PDEP work,
// was slower: the narrow reloads of a wide store do not forward.

// VPMULTISHIFTQB controls: bytes 0-3 of each qword get the 8 bits from bit
// 32, 39, 46, 53 (IQ2_XXS: the sign word in the upper dword), from 9, 25,
// 41, 57 (IQ2_XS: bits 9-15 of each u16), or all eight fields of two sign
// words (IQ3_XXS).
DATA iqMsXXS<>+0(SB)/8, $0x00000000352e2720
GLOBL iqMsXXS<>(SB), RODATA|NOPTR, $8
DATA iqMsXS<>+0(SB)/8, $0x0000000039291909
GLOBL iqMsXS<>(SB), RODATA|NOPTR, $8
DATA iqMs3XXS<>+0(SB)/8, $0x352e2720150e0700
GLOBL iqMs3XXS<>(SB), RODATA|NOPTR, $8

// VPERMD indices giving each 64-value step its scales: per 32 values (step
// k: dwords 2k, 2k+1 over 8 lanes each) and per 16 values (step k: dwords
// 4k..4k+3 over 4 lanes each).

DATA iqPerm32<>+0(SB)/8, $0x0000000000000000
DATA iqPerm32<>+8(SB)/8, $0x0000000000000000
DATA iqPerm32<>+16(SB)/8, $0x0000000000000000
DATA iqPerm32<>+24(SB)/8, $0x0000000000000000
DATA iqPerm32<>+32(SB)/8, $0x0000000100000001
DATA iqPerm32<>+40(SB)/8, $0x0000000100000001
DATA iqPerm32<>+48(SB)/8, $0x0000000100000001
DATA iqPerm32<>+56(SB)/8, $0x0000000100000001
DATA iqPerm32<>+64(SB)/8, $0x0000000200000002
DATA iqPerm32<>+72(SB)/8, $0x0000000200000002
DATA iqPerm32<>+80(SB)/8, $0x0000000200000002
DATA iqPerm32<>+88(SB)/8, $0x0000000200000002
DATA iqPerm32<>+96(SB)/8, $0x0000000300000003
DATA iqPerm32<>+104(SB)/8, $0x0000000300000003
DATA iqPerm32<>+112(SB)/8, $0x0000000300000003
DATA iqPerm32<>+120(SB)/8, $0x0000000300000003
DATA iqPerm32<>+128(SB)/8, $0x0000000400000004
DATA iqPerm32<>+136(SB)/8, $0x0000000400000004
DATA iqPerm32<>+144(SB)/8, $0x0000000400000004
DATA iqPerm32<>+152(SB)/8, $0x0000000400000004
DATA iqPerm32<>+160(SB)/8, $0x0000000500000005
DATA iqPerm32<>+168(SB)/8, $0x0000000500000005
DATA iqPerm32<>+176(SB)/8, $0x0000000500000005
DATA iqPerm32<>+184(SB)/8, $0x0000000500000005
DATA iqPerm32<>+192(SB)/8, $0x0000000600000006
DATA iqPerm32<>+200(SB)/8, $0x0000000600000006
DATA iqPerm32<>+208(SB)/8, $0x0000000600000006
DATA iqPerm32<>+216(SB)/8, $0x0000000600000006
DATA iqPerm32<>+224(SB)/8, $0x0000000700000007
DATA iqPerm32<>+232(SB)/8, $0x0000000700000007
DATA iqPerm32<>+240(SB)/8, $0x0000000700000007
DATA iqPerm32<>+248(SB)/8, $0x0000000700000007
GLOBL iqPerm32<>(SB), RODATA|NOPTR, $256
DATA iqPerm16<>+0(SB)/8, $0x0000000000000000
DATA iqPerm16<>+8(SB)/8, $0x0000000000000000
DATA iqPerm16<>+16(SB)/8, $0x0000000100000001
DATA iqPerm16<>+24(SB)/8, $0x0000000100000001
DATA iqPerm16<>+32(SB)/8, $0x0000000200000002
DATA iqPerm16<>+40(SB)/8, $0x0000000200000002
DATA iqPerm16<>+48(SB)/8, $0x0000000300000003
DATA iqPerm16<>+56(SB)/8, $0x0000000300000003
DATA iqPerm16<>+64(SB)/8, $0x0000000400000004
DATA iqPerm16<>+72(SB)/8, $0x0000000400000004
DATA iqPerm16<>+80(SB)/8, $0x0000000500000005
DATA iqPerm16<>+88(SB)/8, $0x0000000500000005
DATA iqPerm16<>+96(SB)/8, $0x0000000600000006
DATA iqPerm16<>+104(SB)/8, $0x0000000600000006
DATA iqPerm16<>+112(SB)/8, $0x0000000700000007
DATA iqPerm16<>+120(SB)/8, $0x0000000700000007
DATA iqPerm16<>+128(SB)/8, $0x0000000800000008
DATA iqPerm16<>+136(SB)/8, $0x0000000800000008
DATA iqPerm16<>+144(SB)/8, $0x0000000900000009
DATA iqPerm16<>+152(SB)/8, $0x0000000900000009
DATA iqPerm16<>+160(SB)/8, $0x0000000a0000000a
DATA iqPerm16<>+168(SB)/8, $0x0000000a0000000a
DATA iqPerm16<>+176(SB)/8, $0x0000000b0000000b
DATA iqPerm16<>+184(SB)/8, $0x0000000b0000000b
DATA iqPerm16<>+192(SB)/8, $0x0000000c0000000c
DATA iqPerm16<>+200(SB)/8, $0x0000000c0000000c
DATA iqPerm16<>+208(SB)/8, $0x0000000d0000000d
DATA iqPerm16<>+216(SB)/8, $0x0000000d0000000d
DATA iqPerm16<>+224(SB)/8, $0x0000000e0000000e
DATA iqPerm16<>+232(SB)/8, $0x0000000e0000000e
DATA iqPerm16<>+240(SB)/8, $0x0000000f0000000f
DATA iqPerm16<>+248(SB)/8, $0x0000000f0000000f
GLOBL iqPerm16<>(SB), RODATA|NOPTR, $256

// Grid entries go into vector lanes by masked broadcast loads: one load
// each and no shuffle (VPINSRQ costs a shuffle too; 20 % faster for
// IQ2_XXS on Zen 4). K2, K3, K4 select lanes 1, 2, 3 (qwords of a ymm or
// dwords of an xmm).
#define IQ_LANEMASKS \
	MOVL $2, AX \
	KMOVB AX, K2 \
	MOVL $4, AX \
	KMOVB AX, K3 \
	MOVL $8, AX \
	KMOVB AX, K4

// ya (xa its low half) = four 8-byte entries of R8 indexed by the bytes at
// qo(SI).
#define IQ_GRID4_BK(qo, xa, ya) \
	MOVBQZX qo+0(SI), AX \
	MOVBQZX qo+1(SI), BX \
	VMOVQ (R8)(AX*8), xa \
	VPBROADCASTQ (R8)(BX*8), K2, ya \
	MOVBQZX qo+2(SI), AX \
	MOVBQZX qo+3(SI), BX \
	VPBROADCASTQ (R8)(AX*8), K3, ya \
	VPBROADCASTQ (R8)(BX*8), K4, ya

// ... indexed by the low 9 bits of the u16s at qo(SI) (IQ2_XS).
#define IQ_GRID4_W9K(qo, xa, ya) \
	MOVWLZX qo(SI), AX \
	ANDL $511, AX \
	MOVWLZX qo+2(SI), BX \
	ANDL $511, BX \
	VMOVQ (R8)(AX*8), xa \
	VPBROADCASTQ (R8)(BX*8), K2, ya \
	MOVWLZX qo+4(SI), AX \
	ANDL $511, AX \
	MOVWLZX qo+6(SI), BX \
	ANDL $511, BX \
	VPBROADCASTQ (R8)(AX*8), K3, ya \
	VPBROADCASTQ (R8)(BX*8), K4, ya

// ... indexed by the four u16 of AX (consumed), assembled with PDEP.
#define IQ_GRID4_QK(xa, ya) \
	MOVWQZX AX, BX \
	VMOVQ (R8)(BX*8), xa \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPBROADCASTQ (R8)(BX*8), K2, ya \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPBROADCASTQ (R8)(BX*8), K3, ya \
	SHRQ $16, AX \
	VPBROADCASTQ (R8)(AX*8), K4, ya

// xa = four 4-byte entries of R8 (IQ3) indexed by the bytes at qo(SI).
#define IQ_GRID4D_BK(qo, xa) \
	MOVBQZX qo(SI), AX \
	MOVBQZX qo+1(SI), BX \
	VMOVD (R8)(AX*4), xa \
	VPBROADCASTD (R8)(BX*4), K2, xa \
	MOVBQZX qo+2(SI), AX \
	MOVBQZX qo+3(SI), BX \
	VPBROADCASTD (R8)(AX*4), K3, xa \
	VPBROADCASTD (R8)(BX*4), K4, xa

// ... indexed by the four u16 of AX (consumed).
#define IQ_GRID4D_QK(xa) \
	MOVWQZX AX, BX \
	VMOVD (R8)(BX*4), xa \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPBROADCASTD (R8)(BX*4), K2, xa \
	SHRQ $16, AX \
	MOVWQZX AX, BX \
	VPBROADCASTD (R8)(BX*4), K3, xa \
	SHRQ $16, AX \
	VPBROADCASTD (R8)(AX*4), K4, xa

#define IQ_SETUP512 \
	MOVQ w+0(FP), SI \
	MOVQ x+8(FP), DI \
	MOVQ nb+16(FP), CX \
	MOVL $0x40, AX \
	VPBROADCASTB AX, Z15 \
	MOVL $1, AX \
	VPBROADCASTD AX, Y13 \
	VPXORD Z12, Z12, Z12 \
	IQ_LANEMASKS

#define IQ_PERM32 \
	VMOVDQU64 iqPerm32<>+0(SB), Z20 \
	VMOVDQU64 iqPerm32<>+64(SB), Z21 \
	VMOVDQU64 iqPerm32<>+128(SB), Z22 \
	VMOVDQU64 iqPerm32<>+192(SB), Z23

#define IQ_PERM16 \
	VMOVDQU64 iqPerm16<>+0(SB), Z20 \
	VMOVDQU64 iqPerm16<>+64(SB), Z21 \
	VMOVDQU64 iqPerm16<>+128(SB), Z22 \
	VMOVDQU64 iqPerm16<>+192(SB), Z23

// Sign bytes from 7-bit fields: Z3 holds the fields (VPMULTISHIFTQB'd, top
// bit not yet cleared); Z17 = 0x7f bytes, Z18 = 0x80 bytes.
#define IQ_PARITY512 \
	VPANDQ Z17, Z3, Z3 \
	VPOPCNTB Z3, Z4 \
	VPSLLW $7, Z4, Z4 \
	VPTERNLOGD $0xf8, Z18, Z4, Z3

#define IQ_SIGNCONST512 \
	MOVL $0x7f, AX \
	VPBROADCASTB AX, Z17 \
	MOVL $0x80, AX \
	VPBROADCASTB AX, Z18

// Z12 += float(Z10) * (f16 d at dof(SI)) * (Q8_K d).
#define IQ_FINISH512(dof) \
	VCVTDQ2PS Z10, Z10 \
	VPBROADCASTW dof(SI), X8 \
	VCVTPH2PS X8, X8 \
	VMULSS (DI), X8, X8 \
	VBROADCASTSS X8, Z8 \
	VFMADD231PS Z8, Z10, Z12

#define IQ_REDUCE512 \
	VEXTRACTF64X4 $1, Z12, Y0 \
	VADDPS Y0, Y12, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0x0e, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	VZEROUPPER

// One 64-value step: magnitudes in Z0, negative lanes in K1, activations
// at xo(DI), scales Z16 through the VPERMD index sidx; into Z10.
#define IQ_STEP512(xo, sidx) \
	VPADDB Z15, Z0, Z1 \
	VPSUBB Z0, Z15, K1, Z1 \
	VPMADDUBSW xo(DI), Z1, Z1 \
	VPERMD Z16, sidx, Z2 \
	VPDPWSSD Z2, Z1, Z10

// The same for the IQ1 grids, already unsigned: no signs.
#define IQ_STEP512U(xo, sidx) \
	VPMADDUBSW xo(DI), Z0, Z1 \
	VPERMD Z16, sidx, Z2 \
	VPDPWSSD Z2, Z1, Z10


// func iqIQ2XXSAVX512(w, x *byte, nb int) float32
TEXT ·iqIQ2XXSAVX512(SB), NOSPLIT, $96-28
	IQ_SETUP512
	IQ_SIGNCONST512
	IQ_PERM32
	VMOVDQU iqScalePerm<>(SB), Y14
	VPBROADCASTQ iqMsXXS<>(SB), Z19
	LEAQ ·iqGrid2XXS(SB), R8

iq2xxs512loop:
	IQ_PREFETCH
	VMOVDQU 2(SI), Y0
	VMOVDQU 34(SI), Y1
	VPSRLQ $60, Y0, Y0
	VPSRLQ $60, Y1, Y1
	VPSLLQ $32, Y1, Y1
	VPOR Y1, Y0, Y0
	VPERMD Y0, Y14, Y0
	IQ_LS8
	VMOVDQA64 Z0, Z16
	VMOVDQU64 2(SI), Z3
	VPMULTISHIFTQB Z3, Z19, Z3
	IQ_PARITY512
	VPMOVQD Z3, Y3
	VMOVDQU Y3, 64(SP)
	IQ_GRID4_BK(2, X0, Y0)
	IQ_GRID4_BK(10, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 64(SP), K1
	IQ_STEP512(4, Z20)
	IQ_GRID4_BK(18, X0, Y0)
	IQ_GRID4_BK(26, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 72(SP), K1
	IQ_STEP512(68, Z21)
	IQ_GRID4_BK(34, X0, Y0)
	IQ_GRID4_BK(42, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 80(SP), K1
	IQ_STEP512(132, Z22)
	IQ_GRID4_BK(50, X0, Y0)
	IQ_GRID4_BK(58, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 88(SP), K1
	IQ_STEP512(196, Z23)
	IQ_FINISH512(0)

	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xxs512loop

	IQ_REDUCE512
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ2XSAVX512(w, x *byte, nb int) float32
TEXT ·iqIQ2XSAVX512(SB), NOSPLIT, $96-28
	IQ_SETUP512
	IQ_SIGNCONST512
	IQ_PERM16
	VPBROADCASTQ iqMsXS<>(SB), Z19
	LEAQ ·iqGrid2XS(SB), R8
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iq2xs512loop:
	IQ_PREFETCH
	IQ_LS16_NIB(66)
	VMOVDQU64 0(SP), Z16
	VMOVDQU64 2(SI), Z3
	VPMULTISHIFTQB Z3, Z19, Z3
	IQ_PARITY512
	VPMOVQD Z3, Y3
	VMOVDQU Y3, 64(SP)
	IQ_GRID4_W9K(2, X0, Y0)
	IQ_GRID4_W9K(10, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 64(SP), K1
	IQ_STEP512(4, Z20)
	IQ_GRID4_W9K(18, X0, Y0)
	IQ_GRID4_W9K(26, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 72(SP), K1
	IQ_STEP512(68, Z21)
	IQ_GRID4_W9K(34, X0, Y0)
	IQ_GRID4_W9K(42, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 80(SP), K1
	IQ_STEP512(132, Z22)
	IQ_GRID4_W9K(50, X0, Y0)
	IQ_GRID4_W9K(58, X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 88(SP), K1
	IQ_STEP512(196, Z23)
	IQ_FINISH512(0)

	ADDQ $74, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xs512loop

	IQ_REDUCE512
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ3XXSAVX512(w, x *byte, nb int) float32
TEXT ·iqIQ3XXSAVX512(SB), NOSPLIT, $96-28
	IQ_SETUP512
	IQ_SIGNCONST512
	IQ_PERM32
	VPBROADCASTQ iqMs3XXS<>(SB), Y19
	LEAQ ·iqGrid3XXS(SB), R8

iq3xxs512loop:
	IQ_PREFETCH
	VMOVDQU 66(SI), Y3
	VPSRLD $28, Y3, Y0
	IQ_LS8
	VMOVDQA64 Z0, Z16
	VPMULTISHIFTQB Y3, Y19, Y3
	IQ_PARITY512
	VMOVDQU Y3, 64(SP)
	IQ_GRID4D_BK(2, X0)
	IQ_GRID4D_BK(6, X1)
	VINSERTI128 $1, X1, Y0, Y0
	IQ_GRID4D_BK(10, X2)
	IQ_GRID4D_BK(14, X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 64(SP), K1
	IQ_STEP512(4, Z20)
	IQ_GRID4D_BK(18, X0)
	IQ_GRID4D_BK(22, X1)
	VINSERTI128 $1, X1, Y0, Y0
	IQ_GRID4D_BK(26, X2)
	IQ_GRID4D_BK(30, X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 72(SP), K1
	IQ_STEP512(68, Z21)
	IQ_GRID4D_BK(34, X0)
	IQ_GRID4D_BK(38, X1)
	VINSERTI128 $1, X1, Y0, Y0
	IQ_GRID4D_BK(42, X2)
	IQ_GRID4D_BK(46, X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 80(SP), K1
	IQ_STEP512(132, Z22)
	IQ_GRID4D_BK(50, X0)
	IQ_GRID4D_BK(54, X1)
	VINSERTI128 $1, X1, Y0, Y0
	IQ_GRID4D_BK(58, X2)
	IQ_GRID4D_BK(62, X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 88(SP), K1
	IQ_STEP512(196, Z23)
	IQ_FINISH512(0)

	ADDQ $98, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3xxs512loop

	IQ_REDUCE512
	MOVL $0x3e800000, AX // 0.25
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ3SAVX512(w, x *byte, nb int) float32
TEXT ·iqIQ3SAVX512(SB), NOSPLIT, $32-28
	IQ_SETUP512
	IQ_PERM32
	LEAQ ·iqGrid3S(SB), R8
	MOVQ $0x0100010001000100, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iq3s512loop:
	IQ_PREFETCH
	MOVL 106(SI), AX
	PDEPQ R14, AX, AX
	VMOVQ AX, X0
	VPMOVZXBD X0, Y0
	IQ_LS8
	VMOVDQA64 Z0, Z16
	MOVBLZX 66(SI), DX
	MOVL 2(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X0)
	MOVL 6(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X1)
	VINSERTI128 $1, X1, Y0, Y0
	MOVBLZX 67(SI), DX
	MOVL 10(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X2)
	MOVL 14(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 74(SI), K1
	IQ_STEP512(4, Z20)
	MOVBLZX 68(SI), DX
	MOVL 18(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X0)
	MOVL 22(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X1)
	VINSERTI128 $1, X1, Y0, Y0
	MOVBLZX 69(SI), DX
	MOVL 26(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X2)
	MOVL 30(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 82(SI), K1
	IQ_STEP512(68, Z21)
	MOVBLZX 70(SI), DX
	MOVL 34(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X0)
	MOVL 38(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X1)
	VINSERTI128 $1, X1, Y0, Y0
	MOVBLZX 71(SI), DX
	MOVL 42(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X2)
	MOVL 46(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 90(SI), K1
	IQ_STEP512(132, Z22)
	MOVBLZX 72(SI), DX
	MOVL 50(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X0)
	MOVL 54(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X1)
	VINSERTI128 $1, X1, Y0, Y0
	MOVBLZX 73(SI), DX
	MOVL 58(SI), AX
	PDEPQ R11, AX, AX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X2)
	MOVL 62(SI), AX
	PDEPQ R11, AX, AX
	SHRL $4, DX
	PDEPQ R10, DX, BX
	ORQ BX, AX
	IQ_GRID4D_QK(X3)
	VINSERTI128 $1, X3, Y2, Y2
	VINSERTI64X4 $1, Y2, Z0, Z0
	KMOVQ 98(SI), K1
	IQ_STEP512(196, Z23)
	IQ_FINISH512(0)

	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3s512loop

	IQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ1SAVX512(w, x *byte, nb int) float32
TEXT ·iqIQ1SAVX512(SB), NOSPLIT, $0-28
	IQ_SETUP512
	IQ_PERM32
	LEAQ ·iqGrid1SU(SB), R8
	MOVQ $0x0700070007000700, R10
	MOVQ $0x00ff00ff00ff00ff, R11

iq1s512loop:
	IQ_PREFETCH
	VMOVDQU 34(SI), X3
	VPSRLW $12, X3, X0
	VPAND iqW7<>(SB), X0, X1
	VPSLLW $1, X1, X1
	VPOR iqW1<>(SB), X1, X1
	VPSRLW $3, X0, X0
	VPSLLW $1, X0, X0
	VPADDW iqW7<>(SB), X0, X0
	VPMULLW X1, X0, X0
	VPSLLW $3, X1, X1
	VPMOVZXWD X1, Y1
	VPSLLD $16, Y1, Y2
	VPOR Y2, Y1, Y1
	VMOVDQA64 Z1, Z16
	VPMOVZXWD X0, Y0
	VPSLLD $16, Y0, Y2
	VPOR Y2, Y0, Y0
	VPMADDWD 260(DI), Y0, Y0
	VPXOR Y10, Y10, Y10
	VPSUBD Y0, Y10, Y10

	MOVL 2(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 34(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 6(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 36(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(4, Z20)
	MOVL 10(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 38(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 14(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 40(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(68, Z21)
	MOVL 18(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 42(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 22(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 44(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(132, Z22)
	MOVL 26(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 46(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 30(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 48(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(196, Z23)
	IQ_FINISH512(0)

	ADDQ $50, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1s512loop

	IQ_REDUCE512
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// func iqIQ1MAVX512(w, x *byte, nb int) float32
TEXT ·iqIQ1MAVX512(SB), NOSPLIT, $0-28
	IQ_SETUP512
	IQ_PERM16
	LEAQ ·iqGrid1M(SB), R8
	MOVQ $0x0f000f000f000f00, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0007000700070007, R12
	MOVQ $0xf000f000f000f000, R13

iq1m512loop:
	IQ_PREFETCH
	MOVWLZX 48(SI), AX
	PDEPQ R12, AX, AX
	MOVWLZX 50(SI), BX
	PDEPQ R12, BX, BX
	VMOVQ AX, X0
	VPINSRQ $1, BX, X0, X0
	MOVWLZX 52(SI), AX
	PDEPQ R12, AX, AX
	MOVWLZX 54(SI), BX
	PDEPQ R12, BX, BX
	VMOVQ AX, X1
	VPINSRQ $1, BX, X1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPSLLW $1, Y0, Y0
	VPOR iqW1<>(SB), Y0, Y0
	VPMADDWD 260(DI), Y0, Y1
	VPSLLD $3, Y1, Y2
	VPADDD Y2, Y1, Y1
	VPXOR Y10, Y10, Y10
	VPSUBD Y1, Y10, Y10
	VPMOVZXWD Y0, Z16
	VPSLLD $16, Z16, Z1
	VPORD Z1, Z16, Z16

	MOVL 0(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 32(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 4(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 34(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(4, Z20)
	MOVL 8(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 36(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 12(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 38(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(68, Z21)
	MOVL 16(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 40(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 20(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 42(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(132, Z22)
	MOVL 24(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 44(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X0, Y0)
	MOVL 28(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 46(SI), BX
	PDEPQ R10, BX, BX
	ORQ BX, AX
	IQ_GRID4_QK(X2, Y2)
	VINSERTI64X4 $1, Y2, Z0, Z0
	IQ_STEP512U(196, Z23)
	VCVTDQ2PS Z10, Z10
	MOVQ 48(SI), AX
	PEXTQ R13, AX, AX
	VMOVD AX, X8
	VCVTPH2PS X8, X8
	VMULSS (DI), X8, X8
	VBROADCASTSS X8, Z8
	VFMADD231PS Z8, Z10, Z12

	ADDQ $56, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1m512loop

	IQ_REDUCE512
	MOVL $0x3e000000, AX // 0.125
	VMOVD AX, X1
	VMULSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	RET

// The panel decoders of iq_panel_amd64.go: nb super-blocks at w, each to
// iqPanelBlock bytes at dst, with the row dot's own decoding steps.

// A decoded sub-block: 64 + s*g (VPSIGNB, VPADDB as in IQ_SUB256) to
// (xo-4)*1 of the panel block at DI.
#define IQP_PUT(xo, so) \
	VPSIGNB Y1, Y0, Y0 \
	VPADDB Y15, Y0, Y0 \
	VMOVDQU Y0, (xo-4)(DI)

// Y0 = 8 dwords s_j, one 4-bit scale per 32 values, to the panel block's
// scale vectors (the word pairs of ls_j = 2s_j+1 twice per qword) and corr
// words, as IQ_LS8 forms them; Y8, Y9 = iqpDup, iqpDupHi.
#define IQP_LS8 \
	VPADDD Y0, Y0, Y0 \
	VPADDD Y13, Y0, Y0 \
	VPSLLD $16, Y0, Y1 \
	VPOR Y1, Y0, Y0 \
	VMOVDQU Y0, 320(DI) \
	VPERMD Y0, Y8, Y1 \
	VMOVDQU Y1, 256(DI) \
	VPERMD Y0, Y9, Y1 \
	VMOVDQU Y1, 288(DI)

// X0 = 16 bytes s_g, one 4-bit scale per 16 values, to the panel block's
// corr words (ls_g = 2s_g+1) and scale vectors (the word pairs of groups
// 0-7 and 8-15), as IQ_LS16 forms them.
#define IQP_LS16 \
	VPMOVZXBW X0, Y1 \
	VPSLLW $1, Y1, Y1 \
	VPOR iqW1<>(SB), Y1, Y1 \
	VMOVDQU Y1, 320(DI) \
	VPMOVZXBD X0, Y1 \
	VPSRLDQ $8, X0, X2 \
	VPMOVZXBD X2, Y2 \
	VPADDD Y1, Y1, Y1 \
	VPADDD Y13, Y1, Y1 \
	VPSLLD $16, Y1, Y3 \
	VPOR Y3, Y1, Y1 \
	VMOVDQU Y1, 256(DI) \
	VPADDD Y2, Y2, Y2 \
	VPADDD Y13, Y2, Y2 \
	VPSLLD $16, Y2, Y3 \
	VPOR Y3, Y2, Y2 \
	VMOVDQU Y2, 288(DI)

// IQ_LS16_NIB for the panel.
#define IQP_LS16_NIB(so) \
	MOVL so(SI), AX \
	PDEPQ R14, AX, AX \
	MOVL so+4(SI), BX \
	PDEPQ R14, BX, BX \
	VMOVQ AX, X0 \
	VPINSRQ $1, BX, X0, X0 \
	IQP_LS16

// The block's f16 scale at 0(SI), as IQ_FINISH256 converts it.
#define IQP_D \
	VPBROADCASTW 0(SI), X3 \
	VCVTPH2PS X3, X3 \
	VMOVSS X3, 352(DI)

DATA iqpDup<>+0(SB)/8, $0x0000000000000000
DATA iqpDup<>+8(SB)/8, $0x0000000100000001
DATA iqpDup<>+16(SB)/8, $0x0000000200000002
DATA iqpDup<>+24(SB)/8, $0x0000000300000003
GLOBL iqpDup<>(SB), RODATA|NOPTR, $32
DATA iqpDupHi<>+0(SB)/8, $0x0000000400000004
DATA iqpDupHi<>+8(SB)/8, $0x0000000500000005
DATA iqpDupHi<>+16(SB)/8, $0x0000000600000006
DATA iqpDupHi<>+24(SB)/8, $0x0000000700000007
GLOBL iqpDupHi<>(SB), RODATA|NOPTR, $32

#define IQP_SETUP \
	MOVQ dst+0(FP), DI \
	MOVQ w+8(FP), SI \
	MOVQ nb+16(FP), CX \
	VMOVDQU iqB64<>(SB), Y15 \
	VMOVDQU iqpDup<>(SB), Y8 \
	VMOVDQU iqpDupHi<>(SB), Y9 \
	MOVL $1, AX \
	VMOVD AX, X13 \
	VPBROADCASTD X13, Y13

// func iqPanelDecIQ3XXSAVX2(dst, w *byte, nb int)
TEXT ·iqPanelDecIQ3XXSAVX2(SB), NOSPLIT, $0-24
	IQP_SETUP
	LEAQ ·iqGrid3XXS(SB), R8
	LEAQ ·iqSignPM(SB), R9
	MOVL $0x700, R10
	MOVL $0x707, R11
	MOVL $0x70e, R12
	MOVL $0x715, R13

iqpdec3xxs:
	VMOVDQU 66(SI), Y0
	VPSRLD $28, Y0, Y0
	IQP_LS8
	IQP_D
	IQ3XXS_SUBS(IQP_PUT)
	ADDQ $98, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  iqpdec3xxs
	VZEROUPPER
	RET

// func iqPanelDecIQ2XXSAVX2(dst, w *byte, nb int)
TEXT ·iqPanelDecIQ2XXSAVX2(SB), NOSPLIT, $0-24
	IQP_SETUP
	VMOVDQU iqScalePerm<>(SB), Y14
	LEAQ ·iqGrid2XXS(SB), R8
	LEAQ ·iqSignPM(SB), R9
	MOVL $0x700, R10
	MOVL $0x707, R11
	MOVL $0x70e, R12
	MOVL $0x715, R13

iqpdeciq2xxs:
	VMOVDQU 2(SI), Y0
	VMOVDQU 34(SI), Y1
	VPSRLQ $60, Y0, Y0
	VPSRLQ $60, Y1, Y1
	VPSLLQ $32, Y1, Y1
	VPOR Y1, Y0, Y0
	VPERMD Y0, Y14, Y0
	IQP_LS8
	IQP_D
	IQ2XXS_SUBS(IQP_PUT)
	ADDQ $66, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  iqpdeciq2xxs
	VZEROUPPER
	RET

// func iqPanelDecIQ2XSAVX2(dst, w *byte, nb int)
TEXT ·iqPanelDecIQ2XSAVX2(SB), NOSPLIT, $0-24
	IQP_SETUP
	VMOVDQU iqLanePerm<>(SB), Y11
	LEAQ ·iqGrid2XS(SB), R8
	LEAQ ·iqSignPM(SB), R9
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iqpdeciq2xs:
	IQP_LS16_NIB(66)
	IQP_D
	IQ2XS_SUBS(IQP_PUT)
	ADDQ $74, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  iqpdeciq2xs
	VZEROUPPER
	RET

// func iqPanelDecIQ2SAVX2(dst, w *byte, nb int)
TEXT ·iqPanelDecIQ2SAVX2(SB), NOSPLIT, $0-24
	IQP_SETUP
	VMOVDQU iqLanePerm<>(SB), Y11
	VMOVDQU iqSignRep<>(SB), Y7
	VMOVDQU iqBitSel<>(SB), Y6
	VMOVDQU iqB01<>(SB), Y5
	LEAQ ·iqGrid2S(SB), R8
	MOVQ $0x0300030003000300, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iqpdeciq2s:
	IQP_LS16_NIB(74)
	IQP_D
	IQ2S_SUBS(IQP_PUT)
	ADDQ $82, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  iqpdeciq2s
	VZEROUPPER
	RET

// func iqPanelDecIQ3SAVX2(dst, w *byte, nb int)
TEXT ·iqPanelDecIQ3SAVX2(SB), NOSPLIT, $0-24
	IQP_SETUP
	VMOVDQU iqSignRep<>(SB), Y7
	VMOVDQU iqBitSel<>(SB), Y6
	VMOVDQU iqB01<>(SB), Y5
	LEAQ ·iqGrid3S(SB), R8
	MOVQ $0x0100010001000100, R10
	MOVQ $0x00ff00ff00ff00ff, R11
	MOVQ $0x0f0f0f0f0f0f0f0f, R14

iqpdeciq3s:
	MOVL 106(SI), AX
	PDEPQ R14, AX, AX
	VMOVQ AX, X0
	VPMOVZXBD X0, Y0
	IQP_LS8
	IQP_D
	IQ3S_SUBS(IQP_PUT)
	ADDQ $110, SI
	ADDQ $384, DI
	DECQ CX
	JNZ  iqpdeciq3s
	VZEROUPPER
	RET
