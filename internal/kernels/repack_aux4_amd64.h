// The frame of the four-vector x8 kernels that take each vector's
// per-block quantities from aux (Q4_0's and Q5_0's: dot8x4a), shared by
// repack_q404_amd64.s and repack_q50_amd64.s. Arguments: (nb int, w, x
// *byte, ldx int, aux *byte, dst *float32, ldd int). Registers: CX blocks
// left, SI the group's block, R9-R12 the four vectors' blocks, R8/AX
// their aux (v0 at R8, v1 at R8+DI, v2 at AX, v3 at AX+DI: each vector's
// aux is 8*nb bytes after the one before), DX/R13 the destination and its
// stride in bytes; Y4-Y7 the float sums and Y8-Y11 the integer ones,
// zeroed.
#define AUX4ENTER \
	MOVQ nb+0(FP), CX \
	MOVQ w+8(FP), SI \
	MOVQ x+16(FP), R9 \
	MOVQ ldx+24(FP), BX \
	MOVQ aux+32(FP), R8 \
	MOVQ dst+40(FP), DX \
	MOVQ ldd+48(FP), R13 \
	SHLQ $2, R13 \
	LEAQ (R9)(BX*1), R10 \
	LEAQ (R10)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12 \
	MOVQ CX, DI \
	SHLQ $3, DI \
	LEAQ (R8)(DI*2), AX \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VPXOR  Y8, Y8, Y8 \
	VPXOR  Y9, Y9, Y9 \
	VPXOR  Y10, Y10, Y10 \
	VPXOR  Y11, Y11, Y11

// AUX4END is a block's end for one vector: its exact sum i less the
// offset times sum(x) (at aux a), times d*dx (the rows' d in register d,
// dx at aux adx), added to its float sums acc.
#define AUX4END(a, adx, d, i, acc) \
	VPBROADCASTD a, Y0 \
	VPSUBD       Y0, i, i \
	VCVTDQ2PS    i, i \
	VBROADCASTSS adx, Y2 \
	VMULPS       Y2, d, Y2 \
	VMULPS       Y2, i, i \
	VADDPS       i, acc, acc \
	VPXOR        i, i, i

// AUX4ENDS ends the block for the four vectors.
#define AUX4ENDS(d) \
	AUX4END(0(R8), 4(R8), d, Y8, Y4) \
	AUX4END(0(R8)(DI*1), 4(R8)(DI*1), d, Y9, Y5) \
	AUX4END(0(AX), 4(AX), d, Y10, Y6) \
	AUX4END(0(AX)(DI*1), 4(AX)(DI*1), d, Y11, Y7)

// AUX4NEXT steps to the next block (wb bytes of the group's).
#define AUX4NEXT(wb) \
	ADDQ $wb, SI \
	ADDQ $34, R9 \
	ADDQ $34, R10 \
	ADDQ $34, R11 \
	ADDQ $34, R12 \
	ADDQ $8, R8 \
	ADDQ $8, AX

// AUX4STORE writes the four vectors' float sums.
#define AUX4STORE \
	VMOVUPS Y4, (DX) \
	ADDQ    R13, DX \
	VMOVUPS Y5, (DX) \
	ADDQ    R13, DX \
	VMOVUPS Y6, (DX) \
	ADDQ    R13, DX \
	VMOVUPS Y7, (DX) \
	VZEROUPPER
