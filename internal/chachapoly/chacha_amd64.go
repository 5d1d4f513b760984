//go:build amd64 && !purego

package chachapoly

import "golang.org/x/sys/cpu"

// chacha_amd64.s is written by the program in _asm, which implements the
// declarations below. It is a module of its own, so that this one does not
// depend on avo, and runs with -tags purego, so that it does not link the
// assembly it rewrites.
//go:generate go run -C _asm -tags purego . -out ../chacha_amd64.s -pkg chachapoly

// useAVX512 reports whether the AVX-512 ChaCha20 code in chacha_amd64.s can
// run on this CPU.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW

// keyStream16 writes 16 consecutive keystream blocks (1024 bytes) starting
// at block counter s[12]. It does not modify *s. Counters wrap modulo 2^32
// (without carrying into the nonce).
func keyStream16(ks *[1024]byte, s *chachaState) {
	if useAVX512 {
		keyStream16AVX512(ks, s)
		return
	}
	keyStream16Generic(ks, s)
}

// keyStream24 writes 24 consecutive keystream blocks (1536 bytes) starting
// at block counter s[12], as keyStream16 does for 16: a 1420-1472-byte
// packet's Poly1305 key (block 0) and all its keystream in one pass. It does
// not modify *s. Counters wrap modulo 2^32 (without carrying into the nonce).
func keyStream24(ks *[1536]byte, s *chachaState) {
	if useAVX512 {
		keyStream24AVX512(ks, s)
		return
	}
	keyStream24Generic(ks, s)
}

// xorKeyStream sets dst[i] = src[i] ^ keystream[i] for i < len(src), the
// keystream starting at block counter s[12]. len(dst) >= len(src); dst and
// src may be the same slice (in place) but must not otherwise overlap. Any
// length works, including 0 and lengths that are not multiples of 64; no
// byte of src or dst at or past len(src) is read or written. It does not
// modify *s. The caller guarantees that s[12] + ceil(len(src)/64) does not
// pass 2^32.
func xorKeyStream(dst, src []byte, s *chachaState) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1] // panics if dst is too short
	if useAVX512 {
		xorKeyStreamAVX512(&dst[0], &src[0], len(src), s)
		return
	}
	xorKeyStreamGeneric(dst, src, s)
}

// keyStream16AVX512 is keyStream16 in AVX-512 assembly.
//
//go:noescape
func keyStream16AVX512(ks *[1024]byte, s *chachaState)

// keyStream24AVX512 is keyStream24 in AVX-512 assembly.
//
//go:noescape
func keyStream24AVX512(ks *[1536]byte, s *chachaState)

// xorKeyStreamAVX512 is xorKeyStream in AVX-512 assembly for n > 0 bytes.
//
//go:noescape
func xorKeyStreamAVX512(dst, src *byte, n int, s *chachaState)
