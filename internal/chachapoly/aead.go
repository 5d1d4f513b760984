// Package chachapoly is the ChaCha20-Poly1305 AEAD (RFC 8439) of the
// transport data path: AVX-512 ChaCha20 and AVX-512 IFMA Poly1305 where the
// CPU has them, golang.org/x/crypto's implementation everywhere else and for
// messages with additional data (the handshake's, which is not hot).
//
// The data path spends most of its user-space time in this AEAD: on one TCP
// stream about 40% of the sender's CPU is sealing and 30% of the receiver's
// is opening (issue 10's profile). x/crypto's amd64 code is AVX2 with a
// scalar Poly1305; AVX-512 rotates in one instruction and IFMA multiplies
// eight Poly1305 blocks at once.
package chachapoly

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"

	"golang.org/x/crypto/chacha20poly1305"
)

const (
	KeySize   = chacha20poly1305.KeySize
	NonceSize = chacha20poly1305.NonceSize
	Overhead  = chacha20poly1305.Overhead

	// maxPlaintext is RFC 8439's limit with a 32-bit block counter that
	// starts at 1 for the data: (2^32 - 1) blocks of 64 bytes.
	maxPlaintext = (1<<32 - 1) * 64
	// fastMin is the shortest plaintext the fast path takes. Below it
	// x/crypto's code is as fast or faster (measured: 64 bytes 167 ns
	// against 205, 256 bytes 240 against 252, 512 bytes even): its single
	// blocks beat an 8-lane pass, and the IFMA Poly1305 needs 256 bytes to
	// pay for its setup.
	fastMin = 512
	// pass16 and pass24 are how much data the first 16 or 24 keystream
	// blocks cover after block 0, which keys Poly1305. A full-size packet
	// (1420-1440 bytes) takes one 24-block pass, which runs a 16-lane and
	// an 8-lane state interleaved: 260-280 ns against 315-340 for the two
	// passes one after the other.
	pass16 = 15 * 64
	pass24 = 23 * 64
)

var errOpen = errors.New("chacha20poly1305: message authentication failed")

// fastCPU reports whether this CPU can take the AVX-512 path.
var fastCPU = useAVX512 && useIFMA

// Implementation names the code that seals and opens packets of 512 bytes
// or more on this CPU, for the daemon's start-up log: benchmarks on
// different machines are read differently with and without it.
func Implementation() string {
	if fastCPU {
		return "AVX-512 ChaCha20, IFMA Poly1305"
	}
	return "golang.org/x/crypto"
}

// AEAD is ChaCha20-Poly1305 under one key. It is safe for concurrent use
// and allocates nothing on the fast path.
type AEAD struct {
	key      [KeySize]byte
	fallback cipher.AEAD
}

var _ cipher.AEAD = (*AEAD)(nil)

// New returns the AEAD for a 32-byte key.
func New(key []byte) (*AEAD, error) {
	fb, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, err
	}
	a := &AEAD{fallback: fb}
	copy(a.key[:], key)
	return a, nil
}

func (a *AEAD) NonceSize() int { return NonceSize }
func (a *AEAD) Overhead() int  { return Overhead }

// Seal encrypts and authenticates plaintext and appends the result to dst,
// as cipher.AEAD.Seal. To seal in place, plaintext must start where the
// output does (dst[len(dst):] and plaintext share their first byte).
func (a *AEAD) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if !fastCPU || len(plaintext) < fastMin || len(additionalData) > 0 || len(nonce) != NonceSize ||
		uint64(len(plaintext)) > maxPlaintext {
		return a.fallback.Seal(dst, nonce, plaintext, additionalData)
	}
	ret, out := grow(dst, len(plaintext)+Overhead)
	if inexactOverlap(out, plaintext) {
		panic("chachapoly: invalid buffer overlap")
	}
	var polyKey [32]byte
	a.crypt(out[:len(plaintext)], plaintext, (*[NonceSize]byte)(nonce), &polyKey)
	var tag [16]byte
	polyAEAD(&tag, out[:len(plaintext)], &polyKey)
	copy(out[len(plaintext):], tag[:])
	return ret
}

// Open authenticates and decrypts ciphertext (which ends with the tag) and
// appends the plaintext to dst, as cipher.AEAD.Open. The tag is checked
// before anything is decrypted: on failure dst's spare capacity is left as
// it was, even when opening in place.
func (a *AEAD) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if !fastCPU || len(ciphertext) < fastMin+Overhead || len(additionalData) > 0 || len(nonce) != NonceSize ||
		uint64(len(ciphertext)-Overhead) > maxPlaintext {
		return a.fallback.Open(dst, nonce, ciphertext, additionalData)
	}
	n := len(ciphertext) - Overhead
	ct := ciphertext[:n]
	ret, out := grow(dst, n)
	if inexactOverlap(out, ct) {
		panic("chachapoly: invalid buffer overlap")
	}
	st := newChachaState(&a.key, (*[NonceSize]byte)(nonce), 0)
	var ks [1536]byte
	first := firstBlocks(&ks, &st, n)
	var tag [16]byte
	polyAEAD(&tag, ct, (*[32]byte)(ks[:32]))
	if subtle.ConstantTimeCompare(tag[:], ciphertext[n:]) != 1 {
		return nil, errOpen
	}
	xorFrom(out, ct, ks[64:64+first], &st)
	return ret, nil
}

// crypt XORs src with the keystream of blocks 1 on into dst and sets
// polyKey from block 0.
//
// Neither crypt nor Open wipes the keystream it leaves on the stack (nor
// does x/crypto): whoever can read this goroutine's stack can read a.key
// on the heap, which every keystream and Poly1305 key derives from.
func (a *AEAD) crypt(dst, src []byte, nonce *[NonceSize]byte, polyKey *[32]byte) {
	st := newChachaState(&a.key, nonce, 0)
	var ks [1536]byte
	first := firstBlocks(&ks, &st, len(src))
	copy(polyKey[:], ks[:32])
	xorFrom(dst, src, ks[64:64+first], &st)
}

// firstBlocks computes the keystream from block 0 on into ks, 16 blocks
// for a message that fits in them and 24 otherwise, and returns how many
// of the message's bytes it covers.
func firstBlocks(ks *[1536]byte, st *chachaState, n int) int {
	if n <= pass16 {
		keyStream16((*[1024]byte)(ks[:1024]), st)
		return n
	}
	keyStream24(ks, st)
	return min(n, pass24)
}

// xorFrom encrypts (or decrypts) src into dst with the keystream of its
// first len(ks) bytes in ks, and the rest computed from the block after.
func xorFrom(dst, src, ks []byte, st *chachaState) {
	first := len(ks)
	subtle.XORBytes(dst[:first], src[:first], ks)
	if len(src) > first {
		st[12] = uint32(1 + first/64)
		xorKeyStream(dst[first:len(src)], src[first:], st)
	}
}

// grow extends in by n bytes, reallocating if needed, and returns the whole
// slice and the new part, as the standard library's AEADs do.
func grow(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}
