#include "textflag.h"

// K-quant and IQ4_XS x Q8_K dot products for amd64: AVX-512 (BW, VL, VNNI)
// and AVX2 versions, one super-block (256 values) per loop iteration.
//
// The integer work per super-block is exact. VPMADDUBSW multiplies unsigned
// weight codes (at most 63; the signed formats are shifted up, Q3_K by 4,
// Q6_K by 32, and the shift is taken back out through the activations'
// bsums) by signed activations (any int8, -128 included) into int16 pairs
// that cannot saturate (63*128*2 < 32768), and VPMADDWD/VPDPWSSD apply the
// sub-block scales in int32. IQ4_XS is the exception, see its kernels. Only
// the per-block combination with d (and dmin) is in float32, spread over
// vector lanes, so results differ from the reference in the last bits only.
//
// Code layouts: a 32-byte group of 4-bit codes holds two 32-value
// sub-blocks (low nibbles, then high nibbles), so broadcasting it to both
// zmm halves and shifting the upper half by 4 (masked VPSRLW) lines the codes
// up with 64 contiguous activations; the 2-bit formats do the same with
// shifts of 2. Scales reach the lanes through VPERMW (AVX-512) or VPSHUFB
// (AVX2) from the block's scale words.

DATA kqQ4KPerm<>+0(SB)/8, $0x0000000000000000
DATA kqQ4KPerm<>+8(SB)/8, $0x0000000000000000
DATA kqQ4KPerm<>+16(SB)/8, $0x0000000000000000
DATA kqQ4KPerm<>+24(SB)/8, $0x0000000000000000
DATA kqQ4KPerm<>+32(SB)/8, $0x0002000200020002
DATA kqQ4KPerm<>+40(SB)/8, $0x0002000200020002
DATA kqQ4KPerm<>+48(SB)/8, $0x0002000200020002
DATA kqQ4KPerm<>+56(SB)/8, $0x0002000200020002
DATA kqQ4KPerm<>+64(SB)/8, $0x0001000100010001
DATA kqQ4KPerm<>+72(SB)/8, $0x0001000100010001
DATA kqQ4KPerm<>+80(SB)/8, $0x0001000100010001
DATA kqQ4KPerm<>+88(SB)/8, $0x0001000100010001
DATA kqQ4KPerm<>+96(SB)/8, $0x0003000300030003
DATA kqQ4KPerm<>+104(SB)/8, $0x0003000300030003
DATA kqQ4KPerm<>+112(SB)/8, $0x0003000300030003
DATA kqQ4KPerm<>+120(SB)/8, $0x0003000300030003
DATA kqQ4KPerm<>+128(SB)/8, $0x0004000400040004
DATA kqQ4KPerm<>+136(SB)/8, $0x0004000400040004
DATA kqQ4KPerm<>+144(SB)/8, $0x0004000400040004
DATA kqQ4KPerm<>+152(SB)/8, $0x0004000400040004
DATA kqQ4KPerm<>+160(SB)/8, $0x0006000600060006
DATA kqQ4KPerm<>+168(SB)/8, $0x0006000600060006
DATA kqQ4KPerm<>+176(SB)/8, $0x0006000600060006
DATA kqQ4KPerm<>+184(SB)/8, $0x0006000600060006
DATA kqQ4KPerm<>+192(SB)/8, $0x0005000500050005
DATA kqQ4KPerm<>+200(SB)/8, $0x0005000500050005
DATA kqQ4KPerm<>+208(SB)/8, $0x0005000500050005
DATA kqQ4KPerm<>+216(SB)/8, $0x0005000500050005
DATA kqQ4KPerm<>+224(SB)/8, $0x0007000700070007
DATA kqQ4KPerm<>+232(SB)/8, $0x0007000700070007
DATA kqQ4KPerm<>+240(SB)/8, $0x0007000700070007
DATA kqQ4KPerm<>+248(SB)/8, $0x0007000700070007
GLOBL kqQ4KPerm<>(SB), RODATA|NOPTR, $256
DATA kqMinDup<>+0(SB)/8, $0x0009000900080008
DATA kqMinDup<>+8(SB)/8, $0x000b000b000a000a
DATA kqMinDup<>+16(SB)/8, $0x000d000d000c000c
DATA kqMinDup<>+24(SB)/8, $0x000f000f000e000e
GLOBL kqMinDup<>(SB), RODATA|NOPTR, $32
DATA kqQ6KPerm<>+0(SB)/8, $0x0000000000000000
DATA kqQ6KPerm<>+8(SB)/8, $0x0000000000000000
DATA kqQ6KPerm<>+16(SB)/8, $0x0001000100010001
DATA kqQ6KPerm<>+24(SB)/8, $0x0001000100010001
DATA kqQ6KPerm<>+32(SB)/8, $0x0002000200020002
DATA kqQ6KPerm<>+40(SB)/8, $0x0002000200020002
DATA kqQ6KPerm<>+48(SB)/8, $0x0003000300030003
DATA kqQ6KPerm<>+56(SB)/8, $0x0003000300030003
DATA kqQ6KPerm<>+64(SB)/8, $0x0004000400040004
DATA kqQ6KPerm<>+72(SB)/8, $0x0004000400040004
DATA kqQ6KPerm<>+80(SB)/8, $0x0005000500050005
DATA kqQ6KPerm<>+88(SB)/8, $0x0005000500050005
DATA kqQ6KPerm<>+96(SB)/8, $0x0006000600060006
DATA kqQ6KPerm<>+104(SB)/8, $0x0006000600060006
DATA kqQ6KPerm<>+112(SB)/8, $0x0007000700070007
DATA kqQ6KPerm<>+120(SB)/8, $0x0007000700070007
DATA kqQ6KPerm<>+128(SB)/8, $0x0008000800080008
DATA kqQ6KPerm<>+136(SB)/8, $0x0008000800080008
DATA kqQ6KPerm<>+144(SB)/8, $0x0009000900090009
DATA kqQ6KPerm<>+152(SB)/8, $0x0009000900090009
DATA kqQ6KPerm<>+160(SB)/8, $0x000a000a000a000a
DATA kqQ6KPerm<>+168(SB)/8, $0x000a000a000a000a
DATA kqQ6KPerm<>+176(SB)/8, $0x000b000b000b000b
DATA kqQ6KPerm<>+184(SB)/8, $0x000b000b000b000b
DATA kqQ6KPerm<>+192(SB)/8, $0x000c000c000c000c
DATA kqQ6KPerm<>+200(SB)/8, $0x000c000c000c000c
DATA kqQ6KPerm<>+208(SB)/8, $0x000d000d000d000d
DATA kqQ6KPerm<>+216(SB)/8, $0x000d000d000d000d
DATA kqQ6KPerm<>+224(SB)/8, $0x000e000e000e000e
DATA kqQ6KPerm<>+232(SB)/8, $0x000e000e000e000e
DATA kqQ6KPerm<>+240(SB)/8, $0x000f000f000f000f
DATA kqQ6KPerm<>+248(SB)/8, $0x000f000f000f000f
GLOBL kqQ6KPerm<>(SB), RODATA|NOPTR, $256
DATA kqShufW<>+0(SB)/8, $0x0100010001000100
DATA kqShufW<>+8(SB)/8, $0x0100010001000100
DATA kqShufW<>+16(SB)/8, $0x0100010001000100
DATA kqShufW<>+24(SB)/8, $0x0100010001000100
DATA kqShufW<>+32(SB)/8, $0x0302030203020302
DATA kqShufW<>+40(SB)/8, $0x0302030203020302
DATA kqShufW<>+48(SB)/8, $0x0302030203020302
DATA kqShufW<>+56(SB)/8, $0x0302030203020302
DATA kqShufW<>+64(SB)/8, $0x0504050405040504
DATA kqShufW<>+72(SB)/8, $0x0504050405040504
DATA kqShufW<>+80(SB)/8, $0x0504050405040504
DATA kqShufW<>+88(SB)/8, $0x0504050405040504
DATA kqShufW<>+96(SB)/8, $0x0706070607060706
DATA kqShufW<>+104(SB)/8, $0x0706070607060706
DATA kqShufW<>+112(SB)/8, $0x0706070607060706
DATA kqShufW<>+120(SB)/8, $0x0706070607060706
DATA kqShufW<>+128(SB)/8, $0x0908090809080908
DATA kqShufW<>+136(SB)/8, $0x0908090809080908
DATA kqShufW<>+144(SB)/8, $0x0908090809080908
DATA kqShufW<>+152(SB)/8, $0x0908090809080908
DATA kqShufW<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqShufW<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqShufW<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqShufW<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqShufW<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqShufW<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqShufW<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqShufW<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqShufW<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqShufW<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqShufW<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqShufW<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kqShufW<>(SB), RODATA|NOPTR, $256
DATA kqMinShuf<>+0(SB)/8, $0x0302030201000100
DATA kqMinShuf<>+8(SB)/8, $0x0706070605040504
DATA kqMinShuf<>+16(SB)/8, $0x0b0a0b0a09080908
DATA kqMinShuf<>+24(SB)/8, $0x0f0e0f0e0d0c0d0c
GLOBL kqMinShuf<>(SB), RODATA|NOPTR, $32
DATA kqQ6KShuf<>+0(SB)/8, $0x0000000000000000
DATA kqQ6KShuf<>+8(SB)/8, $0x0101010101010101
DATA kqQ6KShuf<>+16(SB)/8, $0x0202020202020202
DATA kqQ6KShuf<>+24(SB)/8, $0x0303030303030303
DATA kqQ6KShuf<>+32(SB)/8, $0x0404040404040404
DATA kqQ6KShuf<>+40(SB)/8, $0x0505050505050505
DATA kqQ6KShuf<>+48(SB)/8, $0x0606060606060606
DATA kqQ6KShuf<>+56(SB)/8, $0x0707070707070707
DATA kqQ6KShuf<>+64(SB)/8, $0x0808080808080808
DATA kqQ6KShuf<>+72(SB)/8, $0x0909090909090909
DATA kqQ6KShuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA kqQ6KShuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA kqQ6KShuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA kqQ6KShuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA kqQ6KShuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA kqQ6KShuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqQ6KShuf<>(SB), RODATA|NOPTR, $128
DATA kqNib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqNib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqNib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqNib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqNib<>(SB), RODATA|NOPTR, $32
DATA kqB30<>+0(SB)/8, $0x3030303030303030
DATA kqB30<>+8(SB)/8, $0x3030303030303030
DATA kqB30<>+16(SB)/8, $0x3030303030303030
DATA kqB30<>+24(SB)/8, $0x3030303030303030
GLOBL kqB30<>(SB), RODATA|NOPTR, $32
DATA kqB10<>+0(SB)/8, $0x1010101010101010
DATA kqB10<>+8(SB)/8, $0x1010101010101010
DATA kqB10<>+16(SB)/8, $0x1010101010101010
DATA kqB10<>+24(SB)/8, $0x1010101010101010
GLOBL kqB10<>(SB), RODATA|NOPTR, $32

DATA kqQ4KPerm2<>+0(SB)/8, $0x0000000000000000
DATA kqQ4KPerm2<>+8(SB)/8, $0x0000000000000000
DATA kqQ4KPerm2<>+16(SB)/8, $0x0000000000000000
DATA kqQ4KPerm2<>+24(SB)/8, $0x0000000000000000
DATA kqQ4KPerm2<>+32(SB)/8, $0x0001000100010001
DATA kqQ4KPerm2<>+40(SB)/8, $0x0001000100010001
DATA kqQ4KPerm2<>+48(SB)/8, $0x0001000100010001
DATA kqQ4KPerm2<>+56(SB)/8, $0x0001000100010001
DATA kqQ4KPerm2<>+64(SB)/8, $0x0002000200020002
DATA kqQ4KPerm2<>+72(SB)/8, $0x0002000200020002
DATA kqQ4KPerm2<>+80(SB)/8, $0x0002000200020002
DATA kqQ4KPerm2<>+88(SB)/8, $0x0002000200020002
DATA kqQ4KPerm2<>+96(SB)/8, $0x0003000300030003
DATA kqQ4KPerm2<>+104(SB)/8, $0x0003000300030003
DATA kqQ4KPerm2<>+112(SB)/8, $0x0003000300030003
DATA kqQ4KPerm2<>+120(SB)/8, $0x0003000300030003
DATA kqQ4KPerm2<>+128(SB)/8, $0x0004000400040004
DATA kqQ4KPerm2<>+136(SB)/8, $0x0004000400040004
DATA kqQ4KPerm2<>+144(SB)/8, $0x0004000400040004
DATA kqQ4KPerm2<>+152(SB)/8, $0x0004000400040004
DATA kqQ4KPerm2<>+160(SB)/8, $0x0005000500050005
DATA kqQ4KPerm2<>+168(SB)/8, $0x0005000500050005
DATA kqQ4KPerm2<>+176(SB)/8, $0x0005000500050005
DATA kqQ4KPerm2<>+184(SB)/8, $0x0005000500050005
DATA kqQ4KPerm2<>+192(SB)/8, $0x0006000600060006
DATA kqQ4KPerm2<>+200(SB)/8, $0x0006000600060006
DATA kqQ4KPerm2<>+208(SB)/8, $0x0006000600060006
DATA kqQ4KPerm2<>+216(SB)/8, $0x0006000600060006
DATA kqQ4KPerm2<>+224(SB)/8, $0x0007000700070007
DATA kqQ4KPerm2<>+232(SB)/8, $0x0007000700070007
DATA kqQ4KPerm2<>+240(SB)/8, $0x0007000700070007
DATA kqQ4KPerm2<>+248(SB)/8, $0x0007000700070007
GLOBL kqQ4KPerm2<>(SB), RODATA|NOPTR, $256

// Software prefetch of the weights, where kqPrefetchOn says so; skip is
// a label of the caller's, after the prefetches. Streaming a big matrix,
// the hardware prefetchers alone left a thread at about half of the plain
// read bandwidth on Sapphire Rapids (the kernel takes ~15 cycles per
// block, so few misses are in flight); with T0 lines 2 KiB ahead (3 or 4
// lines cover a block's advance) and one T2 touch 8 KiB ahead, which
// mostly starts the page walk for the next 4 KiB page early, it reached
// ~85 % (4 KiB pages) and ~93 % (transparent huge pages) of it. On Zen 4
// the same prefetches cost a third of the stream (Q4_K at one thread,
// 128 MiB: ~12.5 GB/s with them, ~17.5 without), and no distance tried
// (2 or 8 KiB, T0 or T2 alone) helped, so there they are skipped; the
// compare and the predicted branch cost about nothing.
#define KQ_PREFETCH3(skip) \
	CMPB ·kqPrefetchOn(SB), $0 \
	JEQ skip \
	PREFETCHT0 2048(SI) \
	PREFETCHT0 2112(SI) \
	PREFETCHT0 2176(SI) \
	PREFETCHT2 8192(SI) \
skip:

#define KQ_PREFETCH4(skip) \
	CMPB ·kqPrefetchOn(SB), $0 \
	JEQ skip \
	PREFETCHT0 2048(SI) \
	PREFETCHT0 2112(SI) \
	PREFETCHT0 2176(SI) \
	PREFETCHT0 2240(SI) \
	PREFETCHT2 8192(SI) \
skip:

// func cpuidVendor() (ebx, edx, ecx uint32)
TEXT ·cpuidVendor(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, ebx+0(FP)
	MOVL DX, edx+4(FP)
	MOVL CX, ecx+8(FP)
	RET

// IQ4_NL codebook + 128 (unsigned, for VPDPBUSD).
DATA kqIQ4TabU<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA kqIQ4TabU<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL kqIQ4TabU<>(SB), RODATA|NOPTR, $16

// VPERMPS indices spreading the sub-block scales 4h..4h+3 over four lanes
// each, for the two halves of an IQ4_XS block.
DATA kqIQ4Perm4<>+0(SB)/8, $0x0000000000000000
DATA kqIQ4Perm4<>+8(SB)/8, $0x0000000000000000
DATA kqIQ4Perm4<>+16(SB)/8, $0x0000000100000001
DATA kqIQ4Perm4<>+24(SB)/8, $0x0000000100000001
DATA kqIQ4Perm4<>+32(SB)/8, $0x0000000200000002
DATA kqIQ4Perm4<>+40(SB)/8, $0x0000000200000002
DATA kqIQ4Perm4<>+48(SB)/8, $0x0000000300000003
DATA kqIQ4Perm4<>+56(SB)/8, $0x0000000300000003
DATA kqIQ4Perm4<>+64(SB)/8, $0x0000000400000004
DATA kqIQ4Perm4<>+72(SB)/8, $0x0000000400000004
DATA kqIQ4Perm4<>+80(SB)/8, $0x0000000500000005
DATA kqIQ4Perm4<>+88(SB)/8, $0x0000000500000005
DATA kqIQ4Perm4<>+96(SB)/8, $0x0000000600000006
DATA kqIQ4Perm4<>+104(SB)/8, $0x0000000600000006
DATA kqIQ4Perm4<>+112(SB)/8, $0x0000000700000007
DATA kqIQ4Perm4<>+120(SB)/8, $0x0000000700000007
GLOBL kqIQ4Perm4<>(SB), RODATA|NOPTR, $128

DATA kqB03<>+0(SB)/8, $0x0303030303030303
DATA kqB03<>+8(SB)/8, $0x0303030303030303
DATA kqB03<>+16(SB)/8, $0x0303030303030303
DATA kqB03<>+24(SB)/8, $0x0303030303030303
GLOBL kqB03<>(SB), RODATA|NOPTR, $32
DATA kqB04<>+0(SB)/8, $0x0404040404040404
DATA kqB04<>+8(SB)/8, $0x0404040404040404
DATA kqB04<>+16(SB)/8, $0x0404040404040404
DATA kqB04<>+24(SB)/8, $0x0404040404040404
GLOBL kqB04<>(SB), RODATA|NOPTR, $32
DATA kqB20<>+0(SB)/8, $0x2020202020202020
DATA kqB20<>+8(SB)/8, $0x2020202020202020
DATA kqB20<>+16(SB)/8, $0x2020202020202020
DATA kqB20<>+24(SB)/8, $0x2020202020202020
GLOBL kqB20<>(SB), RODATA|NOPTR, $32
DATA kqIQ4Tab<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA kqIQ4Tab<>+8(SB)/8, $0x7159453526190d01
GLOBL kqIQ4Tab<>(SB), RODATA|NOPTR, $16

// Q4_K/Q5_K scales: the 12 packed bytes at off(SI) become 8 scale bytes and
// 8 min bytes in X0 (scales in bytes 0-7, mins in 8-15). 64-bit scalar
// arithmetic handles two 32-bit halves at once: low6 = [sc0-3, m0-3],
// hi = [sc4-7, m4-7]. Needs R11 = 0x3f.., R12 = 0x03.., R13 = 0x0f...
#define KQ_SCALES_K4(off) \
	MOVQ (off)(SI), R8 \
	MOVL (off+8)(SI), R9 \
	MOVQ R8, R10 \
	ANDQ R11, R10 \
	SHRQ $6, R8 \
	ANDQ R12, R8 \
	SHLQ $4, R8 \
	MOVQ R9, DX \
	SHRQ $4, DX \
	SHLQ $32, DX \
	ORQ DX, R9 \
	ANDQ R13, R9 \
	ORQ R8, R9 \
	VMOVQ R10, X0 \
	VMOVQ R9, X1 \
	VPUNPCKLDQ X1, X0, X0

// Vector unpacking of the Q4_K/Q5_K 6-bit scales (see KQ_SCALES_K4V).
DATA kqK4Shuf<>+0(SB)/8, $0x0b0a090803020100
DATA kqK4Shuf<>+8(SB)/8, $0x0b0a090807060504
GLOBL kqK4Shuf<>(SB), RODATA|NOPTR, $16
DATA kqK4Srl<>+0(SB)/8, $0x0000000000000000
DATA kqK4Srl<>+8(SB)/8, $0x0000000400000000
GLOBL kqK4Srl<>(SB), RODATA|NOPTR, $16
DATA kqK4Lo<>+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA kqK4Lo<>+8(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL kqK4Lo<>(SB), RODATA|NOPTR, $16
DATA kqK4Hi<>+0(SB)/8, $0x3030303000000000
DATA kqK4Hi<>+8(SB)/8, $0x3030303000000000
GLOBL kqK4Hi<>(SB), RODATA|NOPTR, $16

// The same unpacking in vector registers, for the AVX-512 kernels where
// scalar-to-vector moves compete with the multiplies for ports 0 and 5.
// With b = the 12 bytes at off(SI), A = [b0-3, b8-11, b4-7, b8-11]:
// scales 0-3 = b0-3 & 63, mins 0-3 = b4-7 & 63, scales 4-7 = (b8-11 & 15)
// | (b0-3 >> 6) << 4, mins 4-7 = (b8-11 >> 4) | (b4-7 >> 6) << 4; the top
// two bits come from A shifted left 30 within each qword (dword 2i into
// 2i+1, moved down 2 so bits 6-7 land on 4-5). X0 gets scales 0-7 then mins
// 0-7. Needs X16-X19 = kqK4Shuf, kqK4Srl, kqK4Lo, kqK4Hi.
#define KQ_SCALES_K4V(off) \
	VMOVDQU off(SI), X0 \
	VPSHUFB X16, X0, X0 \
	VPSLLQ $30, X0, X1 \
	VPSRLVD X17, X0, X0 \
	VPANDD X18, X0, X0 \
	VPTERNLOGD $0xf8, X19, X1, X0

#define KQ_K4V_CONSTS \
	VMOVDQU64 kqK4Shuf<>(SB), X16 \
	VMOVDQU64 kqK4Srl<>(SB), X17 \
	VMOVDQU64 kqK4Lo<>(SB), X18 \
	VMOVDQU64 kqK4Hi<>(SB), X19

#define KQ_MASKS \
	MOVQ $0x3f3f3f3f3f3f3f3f, R11 \
	MOVQ $0x0303030303030303, R12 \
	MOVQ $0x0f0f0f0f0f0f0f0f, R13

// Horizontal sum of the float lanes of Z29 and Y30 into X0; KQ_HSUM512
// leaves the upper register halves (a rows kernel's constants) alone.
#define KQ_HSUM512 \
	VEXTRACTF64X4 $1, Z29, Y0 \
	VADDPS Y0, Y29, Y0 \
	VADDPS Y30, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0x0e, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0

#define KQ_REDUCE512 \
	KQ_HSUM512 \
	VZEROUPPER

// d*yd broadcast into Z8 and dmin*yd into Y9, for blocks that start with
// f16 d, f16 dmin.
#define KQ_DMIN512 \
	VCVTPH2PS (SI), X6 \
	VBROADCASTSS (DI), X7 \
	VMULPS X7, X6, X6 \
	VBROADCASTSS X6, Z8 \
	VMOVSHDUP X6, X9 \
	VBROADCASTSS X9, Y9

// One 64-byte group of 4-bit codes (low nibbles in Z0, high in Z1) against
// activations at x offsets lo0/lo1 (low) and hi0/hi1 (high); sub-block
// scales from Z4 through the VPERMW indices plo/phi, summed into Z12.
#define KQ_K4_MUL(lo0, lo1, hi0, hi1, plo, phi) \
	VMOVDQU lo0(DI), Y2 \
	VINSERTI64X4 $1, lo1(DI), Z2, Z2 \
	VMOVDQU hi0(DI), Y3 \
	VINSERTI64X4 $1, hi1(DI), Z3, Z3 \
	VPMADDUBSW Z2, Z0, Z0 \
	VPMADDUBSW Z3, Z1, Z1 \
	VPERMW Z4, plo, Z10 \
	VPERMW Z4, phi, Z11 \
	VPDPWSSD Z10, Z0, Z12 \
	VPDPWSSD Z11, Z1, Z12

// One 32-byte group of Q4_K codes (sub-blocks 2c, 2c+1) broadcast to both
// halves of Z0, the upper half shifted down a nibble (K1), so that Z0 lines
// up with the 64 contiguous activations at xo(DI); scales from Z4 through
// the VPERMW index perm, summed into Z12.
#define KQ_Q4_CHUNK512(qo, xo, perm, acc) \
	VBROADCASTI64X4 qo(SI), Z0 \
	VPSRLW $4, Z0, K1, Z0 \
	VPANDQ Z31, Z0, Z0 \
	VPMADDUBSW xo(DI), Z0, Z0 \
	VPERMW Z4, perm, Z10 \
	VPDPWSSD Z10, Z0, acc

// The constants of the AVX-512 Q4_K kernels.
#define KQ_Q4K512_CONSTS \
	KQ_K4V_CONSTS \
	MOVL $0x0f, AX \
	VPBROADCASTB AX, Z31 \
	MOVL $0xffff0000, AX \
	KMOVD AX, K1 \
	VMOVDQU64 kqQ4KPerm2<>+0(SB), Z24 \
	VMOVDQU64 kqQ4KPerm2<>+64(SB), Z25 \
	VMOVDQU64 kqQ4KPerm2<>+128(SB), Z26 \
	VMOVDQU64 kqQ4KPerm2<>+192(SB), Z27 \
	VMOVDQU64 kqMinDup<>(SB), Y28

// One Q4_K super-block at SI against Q8_K activations at DI, into Z29
// (scaled sums) and Y30 (dmin terms); pf is a label for KQ_PREFETCH3.
#define KQ_Q4K512_BLOCK(pf) \
	KQ_PREFETCH3(pf) \
	KQ_SCALES_K4V(4) \
	VPMOVZXBW X0, Y4 \
	VPERMW Y4, Y28, Y5 \
	VPMADDWD 260(DI), Y5, Y5 \
	VCVTDQ2PS Y5, Y5 \
	KQ_DMIN512 \
	VFNMADD231PS Y9, Y5, Y30 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	KQ_Q4_CHUNK512(16, 4, Z24, Z12) \
	KQ_Q4_CHUNK512(48, 68, Z25, Z13) \
	KQ_Q4_CHUNK512(80, 132, Z26, Z12) \
	KQ_Q4_CHUNK512(112, 196, Z27, Z13) \
	VPADDD Z13, Z12, Z12 \
	VCVTDQ2PS Z12, Z12 \
	VFMADD231PS Z8, Z12, Z29 \
	ADDQ $144, SI \
	ADDQ $292, DI

// func kqQ4KAVX512VNNI(w, x *byte, nb int) float32
TEXT ·kqQ4KAVX512VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_Q4K512_CONSTS
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

q4k512loop:
	KQ_Q4K512_BLOCK(q4k512looppf)
	DECQ CX
	JNZ  q4k512loop

	KQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// func kqQ4KRowsAVX512VNNI(w *byte, ldw int, x *byte, nb int, dst *float32, rows int)
//
// kqQ4KAVX512VNNI for rows consecutive rows ldw bytes apart: dst[i] gets
// row i's dot with the same instructions in the same order (the same
// bits), without a call, the constants' loads and a VZEROUPPER per row.
TEXT ·kqQ4KRowsAVX512VNNI(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ ldw+8(FP), R9
	MOVQ x+16(FP), R10
	MOVQ nb+24(FP), R11
	MOVQ dst+32(FP), R12
	MOVQ rows+40(FP), R13
	KQ_Q4K512_CONSTS

q4krrow:
	MOVQ R8, SI
	MOVQ R10, DI
	MOVQ R11, CX
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

q4krloop:
	KQ_Q4K512_BLOCK(q4krlooppf)
	DECQ CX
	JNZ  q4krloop

	KQ_HSUM512
	MOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R9, R8
	DECQ R13
	JNZ  q4krrow
	VZEROUPPER
	RET

// func kqQ5KAVX512VNNI(w, x *byte, nb int) float32
TEXT ·kqQ5KAVX512VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_K4V_CONSTS
	MOVL $0x0f, AX
	VPBROADCASTB AX, Z31
	MOVL $0x10, AX
	VPBROADCASTB AX, Z23
	VMOVDQU64 kqQ4KPerm<>+0(SB), Z24
	VMOVDQU64 kqQ4KPerm<>+64(SB), Z25
	VMOVDQU64 kqQ4KPerm<>+128(SB), Z26
	VMOVDQU64 kqQ4KPerm<>+192(SB), Z27
	VMOVDQU64 kqMinDup<>(SB), Y28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

q5k512loop:
	KQ_PREFETCH3(q5k512looppf)
	KQ_SCALES_K4V(4)
	VPMOVZXBW X0, Y4

	VPERMW Y4, Y28, Y5
	VPMADDWD 260(DI), Y5, Y5
	VCVTDQ2PS Y5, Y5
	KQ_DMIN512
	VFNMADD231PS Y9, Y5, Y30

	// Z13 = [qh, qh>>2]: bit 4k (+1) of each byte is the fifth bit of
	// sub-block 4k (+1) in the low half and 4k+2 (+3) in the high half.
	VMOVDQU 16(SI), Y13
	VPSRLW $2, Y13, Y2
	VINSERTI64X4 $1, Y2, Z13, Z13

	VPXORD Z12, Z12, Z12
	VMOVDQU64 48(SI), Z0
	VPSRLW $4, Z0, Z1
	VPANDQ Z31, Z0, Z0
	VPANDQ Z31, Z1, Z1
	VPSLLW $4, Z13, Z2
	VPTERNLOGD $0xf8, Z23, Z2, Z0
	VPSLLW $3, Z13, Z2
	VPTERNLOGD $0xf8, Z23, Z2, Z1
	KQ_K4_MUL(4, 68, 36, 100, Z24, Z25)
	VMOVDQU64 112(SI), Z0
	VPSRLW $4, Z0, Z1
	VPANDQ Z31, Z0, Z0
	VPANDQ Z31, Z1, Z1
	VPTERNLOGD $0xf8, Z23, Z13, Z0
	VPSRLW $1, Z13, Z2
	VPTERNLOGD $0xf8, Z23, Z2, Z1
	KQ_K4_MUL(132, 196, 164, 228, Z26, Z27)

	VCVTDQ2PS Z12, Z12
	VFMADD231PS Z8, Z12, Z29

	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5k512loop

	KQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// One 128-value half of a Q6_K block: ql at qlo(SI), qh at qho(SI),
// activations at xo(DI) (low nibbles: 64 contiguous values) and xo+64;
// scales from Z4 through VPERMW indices plo/phi, summed into Z12.
#define KQ_Q6_HALF512(qlo, qho, xlo, xhi, plo, phi) \
	VMOVDQU64 qlo(SI), Z0 \
	VMOVDQU qho(SI), Y1 \
	VPSRLW $2, Y1, Y2 \
	VINSERTI64X4 $1, Y2, Z1, Z1 \
	VPSLLW $4, Z1, Z2 \
	VPANDQ Z31, Z0, Z3 \
	VPTERNLOGD $0xf8, Z30, Z2, Z3 \
	VPSRLW $4, Z0, Z0 \
	VPANDQ Z31, Z0, Z0 \
	VPTERNLOGD $0xf8, Z30, Z1, Z0 \
	VPMADDUBSW xlo(DI), Z3, Z3 \
	VPMADDUBSW xhi(DI), Z0, Z0 \
	VPERMW Z4, plo, Z6 \
	VPERMW Z4, phi, Z7 \
	VPDPWSSD Z6, Z3, Z12 \
	VPDPWSSD Z7, Z0, Z12

// The constants of the AVX-512 Q6_K kernels (Z30: the 0x30 bytes, zeroed
// for the reduction).
#define KQ_Q6K512_CONSTS \
	MOVL $0x0f, AX \
	VPBROADCASTB AX, Z31 \
	MOVL $0x30, AX \
	VPBROADCASTB AX, Z30 \
	VMOVDQU64 kqQ6KPerm<>+0(SB), Z24 \
	VMOVDQU64 kqQ6KPerm<>+64(SB), Z25 \
	VMOVDQU64 kqQ6KPerm<>+128(SB), Z26 \
	VMOVDQU64 kqQ6KPerm<>+192(SB), Z27

// One Q6_K super-block at SI against Q8_K activations at DI, into Z29; pf
// is a label for KQ_PREFETCH4.
#define KQ_Q6K512_BLOCK(pf) \
	KQ_PREFETCH4(pf) \
	VPMOVSXBW 192(SI), Y4 \
	VPMADDWD 260(DI), Y4, Y5 \
	VPSLLD $5, Y5, Y5 \
	VPXORD Z12, Z12, Z12 \
	KQ_Q6_HALF512(0, 128, 4, 68, Z24, Z25) \
	KQ_Q6_HALF512(64, 160, 132, 196, Z26, Z27) \
	VPSUBD Z5, Z12, Z12 \
	VCVTDQ2PS Z12, Z12 \
	VPBROADCASTW 208(SI), Y8 \
	VCVTPH2PS Y8, Z8 \
	VMULPS.BCST (DI), Z8, Z8 \
	VFMADD231PS Z8, Z12, Z29 \
	ADDQ $210, SI \
	ADDQ $292, DI

// func kqQ6KAVX512VNNI(w, x *byte, nb int) float32
//
// The 6-bit codes are used unsigned (0..63); the -32 offset is applied once
// per block as 32 * sum(scale_g * bsum_g) from the activations' bsums.
TEXT ·kqQ6KAVX512VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_Q6K512_CONSTS
	VPXORD Z29, Z29, Z29

q6k512loop:
	KQ_Q6K512_BLOCK(q6k512looppf)
	DECQ CX
	JNZ  q6k512loop

	VPXORD Z30, Z30, Z30
	KQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// func kqQ6KRowsAVX512VNNI(w *byte, ldw int, x *byte, nb int, dst *float32, rows int)
//
// kqQ6KAVX512VNNI for rows consecutive rows, as kqQ4KRowsAVX512VNNI.
TEXT ·kqQ6KRowsAVX512VNNI(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ ldw+8(FP), R9
	MOVQ x+16(FP), R10
	MOVQ nb+24(FP), R11
	MOVQ dst+32(FP), R12
	MOVQ rows+40(FP), R13
	KQ_Q6K512_CONSTS

q6krrow:
	MOVL $0x30, AX
	VPBROADCASTB AX, Z30
	MOVQ R8, SI
	MOVQ R10, DI
	MOVQ R11, CX
	VPXORD Z29, Z29, Z29

q6krloop:
	KQ_Q6K512_BLOCK(q6krlooppf)
	DECQ CX
	JNZ  q6krloop

	VPXORD Z30, Z30, Z30
	KQ_HSUM512
	MOVSS X0, (R12)
	ADDQ $4, R12
	ADDQ R9, R8
	DECQ R13
	JNZ  q6krrow
	VZEROUPPER
	RET

// One half of an IQ4_XS block, sub-blocks 4h..4h+3: their 64 code bytes at
// qo(SI) give the values 0-15 of each sub-block (low nibbles, Z2) and 16-31
// (high nibbles, Z3), 16 bytes per sub-block, so that both line up with the
// same four 4-lane groups; the activations at xo(DI) are brought to that
// order with two 128-bit lane shuffles (values 0-15 of the four sub-blocks,
// then 16-31). Looked up as value+128, multiplied exactly by VPDPBUSD into
// one accumulator, and scaled once per half by the scales in Y0 (perm).
#define KQ_IQ4_HALF512(qo, xo, perm) \
	VMOVDQU64 qo(SI), Z1 \
	VPANDQ Z31, Z1, Z2 \
	VPSRLW $4, Z1, Z3 \
	VPANDQ Z31, Z3, Z3 \
	VPSHUFB Z2, Z23, Z2 \
	VPSHUFB Z3, Z23, Z3 \
	VMOVDQU64 xo(DI), Z5 \
	VSHUFI64X2 $0xdd, xo+64(DI), Z5, Z6 \
	VSHUFI64X2 $0x88, xo+64(DI), Z5, Z5 \
	VPXORD Z4, Z4, Z4 \
	VPDPBUSD Z5, Z2, Z4 \
	VPDPBUSD Z6, Z3, Z4 \
	VCVTDQ2PS Z4, Z4 \
	VPERMPS Z0, perm, Z5 \
	VFMADD231PS Z5, Z4, Z29

// func kqIQ4XSAVX512VNNI(w, x *byte, nb int) float32
//
// Codebook values are signed, and VPDPBUSD wants one unsigned operand, so
// the weights enter as value+128 (1..241) and 128 * (sum of the sub-block's
// activations, from bsums) times its scale is taken off in float per block.
// VPMADDUBSW is no option: 241*127*2 overflows its int16 pairs.
TEXT ·kqIQ4XSAVX512VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ $0x0f0f0f0f0f0f0f0f, R11
	MOVQ $0x3030303030303030, R12
	MOVL $0x0f, AX
	VPBROADCASTB AX, Z31
	VBROADCASTI32X4 kqIQ4TabU<>(SB), Z23
	VMOVDQU64 kqIQ4Perm4<>+0(SB), Z24
	VMOVDQU64 kqIQ4Perm4<>+64(SB), Z25
	MOVL $32, AX
	VPBROADCASTD AX, Y28
	MOVL $0x00010001, AX
	VPBROADCASTD AX, Y22
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

iq4xs512loop:
	KQ_PREFETCH3(iq4xs512looppf)
	// ls_j = scales_l nibble j | (scales_h >> 2j & 3) << 4: two PDEPs
	// spread the nibbles and the 2-bit pairs into one byte each.
	MOVL 4(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 2(SI), BX
	PDEPQ R12, BX, BX
	ORQ BX, AX
	VMOVQ AX, X0
	VPMOVZXBD X0, Y0
	VPSUBD Y28, Y0, Y0
	VCVTDQ2PS Y0, Y0
	VPBROADCASTW (SI), X1
	VCVTPH2PS X1, X1
	VMULSS (DI), X1, X1
	VBROADCASTSS X1, Y1
	VMULPS Y1, Y0, Y0

	// the +128 offset: 128 * (bsum pair j) * scale_j
	VPMADDWD 260(DI), Y22, Y2
	VPSLLD $7, Y2, Y2
	VCVTDQ2PS Y2, Y2
	VFNMADD231PS Y0, Y2, Y30

	KQ_IQ4_HALF512(8, 4, Z24)
	KQ_IQ4_HALF512(72, 132, Z25)

	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq4xs512loop

	KQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// func kqQ2KAVX512VNNI(w, x *byte, nb int) float32
//
// A 32-byte half of the 2-bit codes broadcast to both zmm halves, the upper
// shifted by 2, gives the codes of 64 contiguous values (bit pairs 0 and 1);
// shifted by 4 more, the next 64 (bit pairs 2 and 3).
TEXT ·kqQ2KAVX512VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVL $0x0f, AX
	VPBROADCASTB AX, Z31
	MOVL $0x03, AX
	VPBROADCASTB AX, Z21
	MOVL $0xffff0000, AX
	KMOVD AX, K1
	VMOVDQU64 kqQ6KPerm<>+0(SB), Z24
	VMOVDQU64 kqQ6KPerm<>+64(SB), Z25
	VMOVDQU64 kqQ6KPerm<>+128(SB), Z26
	VMOVDQU64 kqQ6KPerm<>+192(SB), Z27
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

q2k512loop:
	KQ_PREFETCH3(q2k512looppf)
	// 4-bit scales (low nibbles) and mins (high nibbles) as words
	VMOVDQU (SI), X0
	VPSRLW $4, X0, X1
	VPANDD X31, X0, X0
	VPANDD X31, X1, X1
	VPMOVZXBW X0, Y4
	VPMOVZXBW X1, Y5
	VPMADDWD 260(DI), Y5, Y5
	VCVTDQ2PS Y5, Y5
	VPBROADCASTD 80(SI), X6
	VCVTPH2PS X6, X6
	VMULPS.BCST (DI), X6, X6
	VBROADCASTSS X6, Z8
	VMOVSHDUP X6, X9
	VBROADCASTSS X9, Y9
	VFNMADD231PS Y9, Y5, Y30

	VBROADCASTI64X4 16(SI), Z0
	VPSRLW $2, Z0, K1, Z0
	VPSRLW $4, Z0, Z1
	VPANDQ Z21, Z0, Z0
	VPANDQ Z21, Z1, Z1
	VPMADDUBSW 4(DI), Z0, Z0
	VPMADDUBSW 68(DI), Z1, Z1
	VPERMW Z4, Z24, Z10
	VPERMW Z4, Z25, Z11
	VPMADDWD Z10, Z0, Z12
	VPDPWSSD Z11, Z1, Z12

	VBROADCASTI64X4 48(SI), Z0
	VPSRLW $2, Z0, K1, Z0
	VPSRLW $4, Z0, Z1
	VPANDQ Z21, Z0, Z0
	VPANDQ Z21, Z1, Z1
	VPMADDUBSW 132(DI), Z0, Z0
	VPMADDUBSW 196(DI), Z1, Z1
	VPERMW Z4, Z26, Z10
	VPERMW Z4, Z27, Z11
	VPDPWSSD Z10, Z0, Z12
	VPDPWSSD Z11, Z1, Z12

	VCVTDQ2PS Z12, Z12
	VFMADD231PS Z8, Z12, Z29

	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2k512loop

	KQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// One 128-value half of a Q3_K block: 2-bit codes at qo(SI) as in Q2_K, the
// third bit from hmask (Z13 = [hm, hm]) shifted right by hs, plus one more
// in the upper zmm half, so bit 0 serves the first 64 values and bit 2 the
// next 64. Codes 0..7 are the values + 4.
#define KQ_Q3_HALF512(qo, hs, xo, xo2, plo, phi) \
	VBROADCASTI64X4 qo(SI), Z0 \
	VPSRLW $2, Z0, K1, Z0 \
	VPSRLW $4, Z0, Z1 \
	VPANDQ Z21, Z0, Z0 \
	VPANDQ Z21, Z1, Z1 \
	VPSRLW $hs, Z13, Z2 \
	VPSRLW $1, Z2, K1, Z2 \
	VPSLLW $2, Z2, Z3 \
	VPTERNLOGD $0xf8, Z20, Z3, Z0 \
	VPTERNLOGD $0xf8, Z20, Z2, Z1 \
	VPMADDUBSW xo(DI), Z0, Z0 \
	VPMADDUBSW xo2(DI), Z1, Z1 \
	VPERMW Z4, plo, Z10 \
	VPERMW Z4, phi, Z11 \
	VPDPWSSD Z10, Z0, Z12 \
	VPDPWSSD Z11, Z1, Z12

// func kqQ3KAVX512VNNI(w, x *byte, nb int) float32
//
// Codes are used as value+4 (0..7); 4 * sum(scale_g * bsum_g) is taken off
// in int32 per block.
TEXT ·kqQ3KAVX512VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_MASKS
	MOVL $0x03, AX
	VPBROADCASTB AX, Z21
	MOVL $0x04, AX
	VPBROADCASTB AX, Z20
	MOVL $0x00200020, AX
	VPBROADCASTD AX, Y28
	MOVL $0xffff0000, AX
	KMOVD AX, K1
	VMOVDQU64 kqQ6KPerm<>+0(SB), Z24
	VMOVDQU64 kqQ6KPerm<>+64(SB), Z25
	VMOVDQU64 kqQ6KPerm<>+128(SB), Z26
	VMOVDQU64 kqQ6KPerm<>+192(SB), Z27
	VPXORD Z29, Z29, Z29

q3k512loop:
	KQ_PREFETCH3(q3k512looppf)
	// 16 6-bit scales: low nibbles from bytes 0-7, top 2 bits from 8-11
	// (ggml's kmask arithmetic, two 32-bit halves at a time).
	MOVQ 96(SI), R8
	MOVL 104(SI), R9
	MOVQ R9, DX
	SHRQ $2, DX
	SHLQ $32, DX
	ORQ DX, R9
	MOVQ R8, R10
	ANDQ R13, R10
	MOVQ R9, DX
	ANDQ R12, DX
	SHLQ $4, DX
	ORQ DX, R10
	SHRQ $4, R8
	ANDQ R13, R8
	SHRQ $4, R9
	ANDQ R12, R9
	SHLQ $4, R9
	ORQ R9, R8
	VMOVQ R10, X0
	VMOVQ R8, X1
	VPUNPCKLQDQ X1, X0, X0
	VPMOVZXBW X0, Y4
	VPSUBW Y28, Y4, Y4
	VPMADDWD 260(DI), Y4, Y5
	VPSLLD $2, Y5, Y5

	VBROADCASTI64X4 0(SI), Z13
	VPXORD Z12, Z12, Z12
	KQ_Q3_HALF512(32, 0, 4, 68, Z24, Z25)
	KQ_Q3_HALF512(64, 4, 132, 196, Z26, Z27)
	VPSUBD Z5, Z12, Z12
	VCVTDQ2PS Z12, Z12

	VPBROADCASTW 108(SI), Y8
	VCVTPH2PS Y8, Z8
	VMULPS.BCST (DI), Z8, Z8
	VFMADD231PS Z8, Z12, Z29

	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3k512loop

	VPXORD Z30, Z30, Z30
	KQ_REDUCE512
	MOVSS X0, ret+24(FP)
	RET

// Horizontal sum of Y12 + Y11 into X0.
#define KQ_REDUCE256 \
	VADDPS Y11, Y12, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VPERMILPS $0x0e, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	VZEROUPPER

// One 32-byte group of Q4_K codes at qo(SI) (sub-blocks 2k, 2k+1) against
// activations at xo(DI) and xo+32, scale words from Y6 by the shuffles at
// so and so+32, summed into Y10.
#define KQ_Q4_STEP256(qo, xo, xo2, so, so2) \
	VMOVDQU qo(SI), Y0 \
	VPSRLW $4, Y0, Y1 \
	VPAND Y14, Y0, Y0 \
	VPAND Y14, Y1, Y1 \
	VPMADDUBSW xo(DI), Y0, Y0 \
	VPMADDUBSW xo2(DI), Y1, Y1 \
	VPSHUFB kqShufW<>+so(SB), Y6, Y2 \
	VPSHUFB kqShufW<>+so2(SB), Y6, Y3 \
	VPMADDWD Y2, Y0, Y0 \
	VPMADDWD Y3, Y1, Y1 \
	VPADDD Y0, Y10, Y10 \
	VPADDD Y1, Y10, Y10

// func kqQ4KAVX2(w, x *byte, nb int) float32
TEXT ·kqQ4KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_MASKS
	VMOVDQU kqNib<>(SB), Y14
	VMOVDQU kqMinShuf<>(SB), Y13
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11

q4k256loop:
	KQ_PREFETCH3(q4k256looppf)
	KQ_SCALES_K4(4)
	VPMOVZXBW X0, Y4

	VPERMQ $0xee, Y4, Y5
	VPSHUFB Y13, Y5, Y5
	VPMADDWD 260(DI), Y5, Y5
	VCVTDQ2PS Y5, Y5
	VCVTPH2PS (SI), X6
	VBROADCASTSS (DI), X7
	VMULPS X7, X6, X6
	VBROADCASTSS X6, Y8
	VMOVSHDUP X6, X9
	VBROADCASTSS X9, Y9
	VFNMADD231PS Y9, Y5, Y11

	VPERMQ $0x44, Y4, Y6
	VPXOR Y10, Y10, Y10
	KQ_Q4_STEP256(16, 4, 36, 0, 32)
	KQ_Q4_STEP256(48, 68, 100, 64, 96)
	KQ_Q4_STEP256(80, 132, 164, 128, 160)
	KQ_Q4_STEP256(112, 196, 228, 192, 224)
	VCVTDQ2PS Y10, Y10
	VFMADD231PS Y8, Y10, Y12

	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4k256loop

	KQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// As KQ_Q4_STEP256 for Q5_K: Y7 holds qh shifted right by 2k, whose bits 0
// and 1 are the fifth bits of sub-blocks 2k and 2k+1; Y15 = 0x10 bytes.
#define KQ_Q5_STEP256(qo, xo, xo2, so, so2) \
	VMOVDQU qo(SI), Y0 \
	VPSRLW $4, Y0, Y1 \
	VPAND Y14, Y0, Y0 \
	VPAND Y14, Y1, Y1 \
	VPSLLW $4, Y7, Y2 \
	VPAND Y15, Y2, Y2 \
	VPOR Y2, Y0, Y0 \
	VPSLLW $3, Y7, Y3 \
	VPAND Y15, Y3, Y3 \
	VPOR Y3, Y1, Y1 \
	VPMADDUBSW xo(DI), Y0, Y0 \
	VPMADDUBSW xo2(DI), Y1, Y1 \
	VPSHUFB kqShufW<>+so(SB), Y6, Y2 \
	VPSHUFB kqShufW<>+so2(SB), Y6, Y3 \
	VPMADDWD Y2, Y0, Y0 \
	VPMADDWD Y3, Y1, Y1 \
	VPADDD Y0, Y10, Y10 \
	VPADDD Y1, Y10, Y10

// func kqQ5KAVX2(w, x *byte, nb int) float32
TEXT ·kqQ5KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_MASKS
	VMOVDQU kqNib<>(SB), Y14
	VMOVDQU kqMinShuf<>(SB), Y13
	VMOVDQU kqB10<>(SB), Y15
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11

q5k256loop:
	KQ_PREFETCH3(q5k256looppf)
	KQ_SCALES_K4(4)
	VPMOVZXBW X0, Y4

	VPERMQ $0xee, Y4, Y5
	VPSHUFB Y13, Y5, Y5
	VPMADDWD 260(DI), Y5, Y5
	VCVTDQ2PS Y5, Y5
	VCVTPH2PS (SI), X6
	VBROADCASTSS (DI), X7
	VMULPS X7, X6, X6
	VBROADCASTSS X6, Y8
	VMOVSHDUP X6, X9
	VBROADCASTSS X9, Y9
	VFNMADD231PS Y9, Y5, Y11

	VPERMQ $0x44, Y4, Y6
	VMOVDQU 16(SI), Y7
	VPXOR Y10, Y10, Y10
	KQ_Q5_STEP256(48, 4, 36, 0, 32)
	VPSRLW $2, Y7, Y7
	KQ_Q5_STEP256(80, 68, 100, 64, 96)
	VPSRLW $2, Y7, Y7
	KQ_Q5_STEP256(112, 132, 164, 128, 160)
	VPSRLW $2, Y7, Y7
	KQ_Q5_STEP256(144, 196, 228, 192, 224)
	VCVTDQ2PS Y10, Y10
	VFMADD231PS Y8, Y10, Y12

	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5k256loop

	KQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// A 32-value chunk of Q6_K: codes in Y3 (already 6-bit) against
// activations at xo(DI), scale words for its two 16-groups from the byte
// shuffle at so, summed into Y10.
#define KQ_Q6_MUL256(xo, so) \
	VPMADDUBSW xo(DI), Y3, Y3 \
	VPSHUFB kqQ6KShuf<>+so(SB), X4, X6 \
	VPMOVSXBW X6, Y6 \
	VPMADDWD Y6, Y3, Y3 \
	VPADDD Y3, Y10, Y10

// ql 32 bytes at qlo(SI), qh (pre-shifted) in Y1: low nibbles with qh bits
// 0-1 go to xlo, high nibbles with qh bits 4-5 to xhi.
#define KQ_Q6_STEP256(qlo, xlo, slo, xhi, shi) \
	VMOVDQU qlo(SI), Y0 \
	VPSLLW $4, Y1, Y2 \
	VPAND Y13, Y2, Y2 \
	VPAND Y14, Y0, Y3 \
	VPOR Y2, Y3, Y3 \
	KQ_Q6_MUL256(xlo, slo) \
	VPSRLW $4, Y0, Y0 \
	VPAND Y14, Y0, Y0 \
	VPAND Y13, Y1, Y2 \
	VPOR Y2, Y0, Y3 \
	KQ_Q6_MUL256(xhi, shi)

// func kqQ6KAVX2(w, x *byte, nb int) float32
TEXT ·kqQ6KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VMOVDQU kqNib<>(SB), Y14
	VMOVDQU kqB30<>(SB), Y13
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11

q6k256loop:
	KQ_PREFETCH4(q6k256looppf)
	VMOVDQU 192(SI), X4
	VPMOVSXBW X4, Y5
	VPMADDWD 260(DI), Y5, Y5
	VPSLLD $5, Y5, Y5
	VPXOR Y10, Y10, Y10

	VMOVDQU 128(SI), Y1
	KQ_Q6_STEP256(0, 4, 0, 68, 32)
	VPSRLW $2, Y1, Y1
	KQ_Q6_STEP256(32, 36, 16, 100, 48)
	VMOVDQU 160(SI), Y1
	KQ_Q6_STEP256(64, 132, 64, 196, 96)
	VPSRLW $2, Y1, Y1
	KQ_Q6_STEP256(96, 164, 80, 228, 112)

	VPSUBD Y5, Y10, Y10
	VCVTDQ2PS Y10, Y10
	VPBROADCASTW 208(SI), X8
	VCVTPH2PS X8, Y8
	VBROADCASTSS (DI), Y9
	VMULPS Y9, Y8, Y8
	VFMADD231PS Y8, Y10, Y12

	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6k256loop

	KQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// 32 codes in Y3 (two 16-value groups) against the activations at xo(DI),
// group scales from the bytes in X4 by the shuffle at so, widened with ext
// (VPMOVZXBW or VPMOVSXBW), summed into Y10.
#define KQ_SC16_MUL256(xo, so, ext) \
	VPMADDUBSW xo(DI), Y3, Y3 \
	VPSHUFB kqQ6KShuf<>+so(SB), X4, X2 \
	ext X2, Y2 \
	VPMADDWD Y2, Y3, Y3 \
	VPADDD Y3, Y10, Y10

// Q3_K scales: 16 6-bit values (+32) in X4, from the 12 bytes at 96(SI).
#define KQ_SCALES_Q3 \
	MOVQ 96(SI), R8 \
	MOVL 104(SI), R9 \
	MOVQ R9, DX \
	SHRQ $2, DX \
	SHLQ $32, DX \
	ORQ DX, R9 \
	MOVQ R8, R10 \
	ANDQ R13, R10 \
	MOVQ R9, DX \
	ANDQ R12, DX \
	SHLQ $4, DX \
	ORQ DX, R10 \
	SHRQ $4, R8 \
	ANDQ R13, R8 \
	SHRQ $4, R9 \
	ANDQ R12, R9 \
	SHLQ $4, R9 \
	ORQ R9, R8 \
	VMOVQ R10, X4 \
	VMOVQ R8, X1 \
	VPUNPCKLQDQ X1, X4, X4

// IQ4_XS: 32 codes in reg (one sub-block, x order) through the codebook,
// times the activations at xo(DI), scale word from Y6 by the shuffle at so.
#define KQ_IQ4_MUL256(reg, xo, so) \
	VPSHUFB reg, Y13, reg \
	VMOVDQU xo(DI), Y1 \
	VPSIGNB Y1, reg, reg \
	VPABSB Y1, Y1 \
	VPMADDUBSW reg, Y1, Y1 \
	VPSHUFB kqShufW<>+so(SB), Y6, Y2 \
	VPMADDWD Y2, Y1, Y1 \
	VPADDD Y1, Y10, Y10

// func kqQ2KAVX2(w, x *byte, nb int) float32
TEXT ·kqQ2KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VMOVDQU kqNib<>(SB), Y14
	VMOVDQU kqB03<>(SB), Y13
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11

q2k256loop:
	KQ_PREFETCH3(q2k256looppf)
	VMOVDQU (SI), X4
	VPSRLW $4, X4, X5
	VPAND X14, X4, X4
	VPAND X14, X5, X5
	VPMOVZXBW X5, Y5
	VPMADDWD 260(DI), Y5, Y5
	VCVTDQ2PS Y5, Y5
	VPBROADCASTD 80(SI), X6
	VCVTPH2PS X6, X6
	VBROADCASTSS (DI), X7
	VMULPS X7, X6, X6
	VBROADCASTSS X6, Y8
	VMOVSHDUP X6, X9
	VBROADCASTSS X9, Y9
	VFNMADD231PS Y9, Y5, Y11
	VPXOR Y10, Y10, Y10
	VMOVDQU 16(SI), Y1
	VPAND Y13, Y1, Y3
	KQ_SC16_MUL256(4, 0, VPMOVZXBW)
	VPSRLW $2, Y1, Y3
	VPAND Y13, Y3, Y3
	KQ_SC16_MUL256(36, 16, VPMOVZXBW)
	VPSRLW $4, Y1, Y3
	VPAND Y13, Y3, Y3
	KQ_SC16_MUL256(68, 32, VPMOVZXBW)
	VPSRLW $6, Y1, Y3
	VPAND Y13, Y3, Y3
	KQ_SC16_MUL256(100, 48, VPMOVZXBW)
	VMOVDQU 48(SI), Y1
	VPAND Y13, Y1, Y3
	KQ_SC16_MUL256(132, 64, VPMOVZXBW)
	VPSRLW $2, Y1, Y3
	VPAND Y13, Y3, Y3
	KQ_SC16_MUL256(164, 80, VPMOVZXBW)
	VPSRLW $4, Y1, Y3
	VPAND Y13, Y3, Y3
	KQ_SC16_MUL256(196, 96, VPMOVZXBW)
	VPSRLW $6, Y1, Y3
	VPAND Y13, Y3, Y3
	KQ_SC16_MUL256(228, 112, VPMOVZXBW)
	VCVTDQ2PS Y10, Y10
	VFMADD231PS Y8, Y10, Y12

	ADDQ $84, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q2k256loop

	KQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// func kqQ3KAVX2(w, x *byte, nb int) float32
//
// Codes are used as value+4 (0..7); 4 * sum(scale_g * bsum_g) is taken off
// in int32 per block. Y7 walks through the hmask bits, one per 32 values.
TEXT ·kqQ3KAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	KQ_MASKS
	VMOVDQU kqB03<>(SB), Y13
	VMOVDQU kqB04<>(SB), Y14
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11

q3k256loop:
	KQ_PREFETCH3(q3k256looppf)
	KQ_SCALES_Q3
	VMOVDQU kqB20<>(SB), X1
	VPSUBB X1, X4, X4
	VPMOVSXBW X4, Y5
	VPMADDWD 260(DI), Y5, Y5
	VPSLLD $2, Y5, Y5
	VMOVDQU (SI), Y7
	VPXOR Y10, Y10, Y10
	VMOVDQU 32(SI), Y1
	VPAND Y13, Y1, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(4, 0, VPMOVSXBW)
	VPSRLW $2, Y1, Y3
	VPAND Y13, Y3, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(36, 16, VPMOVSXBW)
	VPSRLW $4, Y1, Y3
	VPAND Y13, Y3, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(68, 32, VPMOVSXBW)
	VPSRLW $6, Y1, Y3
	VPAND Y13, Y3, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(100, 48, VPMOVSXBW)
	VMOVDQU 64(SI), Y1
	VPAND Y13, Y1, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(132, 64, VPMOVSXBW)
	VPSRLW $2, Y1, Y3
	VPAND Y13, Y3, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(164, 80, VPMOVSXBW)
	VPSRLW $4, Y1, Y3
	VPAND Y13, Y3, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	VPSRLW $1, Y7, Y7
	KQ_SC16_MUL256(196, 96, VPMOVSXBW)
	VPSRLW $6, Y1, Y3
	VPAND Y13, Y3, Y3
	VPSLLW $2, Y7, Y2
	VPAND Y14, Y2, Y2
	VPOR Y2, Y3, Y3
	KQ_SC16_MUL256(228, 112, VPMOVSXBW)
	VPSUBD Y5, Y10, Y10
	VCVTDQ2PS Y10, Y10
	VPBROADCASTW 108(SI), X8
	VCVTPH2PS X8, Y8
	VBROADCASTSS (DI), Y9
	VMULPS Y9, Y8, Y8
	VFMADD231PS Y8, Y10, Y12

	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q3k256loop

	KQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET

// func kqIQ4XSAVX2(w, x *byte, nb int) float32
//
// Both operands are signed here, and VPMADDUBSW wants one unsigned: it gets
// |x| (VPABSB turns -128 into 0x80 = 128 unsigned, which is right) and the
// weights take x's sign (VPSIGNB; -w stays within int8 as w >= -127). Pairs
// stay below 2*128*127, so nothing saturates, for any activation.
TEXT ·kqIQ4XSAVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ $0x0f0f0f0f0f0f0f0f, R11
	MOVQ $0x3030303030303030, R12
	VMOVDQU kqNib<>(SB), Y14
	VBROADCASTI128 kqIQ4Tab<>(SB), Y13
	VXORPS Y12, Y12, Y12
	VXORPS Y11, Y11, Y11

iq4xs256loop:
	KQ_PREFETCH3(iq4xs256looppf)
	MOVL 4(SI), AX
	PDEPQ R11, AX, AX
	MOVWLZX 2(SI), BX
	PDEPQ R12, BX, BX
	ORQ BX, AX
	VMOVQ AX, X4
	VMOVDQU kqB20<>(SB), X1
	VPSUBB X1, X4, X4
	VPMOVSXBW X4, X4
	VPERMQ $0x44, Y4, Y6
	VPXOR Y10, Y10, Y10
	VMOVDQU 8(SI), Y0
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y0, Y0
	VPAND Y14, Y1, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	KQ_IQ4_MUL256(Y2, 4, 0)
	KQ_IQ4_MUL256(Y3, 36, 32)
	VMOVDQU 40(SI), Y0
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y0, Y0
	VPAND Y14, Y1, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	KQ_IQ4_MUL256(Y2, 68, 64)
	KQ_IQ4_MUL256(Y3, 100, 96)
	VMOVDQU 72(SI), Y0
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y0, Y0
	VPAND Y14, Y1, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	KQ_IQ4_MUL256(Y2, 132, 128)
	KQ_IQ4_MUL256(Y3, 164, 160)
	VMOVDQU 104(SI), Y0
	VPSRLW $4, Y0, Y1
	VPAND Y14, Y0, Y0
	VPAND Y14, Y1, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	KQ_IQ4_MUL256(Y2, 196, 192)
	KQ_IQ4_MUL256(Y3, 228, 224)
	VCVTDQ2PS Y10, Y10
	VPBROADCASTW (SI), X8
	VCVTPH2PS X8, Y8
	VBROADCASTSS (DI), Y9
	VMULPS Y9, Y8, Y8
	VFMADD231PS Y8, Y10, Y12

	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq4xs256loop

	KQ_REDUCE256
	MOVSS X0, ret+24(FP)
	RET
