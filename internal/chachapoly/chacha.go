package chachapoly

import (
	"encoding/binary"
	"math/bits"
)

// chachaState is the 16-word ChaCha20 input block: constants, key,
// counter (word 12), nonce (words 13-15).
type chachaState [16]uint32

// newChachaState returns the RFC 8439 input block for key, nonce and the
// block counter.
func newChachaState(key *[32]byte, nonce *[12]byte, counter uint32) chachaState {
	var s chachaState
	s[0], s[1], s[2], s[3] = 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574
	for i := range 8 {
		s[4+i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	s[12] = counter
	s[13] = binary.LittleEndian.Uint32(nonce[0:])
	s[14] = binary.LittleEndian.Uint32(nonce[4:])
	s[15] = binary.LittleEndian.Uint32(nonce[8:])
	return s
}

// keyStream16Generic is the portable keyStream16.
func keyStream16Generic(ks *[1024]byte, s *chachaState) {
	for i := range 16 {
		blockGeneric((*[64]byte)(ks[64*i:]), s, s[12]+uint32(i))
	}
}

// keyStream24Generic is the portable keyStream24.
func keyStream24Generic(ks *[1536]byte, s *chachaState) {
	for i := range 24 {
		blockGeneric((*[64]byte)(ks[64*i:]), s, s[12]+uint32(i))
	}
}

// xorKeyStreamGeneric is the portable fallback of xorKeyStream, for CPUs
// without AVX-512, which the AEAD does not send here: simple, not fast.
func xorKeyStreamGeneric(dst, src []byte, s *chachaState) {
	var ks [64]byte
	for ctr := s[12]; len(src) > 0; ctr++ {
		blockGeneric(&ks, s, ctr)
		n := min(len(src), 64)
		for i := range n {
			dst[i] = src[i] ^ ks[i]
		}
		dst, src = dst[n:], src[n:]
	}
}

// blockGeneric writes the keystream block of s with block counter ctr
// (portable fallback).
func blockGeneric(out *[64]byte, s *chachaState, ctr uint32) {
	x := *s
	x[12] = ctr
	qr := func(a, b, c, d int) {
		x[a] += x[b]
		x[d] = bits.RotateLeft32(x[d]^x[a], 16)
		x[c] += x[d]
		x[b] = bits.RotateLeft32(x[b]^x[c], 12)
		x[a] += x[b]
		x[d] = bits.RotateLeft32(x[d]^x[a], 8)
		x[c] += x[d]
		x[b] = bits.RotateLeft32(x[b]^x[c], 7)
	}
	for range 10 {
		qr(0, 4, 8, 12)
		qr(1, 5, 9, 13)
		qr(2, 6, 10, 14)
		qr(3, 7, 11, 15)
		qr(0, 5, 10, 15)
		qr(1, 6, 11, 12)
		qr(2, 7, 8, 13)
		qr(3, 4, 9, 14)
	}
	for i := range 16 {
		in := s[i]
		if i == 12 {
			in = ctr
		}
		binary.LittleEndian.PutUint32(out[4*i:], x[i]+in)
	}
}
