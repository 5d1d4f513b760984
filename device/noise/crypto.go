package noise

import (
	"crypto/ecdh"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
)

// The primitives of WireGuard's handshake (paper, section 5.4). The short
// fixed-size inputs the handshake feeds them are assembled in stack buffers
// and hashed with blake2s.Sum256, so hashing and key derivation allocate
// nothing; longer inputs (never produced by the handshake itself) fall back
// to a heap buffer.

const (
	hashSize  = blake2s.Size    // HASH and HMAC output
	macSize   = blake2s.Size128 // MAC output (MAC1, MAC2, cookie)
	blockSize = blake2s.BlockSize
	// shortInput is the longest input that is hashed from a stack buffer.
	shortInput = 2 * blockSize
)

// blake2sConcat returns BLAKE2s-256(a || b).
func blake2sConcat(a, b []byte) [hashSize]byte {
	if len(a)+len(b) > shortInput {
		// A heap copy rather than the streaming hash.Hash: passing a and b
		// to an interface method would make them escape in every call.
		buf := append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
		out := blake2s.Sum256(buf)
		clear(buf)
		return out
	}
	var buf [shortInput]byte
	n := copy(buf[:], a)
	n += copy(buf[n:], b)
	out := blake2s.Sum256(buf[:n])
	clear(buf[:n]) // b may be key material (HMAC pads)
	return out
}

// mixHash is HASH(h || data), the transcript update.
func mixHash(h *[hashSize]byte, data []byte) [hashSize]byte {
	return blake2sConcat(h[:], data)
}

// hmacBlake2s is HMAC(key, msg) over BLAKE2s-256 (RFC 2104), the building
// block of the KDF. WireGuard only uses 32-byte keys, but longer ones are
// hashed first as the RFC says.
func hmacBlake2s(key, msg []byte) [hashSize]byte {
	var k [blockSize]byte
	if len(key) > blockSize {
		sum := blake2s.Sum256(key)
		copy(k[:], sum[:])
	} else {
		copy(k[:], key)
	}
	var pad [blockSize]byte
	for i := range k {
		pad[i] = k[i] ^ 0x36
	}
	inner := blake2sConcat(pad[:], msg)
	for i := range k {
		pad[i] = k[i] ^ 0x5c
	}
	out := blake2sConcat(pad[:], inner[:])
	clear(k[:])
	clear(pad[:])
	clear(inner[:])
	return out
}

// hmacChained is HMAC(key, prev || b), the second and third KDF outputs.
func hmacChained(key []byte, prev *[hashSize]byte, b byte) [hashSize]byte {
	var msg [hashSize + 1]byte
	copy(msg[:], prev[:])
	msg[hashSize] = b
	out := hmacBlake2s(key, msg[:])
	clear(msg[:])
	return out
}

// kdf1 is KDF1(key, input) of the paper: HKDF with BLAKE2s, one output.
func kdf1(key, input []byte) (t0 [hashSize]byte) {
	prk := hmacBlake2s(key, input)
	t0 = hmacBlake2s(prk[:], []byte{1})
	clear(prk[:])
	return t0
}

// kdf2 is KDF2(key, input): two chained outputs.
func kdf2(key, input []byte) (t0, t1 [hashSize]byte) {
	prk := hmacBlake2s(key, input)
	t0 = hmacBlake2s(prk[:], []byte{1})
	t1 = hmacChained(prk[:], &t0, 2)
	clear(prk[:])
	return t0, t1
}

// kdf3 is KDF3(key, input): three chained outputs.
func kdf3(key, input []byte) (t0, t1, t2 [hashSize]byte) {
	prk := hmacBlake2s(key, input)
	t0 = hmacBlake2s(prk[:], []byte{1})
	t1 = hmacChained(prk[:], &t0, 2)
	t2 = hmacChained(prk[:], &t1, 3)
	clear(prk[:])
	return t0, t1, t2
}

// mac is MAC(key, msg): keyed BLAKE2s with a 16-byte output.
func mac(key, msg []byte) [macSize]byte {
	var out [macSize]byte
	h, err := blake2s.New128(key)
	if err != nil {
		// Keys here are always 16 or 32 bytes; an empty MAC is never
		// accepted by a constant-time compare against a real one.
		return out
	}
	h.Write(msg)
	h.Sum(out[:0])
	return out
}

// initialChainKey is C_0 = HASH(Construction).
func initialChainKey() [hashSize]byte {
	return blake2s.Sum256([]byte(Construction))
}

// initialHash is H_0 = HASH(C_0 || Identifier || static), where static is the
// responder's public key (both sides start from it).
func initialHash(responder *PublicKey) [hashSize]byte {
	c := initialChainKey()
	h := blake2sConcat(c[:], []byte(Identifier))
	return mixHash(&h, responder[:])
}

// sealZero is AEAD(key, 0, plaintext, ad) appended to dst: every handshake
// key seals exactly once, so the nonce is always zero.
func sealZero(key *[hashSize]byte, dst, plaintext, ad []byte) ([]byte, error) {
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		return nil, fmt.Errorf("noise: ChaCha20-Poly1305 unavailable: %w", err)
	}
	var nonce [chacha20poly1305.NonceSize]byte
	return aead.Seal(dst, nonce[:], plaintext, ad), nil
}

// openZero reverses sealZero.
func openZero(key *[hashSize]byte, dst, ciphertext, ad []byte) ([]byte, error) {
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		return nil, fmt.Errorf("noise: ChaCha20-Poly1305 unavailable: %w", err)
	}
	var nonce [chacha20poly1305.NonceSize]byte
	out, err := aead.Open(dst, nonce[:], ciphertext, ad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// dh is DH(priv, pub), refusing low-order points (an all-zero result), as
// the paper requires.
func dh(priv *ecdh.PrivateKey, pub *PublicKey) ([hashSize]byte, error) {
	var out [hashSize]byte
	pk, err := ecdh.X25519().NewPublicKey(pub[:])
	if err != nil {
		return out, fmt.Errorf("%w: %v", ErrInvalidPublicKey, err)
	}
	ss, err := priv.ECDH(pk)
	if err != nil {
		return out, ErrInvalidPublicKey
	}
	copy(out[:], ss)
	clear(ss)
	return out, nil
}

// newX25519 wraps a private key for ecdh. Keeping the wrapped key avoids
// recomputing the public key (a second scalar multiplication) on every DH,
// which is what ecdh.NewPrivateKey does. It fails only in FIPS-140-only
// mode, which forbids X25519 and so WireGuard altogether.
func newX25519(priv *PrivateKey) (*ecdh.PrivateKey, error) {
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		return nil, fmt.Errorf("noise: X25519 unavailable: %w", err)
	}
	return k, nil
}

// newEphemeral draws a fresh ephemeral key: 32 bytes from r, clamped.
func newEphemeral(r io.Reader) (*ecdh.PrivateKey, PublicKey, error) {
	var sk PrivateKey
	if _, err := io.ReadFull(r, sk[:]); err != nil {
		return nil, PublicKey{}, fmt.Errorf("%w: %w", ErrRandom, err)
	}
	sk.clamp()
	k, err := newX25519(&sk)
	clear(sk[:])
	if err != nil {
		return nil, PublicKey{}, err
	}
	var pub PublicKey
	copy(pub[:], k.PublicKey().Bytes())
	return k, pub, nil
}

// TimestampSize is the length of a TAI64N timestamp.
const TimestampSize = 12

const (
	tai64Base = uint64(1<<62) + 10 // TAI64 label of 1970 (TAI is 10 s ahead of UTC)
	// whitener rounds nanoseconds down so a timestamp does not reveal the
	// sender's fine-grained clock (about 16.8 ms resolution).
	whitener = uint32(1<<24 - 1)
)

// TAI64N is the 12-byte timestamp an initiation carries: big-endian TAI64
// seconds, then big-endian nanoseconds rounded down to a multiple of 2^24.
// Responders only compare timestamps byte-wise for freshness.
func TAI64N(t time.Time) [TimestampSize]byte {
	var ts [TimestampSize]byte
	binary.BigEndian.PutUint64(ts[:8], tai64Base+uint64(t.Unix()))
	binary.BigEndian.PutUint32(ts[8:], uint32(t.Nanosecond())&^whitener)
	return ts
}
