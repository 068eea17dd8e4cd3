#include "textflag.h"

// The four-column panel kernel of iq_panel_amd64.go. Every operation on a
// column is the one the grid formats' row dots (iq_amd64.s: IQ_LS8 or
// IQ_LS16, IQ_SUB256 or IQ_SUB256L, IQ_FINISH256, IQ_REDUCE256) apply to
// the same values, so that each column gets the row dot's bits.

// One 32-value sub-block ib of the panel block at SI: its weights and scale
// vector once, multiplied into the four columns' lane sums Y0-Y3.
#define IQP_SUB(ib) \
	VMOVDQU (32*ib)(SI), Y8 \
	VPBROADCASTQ (256+8*ib)(SI), Y9 \
	VPERMD Y9, Y11, Y9 \
	VPMADDUBSW (4+32*ib)(DI), Y8, Y10 \
	VPMADDWD Y9, Y10, Y10 \
	VPADDD Y10, Y0, Y0 \
	VPMADDUBSW (4+32*ib)(DI)(R8*1), Y8, Y10 \
	VPMADDWD Y9, Y10, Y10 \
	VPADDD Y10, Y1, Y1 \
	VPMADDUBSW (4+32*ib)(DI)(R8*2), Y8, Y10 \
	VPMADDWD Y9, Y10, Y10 \
	VPADDD Y10, Y2, Y2 \
	VPMADDUBSW (4+32*ib)(DI)(R9*1), Y8, Y10 \
	VPMADDWD Y9, Y10, Y10 \
	VPADDD Y10, Y3, Y3

// A column's lane sums start at -64 * (scale words . bsums), from the
// corr words in Y9.
#define IQP_START(acc, xa) \
	VPMADDWD 260 xa, Y9, Y10 \
	VPSLLD $6, Y10, Y10 \
	VPSUBD Y10, Y15, acc

// A column's float lanes facc += float(acc) * (d in Y8 * the column's d).
#define IQP_FINISH(acc, facc, xa) \
	VCVTDQ2PS acc, acc \
	VBROADCASTSS xa, Y9 \
	VMULPS Y9, Y8, Y10 \
	VFMADD231PS Y10, acc, facc

// The horizontal sum of facc's lanes times k (X14), stored at (DX).
#define IQP_STORE(facc, xfacc) \
	VEXTRACTF128 $1, facc, X12 \
	VADDPS X12, xfacc, X13 \
	VPERMILPS $0x0e, X13, X12 \
	VADDPS X12, X13, X13 \
	VMOVSHDUP X13, X12 \
	VADDSS X12, X13, X13 \
	VMULSS X14, X13, X13 \
	MOVSS X13, (DX) \
	ADDQ R10, DX

DATA iqpLanePerm<>+0(SB)/8, $0x0000000000000000
DATA iqpLanePerm<>+8(SB)/8, $0x0000000000000000
DATA iqpLanePerm<>+16(SB)/8, $0x0000000100000001
DATA iqpLanePerm<>+24(SB)/8, $0x0000000100000001
GLOBL iqpLanePerm<>(SB), RODATA|NOPTR, $32

// func iqPanelDot4(w *byte, nb int, x *byte, ldx int, dst *float32, ldd int, k float32)
TEXT ·iqPanelDot4(SB), NOSPLIT, $0-52
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ dst+32(FP), DX
	MOVQ ldd+40(FP), R10
	SHLQ $2, R10
	VMOVSS k+48(FP), X14
	VMOVDQU iqpLanePerm<>(SB), Y11
	VPXOR Y15, Y15, Y15
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

iqp4loop:
	VMOVDQU 320(SI), Y9
	IQP_START(Y0, (DI))
	IQP_START(Y1, (DI)(R8*1))
	IQP_START(Y2, (DI)(R8*2))
	IQP_START(Y3, (DI)(R9*1))
	IQP_SUB(0)
	IQP_SUB(1)
	IQP_SUB(2)
	IQP_SUB(3)
	IQP_SUB(4)
	IQP_SUB(5)
	IQP_SUB(6)
	IQP_SUB(7)
	VBROADCASTSS 352(SI), Y8
	IQP_FINISH(Y0, Y4, (DI))
	IQP_FINISH(Y1, Y5, (DI)(R8*1))
	IQP_FINISH(Y2, Y6, (DI)(R8*2))
	IQP_FINISH(Y3, Y7, (DI)(R9*1))
	ADDQ $384, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iqp4loop

	IQP_STORE(Y4, X4)
	IQP_STORE(Y5, X5)
	IQP_STORE(Y6, X6)
	IQP_STORE(Y7, X7)
	VZEROUPPER
	RET
