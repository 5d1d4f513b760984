package chachapoly

// Poly1305 (RFC 8439 section 2.5) for the AEAD.
//
// The scalar path below is portable Go using math/bits. On amd64 with
// AVX-512 IFMA, messages of at least polyVecMin bytes have their leading
// multiple of 128 bytes absorbed by an 8-lane radix-2^44 kernel
// (poly_amd64.s); the rest (remaining full blocks, the padded last block and
// the AEAD length block) always goes through polyBlocks here.
//
// Everything is constant-time with respect to key and message contents:
// the only branches depend on lengths, and there are no table lookups.

import (
	"encoding/binary"
	"math/bits"
)

// polySum sets out to the Poly1305 tag of msg under the one-time key (r || s),
// like x/crypto/poly1305.Sum.
func polySum(out *[16]byte, msg []byte, key *[32]byte) {
	polyTag(out, msg, key, false, polyUseVector(len(msg)))
}

// polyAEAD sets out to the RFC 8439 AEAD tag for ciphertext ct with empty
// additional data: Poly1305(key, ct || zero padding to a multiple of 16 ||
// le64(0) || le64(len(ct))). It does not copy ct.
func polyAEAD(out *[16]byte, ct []byte, key *[32]byte) {
	polyTag(out, ct, key, true, polyUseVector(len(ct)))
}

// polyTag computes the tag of msg (aead=false: plain Poly1305; aead=true: the
// RFC 8439 AEAD construction with empty additional data). vec selects the
// IFMA kernel for the leading multiple of 128 bytes; it is ignored when the
// CPU lacks IFMA. Tests call this directly to force either path.
func polyTag(out *[16]byte, msg []byte, key *[32]byte, aead, vec bool) {
	// Clamped r: r0 < 2^60, r1 < 2^60 and r1 is a multiple of 4.
	r0 := binary.LittleEndian.Uint64(key[0:8]) & 0x0ffffffc0fffffff
	r1 := binary.LittleEndian.Uint64(key[8:16]) & 0x0ffffffc0ffffffc

	msgLen := len(msg)
	var h polyAcc
	if vec && useIFMA && len(msg) >= 128 {
		n := len(msg) &^ 127
		polyVector(&h, msg[:n], r0, r1)
		msg = msg[n:]
	}
	full := len(msg) &^ 15
	if full > 0 {
		polyBlocks(&h, r0, r1, msg[:full], 1)
	}
	if rem := len(msg) - full; rem > 0 {
		var buf [16]byte
		copy(buf[:], msg[full:])
		if aead {
			// Zero padding to 16 bytes; still a full block (2^128 bit set).
			polyBlocks(&h, r0, r1, buf[:], 1)
		} else {
			// Partial final block: append 0x01, no 2^128 bit.
			buf[rem] = 1
			polyBlocks(&h, r0, r1, buf[:], 0)
		}
	}
	if aead {
		// le64(len(ad)) = 0, le64(len(ct)).
		var lens [16]byte
		binary.LittleEndian.PutUint64(lens[8:], uint64(msgLen))
		polyBlocks(&h, r0, r1, lens[:], 1)
	}
	polyFinish(out, &h, key)
}

// polyAcc is the accumulator h = h0 + h1*2^64 + h2*2^128 of the scalar path.
//
// Invariant between blocks: h < 2^130 + 2^128 (so h2 <= 4) and in particular
// h < 2p, which is what polyFinish needs.
type polyAcc struct{ h0, h1, h2 uint64 }

// polyBlocks absorbs the 16-byte blocks of p (len(p) must be a multiple of
// 16) into acc: h = (h + m + hibit*2^128) * r mod p (partially reduced), for
// each block m. r = r0 + r1*2^64 must be clamped. hibit is 1 for full
// blocks, 0 for a final partial block that already carries its 0x01 byte.
//
// With B = 2^64 and clamping (r0, r1 < 2^60, r1 = 0 mod 4):
//
//	h*r = h0*r0 + (h0*r1 + h1*r0)*B + (h1*r1 + h2*r0)*B^2 + h2*r1*B^3
//
// and since B^2 = 2^130/4 = 5/4 (mod p) and 4 divides r1,
// h1*r1*B^2 = h1*(r1/4)*2^130 = h1*s1 and h2*r1*B^3 = h2*s1*B (mod p) with
// s1 = 5*(r1>>2) < 2^60.33. So h*r = t0 + t1*B + t2*B^2 (mod p) with
//
//	t0 = lo(h0*r0) + lo(h1*s1)
//	t1 = hi(h0*r0) + hi(h1*s1) + lo(h0*r1) + lo(h1*r0) + h2*s1 (+ carry)
//	t2 = hi(h0*r1) + hi(h1*r0) + h2*r0 (+ carries)
func polyBlocks(acc *polyAcc, r0, r1 uint64, p []byte, hibit uint64) {
	s1 := (r1 >> 2) * 5
	h0, h1, h2 := acc.h0, acc.h1, acc.h2
	for len(p) >= 16 {
		m0 := binary.LittleEndian.Uint64(p[0:8])
		m1 := binary.LittleEndian.Uint64(p[8:16])
		p = p[16:]

		// h += m. On entry h2 <= 4, so afterwards h2 <= 4 + 1 + 1 = 6.
		var c uint64
		h0, c = bits.Add64(h0, m0, 0)
		h1, c = bits.Add64(h1, m1, c)
		h2 += c + hibit

		// All high halves below are < 2^60.33 (one factor is < 2^64, the
		// other < 2^60.33); h2 <= 6 gives h2*s1 < 2^63 and h2*r0 < 2^63.
		a1, a0 := bits.Mul64(h0, r0)
		b1, b0 := bits.Mul64(h1, s1)
		t0, c := bits.Add64(a0, b0, 0)
		t1, _ := bits.Add64(a1, b1, c) // < 2^61.2: no carry out
		// (t1, t2) += each of the 128-bit values below; the final t2 is
		// < 2^60 + 2^60 + 2^63 + 3 < 2^64, so no carry out of t2 is lost.
		c1, c0 := bits.Mul64(h0, r1)
		t1, c = bits.Add64(t1, c0, 0)
		t2, _ := bits.Add64(c1, 0, c)
		d1, d0 := bits.Mul64(h1, r0)
		t1, c = bits.Add64(t1, d0, 0)
		t2, _ = bits.Add64(t2, d1, c)
		t1, c = bits.Add64(t1, h2*s1, 0)
		t2, _ = bits.Add64(t2, h2*r0, c)

		// Reduce: t = (t0 + t1*B + (t2&3)*B^2) + (t2>>2)*2^130 and
		// 2^130 = 5, so add 5*(t2>>2) = (t2 &^ 3) + (t2 >> 2) (< 2^64).
		// Result: h < 2^130 + 2^65, so h2 <= 4.
		h0, c = bits.Add64(t0, t2&^3, 0)
		h1, c = bits.Add64(t1, 0, c)
		h2 = t2&3 + c
		h0, c = bits.Add64(h0, t2>>2, 0)
		h1, c = bits.Add64(h1, 0, c)
		h2 += c
	}
	acc.h0, acc.h1, acc.h2 = h0, h1, h2
}

// polyFinish writes (h mod p) + s mod 2^128, where s is key[16:32].
// Requires h < 2p (the polyAcc invariant), so one conditional subtraction
// of p suffices; it is done with a mask, not a branch.
func polyFinish(out *[16]byte, acc *polyAcc, key *[32]byte) {
	h0, h1, h2 := acc.h0, acc.h1, acc.h2

	// g = h + 5 = h - p + 2^130. h >= p iff g >= 2^130 iff bit 2 of g2
	// is set (h2 <= 4, so g2 <= 5 and g2>>2 is 0 or 1).
	g0, c := bits.Add64(h0, 5, 0)
	g1, c := bits.Add64(h1, 0, c)
	g2 := h2 + c
	mask := -(g2 >> 2) // all ones when h >= p
	// Only the low 128 bits matter for the tag; g mod 2^128 = (h-p) mod 2^128.
	h0 = h0&^mask | g0&mask
	h1 = h1&^mask | g1&mask

	s0 := binary.LittleEndian.Uint64(key[16:24])
	s1 := binary.LittleEndian.Uint64(key[24:32])
	h0, c = bits.Add64(h0, s0, 0)
	h1, _ = bits.Add64(h1, s1, c)
	binary.LittleEndian.PutUint64(out[0:8], h0)
	binary.LittleEndian.PutUint64(out[8:16], h1)
}
