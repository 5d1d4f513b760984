// Package noise is WireGuard's handshake (Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s),
// its cookie mechanism and its transport keypairs, as pure code: no sockets, no
// goroutines and no clock; callers pass the current time in.
package noise

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/curve25519"
)

// KeySize is the length of every key WireGuard uses.
const KeySize = 32

type (
	// PrivateKey is a clamped Curve25519 scalar.
	PrivateKey [KeySize]byte
	// PublicKey is a Curve25519 point.
	PublicKey [KeySize]byte
	// PresharedKey is the optional symmetric key mixed into the handshake.
	PresharedKey [KeySize]byte
)

// ErrKeyFormat is returned (wrapped) for keys that do not parse.
var ErrKeyFormat = errors.New("noise: malformed key")

// GeneratePrivateKey reads 32 bytes from r and clamps them.
func GeneratePrivateKey(r io.Reader) (PrivateKey, error) {
	var k PrivateKey
	if _, err := io.ReadFull(r, k[:]); err != nil {
		return k, fmt.Errorf("noise: reading random key: %w", err)
	}
	k.clamp()
	return k, nil
}

// GeneratePresharedKey reads 32 random bytes from r.
func GeneratePresharedKey(r io.Reader) (PresharedKey, error) {
	var k PresharedKey
	if _, err := io.ReadFull(r, k[:]); err != nil {
		return k, fmt.Errorf("noise: reading random key: %w", err)
	}
	return k, nil
}

func (k *PrivateKey) clamp() {
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
}

// PublicKey derives the public key of k. Its receiver is a value so that
// it chains onto a call that returns a key.
func (k PrivateKey) PublicKey() PublicKey {
	var pub PublicKey
	c := k
	c.clamp()
	curve25519.ScalarBaseMult((*[32]byte)(&pub), (*[32]byte)(&c))
	return pub
}

// IsZero reports, in constant time, whether every byte of b is zero.
func isZero(b []byte) bool {
	var acc byte
	for _, x := range b {
		acc |= x
	}
	return subtle.ConstantTimeByteEq(acc, 0) == 1
}

// IsZero reports whether the key is all zeros (the UAPI way of saying "none").
func (k PrivateKey) IsZero() bool { return isZero(k[:]) }

// IsZero reports whether the key is all zeros.
func (k PublicKey) IsZero() bool { return isZero(k[:]) }

// IsZero reports whether the key is all zeros (no preshared key).
func (k PresharedKey) IsZero() bool { return isZero(k[:]) }

// Equal compares in constant time.
func (k PublicKey) Equal(o PublicKey) bool { return subtle.ConstantTimeCompare(k[:], o[:]) == 1 }

func (k PublicKey) String() string { return k.Base64() }

// Base64 returns the 44-character form wg(8) and config files use.
func (k PublicKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Base64 returns the secret in the form wg(8) and config files use. It is the
// one way to print a private key; String and fmt only ever show a placeholder.
func (k PrivateKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Base64 returns the secret in the form wg(8) and config files use; as for
// PrivateKey, String and fmt redact it.
func (k PresharedKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Secrets are redacted under every fmt verb (%v, %+v, %#v, %s, %x, %d, ...),
// so a status struct or a config logged with %v never carries key material.
// Format takes precedence over String and GoString in fmt; String and
// GoString are there for callers that use them directly.
const (
	privateKeyRedacted   = "(private key)"
	presharedKeyRedacted = "(preshared key)"
)

func (k PrivateKey) String() string                  { return privateKeyRedacted }
func (k PrivateKey) GoString() string                { return privateKeyRedacted }
func (k PrivateKey) Format(f fmt.State, verb rune)   { io.WriteString(f, privateKeyRedacted) }
func (k PresharedKey) String() string                { return presharedKeyRedacted }
func (k PresharedKey) GoString() string              { return presharedKeyRedacted }
func (k PresharedKey) Format(f fmt.State, verb rune) { io.WriteString(f, presharedKeyRedacted) }

// Hex returns the lowercase hex form used by the UAPI protocol.
func (k PrivateKey) Hex() string   { return hex.EncodeToString(k[:]) }
func (k PublicKey) Hex() string    { return hex.EncodeToString(k[:]) }
func (k PresharedKey) Hex() string { return hex.EncodeToString(k[:]) }

// ParseKeyBase64 decodes the 44-character base64 form used by wg(8) and config files.
func ParseKeyBase64(s string) ([KeySize]byte, error) {
	var k [KeySize]byte
	if len(s) != 44 || s[43] != '=' {
		return k, fmt.Errorf("%w: want 44 base64 characters ending in '='", ErrKeyFormat)
	}
	n, err := base64.StdEncoding.Decode(k[:], []byte(s))
	if err != nil || n != KeySize {
		return [KeySize]byte{}, fmt.Errorf("%w: invalid base64", ErrKeyFormat)
	}
	return k, nil
}

// ParseKeyHex decodes the 64-character hex form used by the UAPI protocol.
func ParseKeyHex(s string) ([KeySize]byte, error) {
	var k [KeySize]byte
	if len(s) != 2*KeySize {
		return k, fmt.Errorf("%w: want 64 hex characters, got %d", ErrKeyFormat, len(s))
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return [KeySize]byte{}, fmt.Errorf("%w: invalid hex", ErrKeyFormat)
	}
	return k, nil
}
