package noise

import "crypto/ecdh"

// Static is the device's long-term identity with the values derived from it
// once, when the private key is set, instead of on every handshake. It is
// immutable after NewStatic and so safe to share between goroutines.
type Static struct {
	Private PrivateKey
	Public  PublicKey

	x25519 *ecdh.PrivateKey // nil only if X25519 is unavailable (see err)
	err    error
	// hash0 is the transcript hash every initiation to us starts from:
	// H_0 mixed with our public key.
	hash0 [hashSize]byte
}

// NewStatic derives the public key and the precomputed values of priv.
func NewStatic(priv PrivateKey) *Static {
	s := &Static{Private: priv}
	s.x25519, s.err = newX25519(&priv)
	if s.err != nil {
		s.Public = priv.PublicKey()
	} else {
		copy(s.Public[:], s.x25519.PublicKey().Bytes())
	}
	s.hash0 = initialHash(&s.Public)
	return s
}

// usable returns why s cannot take part in a handshake, or nil.
func (s *Static) usable() error {
	if s == nil {
		return ErrNoPrivateKey
	}
	return s.err
}
