//go:build amd64 && !purego

#include "textflag.h"

// func sumWords32AVX2(b []byte) uint64
//
// Each 32-byte load is four 64-bit lanes; the high and low 32-bit halves
// of every lane go into separate 64-bit accumulators (a shift and a mask,
// no shuffles), two loads per iteration into four accumulators, which
// are added together at the end. len(b) must be a multiple of 32.
TEXT ·sumWords32AVX2(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPCMPEQD Y7, Y7, Y7
	VPSRLQ $32, Y7, Y7 // 0x00000000ffffffff in every lane

loop64:
	CMPQ CX, $64
	JB   last32
	VMOVDQU (SI), Y2
	VMOVDQU 32(SI), Y3
	VPSRLQ $32, Y2, Y6
	VPADDQ Y6, Y1, Y1
	VPAND Y7, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VPSRLQ $32, Y3, Y8
	VPADDQ Y8, Y5, Y5
	VPAND Y7, Y3, Y3
	VPADDQ Y3, Y4, Y4
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  loop64

last32:
	CMPQ CX, $32
	JB   done
	VMOVDQU (SI), Y2
	VPSRLQ $32, Y2, Y6
	VPADDQ Y6, Y1, Y1
	VPAND Y7, Y2, Y2
	VPADDQ Y2, Y0, Y0

done:
	VPADDQ Y1, Y0, Y0
	VPADDQ Y5, Y4, Y4
	VPADDQ Y4, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSRLDQ $8, X0, X1
	VPADDQ X1, X0, X0
	VZEROUPPER
	MOVQ X0, AX
	MOVQ AX, ret+24(FP)
	RET
