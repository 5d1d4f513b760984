package obfs

import (
	"encoding/binary"

	"golang.org/x/crypto/chacha20"

	"github.com/fips-go/fips-go/device/noise"
)

// Header protection (amneziawg-go 3.x, "header_protection_key"): with a
// key set, every message's header is XORed with a ChaCha20 keystream under
// that key whose 12-byte nonce is the first 12 bytes of the datagram, the
// random padding in front of the message (so every S is at least
// NonceSize). A handshake message is masked whole, after its MACs; a
// transport message only its header (type, receiver index, counter), the
// ciphertext being random already.
//
//	datagram: nonce (first 12 bytes of the S padding) ... | masked part | rest
//	masked:   initiation, response, cookie reply: the whole message
//	          transport: its 16-byte header

// NonceSize is the least S padding header protection needs.
const NonceSize = chacha20.NonceSize

// HeaderProtected reports whether headers are masked.
func (p *Params) HeaderProtected() bool { return p.HeaderKey != [32]byte{} }

// maskLen is how many bytes of a message of standard type typ are masked.
func maskLen(typ uint32) int {
	if typ == noise.TypeTransport {
		return noise.TransportHeaderSize
	}
	return size(typ)
}

// keystream returns a ChaCha20 stream for datagram b (nil when off or when
// b is too short to hold a nonce).
func (p *Params) keystream(b []byte) *chacha20.Cipher {
	if !p.HeaderProtected() || len(b) < NonceSize {
		return nil
	}
	c, err := chacha20.NewUnauthenticatedCipher(p.HeaderKey[:], b[:NonceSize])
	if err != nil {
		return nil // cannot happen: the key and nonce have their sizes
	}
	return c
}

// typeMask is the word a received type is XORed with: the keystream's
// first four bytes, or 0 when headers are not protected.
func (p *Params) typeMask(b []byte) (uint32, bool) {
	if !p.HeaderProtected() {
		return 0, true
	}
	c := p.keystream(b)
	if c == nil {
		return 0, false
	}
	var w [4]byte
	c.XORKeyStream(w[:], w[:])
	return binary.LittleEndian.Uint32(w[:]), true
}

// Mask masks (or, being an XOR, unmasks) the message of standard type typ
// in datagram b, which starts with its padding; nothing when headers are
// not protected or b is shorter than the padding and the masked part.
func (p *Params) Mask(b []byte, typ uint32) {
	pad := p.Padding(typ)
	end := pad + maskLen(typ)
	if end > len(b) {
		return
	}
	if c := p.keystream(b); c != nil {
		c.XORKeyStream(b[pad:end], b[pad:end])
	}
}

// Unwrap is Classify followed by Mask, unmasking the message in place,
// with one keystream for both: it runs per received datagram, on the
// device's single receive goroutine.
func (p *Params) Unwrap(b []byte) (typ uint32, off int, ok bool) {
	c := p.keystream(b)
	if c == nil {
		if p.HeaderProtected() {
			return 0, 0, false // shorter than the nonce
		}
		return p.Classify(b)
	}
	var ks [noise.TransportHeaderSize]byte
	c.XORKeyStream(ks[:], ks[:])
	typ, off, ok = p.classify(b, binary.LittleEndian.Uint32(ks[:]))
	if !ok {
		return 0, 0, false
	}
	for i := range ks { // every message is at least a transport header long
		b[off+i] ^= ks[i]
	}
	if typ != noise.TypeTransport { // the rest of the handshake message
		c.XORKeyStream(b[off+len(ks):off+size(typ)], b[off+len(ks):off+size(typ)])
	}
	return typ, off, true
}
