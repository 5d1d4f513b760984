//go:build amd64 && !purego

package chachapoly

import (
	"math/bits"

	"golang.org/x/sys/cpu"
)

// useIFMA reports whether the AVX-512 IFMA Poly1305 kernel can be used.
var useIFMA = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512IFMA

// polyVecMin is the message length (bytes) from which the IFMA kernel is
// used; below it the scalar path is faster because the kernel has a fixed
// cost (computing r^1..r^8, the final lane combination). Measured with
// BenchmarkPolyCrossover.
const polyVecMin = 256

// polyUseVector reports whether a message of n bytes takes the vector path.
func polyUseVector(n int) bool { return useIFMA && n >= polyVecMin }

const mask44 = 1<<44 - 1

// polyVector absorbs msg (len(msg) a non-zero multiple of 128) into acc,
// which must be zero on entry, using the IFMA kernel. r = r0 + r1*2^64 is
// the clamped key. On return acc satisfies the polyAcc invariant.
func polyVector(acc *polyAcc, msg []byte, r0, r1 uint64) {
	var h [3]uint64
	// r in radix 2^44: limbs < 2^44, 2^44, 2^36 (r < 2^124).
	polyIFMA(&h, &msg[0], len(msg)/128, r0&mask44, (r0>>44|r1<<20)&mask44, r1>>24)

	// The kernel returns the sum over 8 lanes of limbs bounded by
	// 2^44, 2^44+2^6, 2^42: a0 < 2^47, a1 < 2^47+2^9, a2 < 2^45, so the
	// value a0 + a1*2^44 + a2*2^88 < 2^134. Convert to radix 2^64.
	a0, a1, a2 := h[0], h[1], h[2]
	x0, c := bits.Add64(a0, a1<<44, 0)
	x1, c := bits.Add64(a1>>20, a2<<24, c)
	x2 := a2>>40 + c // < 2^6
	// Partial reduction: fold x2>>2 (< 16) times 2^130 = 5.
	// Afterwards x < 2^130 + 80, i.e. x2 <= 4 (polyAcc invariant).
	k := x2 >> 2
	x2 &= 3
	x0, c = bits.Add64(x0, 5*k, 0)
	x1, c = bits.Add64(x1, 0, c)
	x2 += c
	acc.h0, acc.h1, acc.h2 = x0, x1, x2
}

// polyIFMA absorbs groups*128 bytes at msg into eight radix-2^44 lane
// accumulators (lane j takes blocks j, j+8, ...; starting from zero),
// multiplies each lane by the power of r that brings it to the end of the
// processed data, and stores the lane sums of the three limbs to h.
// r0, r1, r2 are the radix-2^44 limbs of the clamped r. groups >= 1.
//
//go:noescape
func polyIFMA(h *[3]uint64, msg *byte, groups int, r0, r1, r2 uint64)
