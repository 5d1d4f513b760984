//go:build amd64 && !purego

#include "textflag.h"

// Poly1305 with AVX-512 IFMA, 8 lanes, radix 2^44.
//
// Representation: a value x mod p = 2^130-5 is held per 64-bit lane as three
// limbs x = x0 + x1*2^44 + x2*2^88 (nominally 44, 44 and 42 bits). A ZMM
// register holds one limb for all eight lanes.
//
// Lane assignment: a 128-byte group is loaded as two ZMMs and split into the
// low and high 64-bit words of its eight 16-byte blocks with VPUNPCKLQDQ /
// VPUNPCKHQDQ, which puts block sigma(p) in lane p with
// sigma = [0, 4, 1, 5, 2, 6, 3, 7]. Each lane accumulates its block of every
// group: h = m_0, then h = h*r^8 + m_t for each further group t. Finally each
// lane is multiplied by r^(8-sigma(p)) = [r^8, r^4, r^7, r^3, r^6, r^2, r^5, r]
// so that after summing the lanes, block i of n carries r^(n-i), exactly as
// in Horner's rule (h = sum m_i r^(n-i)).
//
// Multiplication (MULACC): a * b + m mod p, where the "b" side comes with
// s1 = 20*b1 and s2 = 20*b2, and m (a message group or zero) is the initial
// value of the low accumulators. Limb products land at 2^0, 2^44, 2^88, 2^132
// and 2^176; 2^132 = 4*2^130 = 20 (mod p) and 2^176 = 20*2^44 (mod p), so
//   d0 = m0 + a0*b0 + a1*s2 + a2*s1
//   d1 = m1 + a0*b1 + a1*b0 + a2*s2
//   d2 = m2 + a0*b2 + a1*b1 + a2*b0
// Each 52x52-bit product P (< 2^104) is split by VPMADD52LUQ/HUQ into
// lo = P mod 2^52 and hi = P >> 52 (P = lo + hi*2^52 exactly), which are
// summed per column into the 64-bit accumulators lo_k (starting at m_k) and
// hi_k (starting at 0); d_k = lo_k + hi_k*2^52.
//
// Bounds. Every MULACC operand is one of: a MULACC output (the accumulator,
// the powers of r), a message group, r itself (limbs < 2^44, 2^44, 2^36), or
// 1 = (1, 0, 0). MULACC outputs are < 2^44, 2^44 + 2^6, 2^42 (shown below);
// message limbs are m0 < 2^44, m1 < 2^44, m2 = (hi64>>24) + 2^40 < 2^41. So:
//   "a" side: a0 < 2^44, a1 < 2^44 + 2^6 (< 2^44.01), a2 < 2^42
//   "b" side: b0 < 2^44, b1 < 2^44 + 2^6, b2 < 2^42,
//             s1 = 20*b1 < 2^48.33, s2 = 20*b2 < 2^46.33
//   All VPMADD52 inputs are < 2^52, so the instructions drop no input bits.
//   Products:  d0: a0*b0 < 2^88,    a1*s2 < 2^90.34,  a2*s1 < 2^90.33
//              d1: a0*b1 < 2^88.01, a1*b0 < 2^88.01,  a2*s2 < 2^88.33
//              d2: a0*b2 < 2^86,    a1*b1 < 2^88.02,  a2*b0 < 2^86
//   lo_k < 2^44 + 3*2^52 < 2^53.6 (three lo parts, each < 2^52, plus m_k).
//   hi_0 < 2^36 + 2^38.34 + 2^38.33 < 2^39.6
//   hi_1 < 2^36.01 + 2^36.01 + 2^36.33 < 2^37.7
//   hi_2 < 2^34 + 2^36.02 + 2^34 < 2^36.6
//   No 64-bit accumulator comes anywhere near overflowing.
// Reduction (each step preserves the value mod p):
//   t1 = lo1 + (hi0<<8)   < 2^53.6 + 2^47.6 < 2^53.7   (hi0*2^52 = (hi0<<8)*2^44)
//   t2 = lo2 + (hi1<<8)   < 2^53.6 + 2^45.7 < 2^53.7   (hi1*2^96 = (hi1<<8)*2^88)
//   top = hi2<<10         < 2^46.6                     (hi2*2^140 = (hi2<<10)*2^130)
//   c0 = lo0>>44 < 2^9.6;   h0 = lo0 & M44 < 2^44;   t1 += c0  (< 2^53.8)
//   c1 = t1>>44  < 2^9.8;   h1 = t1 & M44  < 2^44;   t2 += c1  (< 2^53.8)
//   c2 = t2>>42  < 2^11.8;  h2 = t2 & M42  < 2^42
//   c = c2 + top < 2^46.61 counts multiples of 2^130 = 5 (mod p)
//   h0 += 5*c, as c + 4c: h0 < 2^44 + 5*2^46.61 < 2^49.1
//   c3 = h0>>44 < 2^5.1;    h0 &= M44 (< 2^44);      h1 += c3  (< 2^44 + 2^6)
//   Output: h0 < 2^44, h1 < 2^44 + 2^6, h2 < 2^42, as claimed; outputs are
//   valid "a" and "b" operands, so the bounds hold by induction for any
//   number of groups.
// Final lane sum (eight MULACC outputs): < 2^47, < 2^47 + 2^9, < 2^45.

// Register use:
//   Z0-Z2    h (accumulator limbs)
//   Z3-Z5    message split temporaries
//   Z8-Z14   MULACC temporaries (lo0, lo1, lo2, hi0, hi1, hi2, t);
//            Z8-Z10 hold the message (or zero) on entry
//   Z16-Z20  r^8 broadcast: b0, b1, b2, s1, s2   (r during setup)
//   Z21-Z25  per-lane final powers: b0, b1, b2, s1, s2
//   Z26      setup temporary
//   Z28 = 1, Z29 = 2^40, Z30 = 2^42-1, Z31 = 2^44-1
//   Z15/X15 is not touched.

// out = 20*x = 4x + 16x. Clobbers Z14. x < 2^44.01 gives out < 2^48.33.
#define TIMES20(x, out) \
	VPSLLQ $2, x, out; \
	VPSLLQ $4, x, Z14; \
	VPADDQ Z14, out, out

// (a0, a1, a2) = (a0, a1, a2) * (b0, b1, b2) + (Z8, Z9, Z10) mod p, partially
// reduced; s1 = 20*b1, s2 = 20*b2. (Z8, Z9, Z10) is a message (< 2^44, 2^44,
// 2^41) or zero. See the bounds above. Clobbers Z8-Z14.
#define MULACC(a0, a1, a2, b0, b1, b2, s1, s2) \
	VPXORQ      Z11, Z11, Z11; \
	VPXORQ      Z12, Z12, Z12; \
	VPXORQ      Z13, Z13, Z13; \
	VPMADD52LUQ b0, a0, Z8; \
	VPMADD52HUQ b0, a0, Z11; \
	VPMADD52LUQ b1, a0, Z9; \
	VPMADD52HUQ b1, a0, Z12; \
	VPMADD52LUQ b2, a0, Z10; \
	VPMADD52HUQ b2, a0, Z13; \
	VPMADD52LUQ s2, a1, Z8; \
	VPMADD52HUQ s2, a1, Z11; \
	VPMADD52LUQ b0, a1, Z9; \
	VPMADD52HUQ b0, a1, Z12; \
	VPMADD52LUQ b1, a1, Z10; \
	VPMADD52HUQ b1, a1, Z13; \
	VPMADD52LUQ s1, a2, Z8; \
	VPMADD52HUQ s1, a2, Z11; \
	VPMADD52LUQ s2, a2, Z9; \
	VPMADD52HUQ s2, a2, Z12; \
	VPMADD52LUQ b0, a2, Z10; \
	VPMADD52HUQ b0, a2, Z13; \
	VPSLLQ      $8, Z11, Z11; \
	VPADDQ      Z11, Z9, Z9; \
	VPSLLQ      $8, Z12, Z12; \
	VPADDQ      Z12, Z10, Z10; \
	VPSLLQ      $10, Z13, Z13; \
	VPSRLQ      $44, Z8, Z14; \
	VPANDQ      Z31, Z8, a0; \
	VPADDQ      Z14, Z9, Z9; \
	VPSRLQ      $44, Z9, Z14; \
	VPANDQ      Z31, Z9, a1; \
	VPADDQ      Z14, Z10, Z10; \
	VPSRLQ      $42, Z10, Z14; \
	VPANDQ      Z30, Z10, a2; \
	VPADDQ      Z13, Z14, Z14; \
	VPADDQ      Z14, a0, a0; \
	VPSLLQ      $2, Z14, Z14; \
	VPADDQ      Z14, a0, a0; \
	VPSRLQ      $44, a0, Z14; \
	VPANDQ      Z31, a0, a0; \
	VPADDQ      Z14, a1, a1

// POWSTEP multiplies h (Z0-Z2) by lane 0's value of h in the lanes set in
// mask k and by 1 in the others: one squaring step of the power ladder.
#define POWSTEP(k) \
	VPBROADCASTQ X0, Z26; \
	VPBLENDMQ    Z26, Z28, k, Z21; \
	VPBROADCASTQ X1, Z26; \
	VMOVDQU64.Z  Z26, k, Z22; \
	VPBROADCASTQ X2, Z26; \
	VMOVDQU64.Z  Z26, k, Z23; \
	TIMES20(Z22, Z24); \
	TIMES20(Z23, Z25); \
	VPXORQ Z8, Z8, Z8; \
	VPXORQ Z9, Z9, Z9; \
	VPXORQ Z10, Z10, Z10; \
	MULACC(Z0, Z1, Z2, Z21, Z22, Z23, Z24, Z25)

// (m0, m1, m2) = the eight blocks at 0(ptr)..127(ptr), with the 2^128 bit.
// Lane p receives block sigma(p). m0 = lo & M44; m1 = (lo>>44 | hi<<20) & M44;
// m2 = hi>>24 | 2^40. Clobbers Z3-Z5.
// VPTERNLOGQ $0xA8 computes dst = (dst | src2) & src3 (Intel operand names).
#define LOADMSG(ptr, m0, m1, m2) \
	VMOVDQU64   0(ptr), Z3; \
	VMOVDQU64   64(ptr), Z4; \
	VPUNPCKHQDQ Z4, Z3, Z5; \
	VPUNPCKLQDQ Z4, Z3, Z3; \
	VPANDQ      Z31, Z3, m0; \
	VPSRLQ      $44, Z3, m1; \
	VPSLLQ      $20, Z5, Z4; \
	VPTERNLOGQ  $0xA8, Z31, Z4, m1; \
	VPSRLQ      $24, Z5, m2; \
	VPORQ       Z29, m2, m2

// Sum the eight lanes of z (with y, x its YMM/XMM halves) into 64-bit mem.
// Clobbers Z14.
#define HSUM(z, y, x, mem) \
	VEXTRACTI64X4 $1, z, Y14; \
	VPADDQ        Y14, y, y; \
	VEXTRACTI128  $1, y, X14; \
	VPADDQ        X14, x, x; \
	VPSHUFD       $0x4e, x, X14; \
	VPADDQ        X14, x, x; \
	VMOVQ         x, mem

// func polyIFMA(h *[3]uint64, msg *byte, groups int, r0, r1, r2 uint64)
TEXT ·polyIFMA(SB), NOSPLIT, $0-48
	MOVQ h+0(FP), DI
	MOVQ msg+8(FP), SI
	MOVQ groups+16(FP), CX

	// Constants.
	MOVQ         $1, AX
	VPBROADCASTQ AX, Z28
	MOVQ         $0x10000000000, AX
	VPBROADCASTQ AX, Z29
	MOVQ         $0x3ffffffffff, AX
	VPBROADCASTQ AX, Z30
	MOVQ         $0xfffffffffff, AX
	VPBROADCASTQ AX, Z31

	// Lane masks for building [r^8, r^4, r^7, r^3, r^6, r^2, r^5, r^1]:
	// lane p needs exponent e = 8-sigma(p); write e-1 = 4*k2 + 2*k1 + k0.
	// Every lane starts from r; step 1 multiplies it by r where k0 = 1
	// (K1 = 0x33), step 2 by r^2 where k1 = 1 (K2 = 0x0f), step 3 by r^4
	// where k2 = 1 (K3 = 0x55); other lanes multiply by 1. Lane 0 (e = 8)
	// holds r^2, r^4, r^8 after steps 1, 2, 3.
	MOVL  $0x33, AX
	KMOVW AX, K1
	MOVL  $0x0f, AX
	KMOVW AX, K2
	MOVL  $0x55, AX
	KMOVW AX, K3

	// r broadcast (b side) into Z16-Z20.
	MOVQ         r0+24(FP), AX
	VPBROADCASTQ AX, Z16
	MOVQ         r1+32(FP), AX
	VPBROADCASTQ AX, Z17
	MOVQ         r2+40(FP), AX
	VPBROADCASTQ AX, Z18
	TIMES20(Z17, Z19)
	TIMES20(Z18, Z20)

	// Step 1: h = (K1 ? r : 1) * r.
	VPBLENDMQ   Z16, Z28, K1, Z0
	VMOVDQU64.Z Z17, K1, Z1
	VMOVDQU64.Z Z18, K1, Z2
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	MULACC(Z0, Z1, Z2, Z16, Z17, Z18, Z19, Z20)

	// Step 2: h *= (K2 ? r^2 : 1), r^2 taken from lane 0.
	POWSTEP(K2)

	// Step 3: h *= (K3 ? r^4 : 1), r^4 taken from lane 0.
	POWSTEP(K3)

	// Final per-lane powers into Z21-Z25.
	VMOVDQA64 Z0, Z21
	VMOVDQA64 Z1, Z22
	VMOVDQA64 Z2, Z23
	TIMES20(Z22, Z24)
	TIMES20(Z23, Z25)

	// r^8 (lane 0) broadcast into Z16-Z20.
	VPBROADCASTQ X0, Z16
	VPBROADCASTQ X1, Z17
	VPBROADCASTQ X2, Z18
	TIMES20(Z17, Z19)
	TIMES20(Z18, Z20)

	// h = first group.
	LOADMSG(SI, Z0, Z1, Z2)
	ADDQ $128, SI
	DECQ CX
	JZ   final

loop:
	// h = h*r^8 + next group.
	LOADMSG(SI, Z8, Z9, Z10)
	MULACC(Z0, Z1, Z2, Z16, Z17, Z18, Z19, Z20)
	ADDQ $128, SI
	DECQ CX
	JNZ  loop

final:
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	MULACC(Z0, Z1, Z2, Z21, Z22, Z23, Z24, Z25)
	HSUM(Z0, Y0, X0, 0(DI))
	HSUM(Z1, Y1, X1, 8(DI))
	HSUM(Z2, Y2, X2, 16(DI))
	VZEROUPPER
	RET
