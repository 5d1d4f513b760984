// Package obfs is AmneziaWG 1.0's disguise of the WireGuard wire format:
// junk datagrams before each handshake initiation, random bytes in front of
// the two handshake messages, and configured values in place of the four
// message types. It is pure: it classifies received datagrams and lays out
// sent ones, and the device does the I/O.
//
// The layout, as amneziawg-go sends it:
//
//	initiation:   S1 random bytes | H1 | initiation body (148 bytes with H1)
//	response:     S2 random bytes | H2 | response body   (92 bytes with H2)
//	cookie reply: H3 | cookie reply body  (64 bytes, never padded)
//	transport:    H4 | transport body     (never padded)
//
// The type word (4 bytes, little-endian) replaces the standard type and its
// three reserved zero bytes. MAC1 and MAC2 are computed over the message
// after the padding, with the configured type in it: a message is verified
// as received, and only its type is rewritten for the Noise parser after
// the MACs have been checked.
package obfs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fips-go/fips-go/device/noise"
)

// Limits. AmneziaWG's documentation bounds the junk and the padded
// handshake messages by 1280 bytes, the smallest IPv6 MTU, so that every
// path carries them unfragmented and every receive buffer holds them.
const (
	MaxJunkCount = 128
	MaxDatagram  = 1280
	MaxS1        = MaxDatagram - noise.InitiationSize
	MaxS2        = MaxDatagram - noise.ResponseSize
)

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("invalid obfuscation parameters")

// Params are the AmneziaWG 1.0 parameters. The zero value is off: every
// byte on the wire is WireGuard's. H[i] is the type sent for the standard
// type i+1; 0 (or i+1 itself) keeps the standard type.
type Params struct {
	Jc, Jmin, Jmax int // junk datagrams before an initiation, sizes in [Jmin, Jmax]
	S1, S2         int // random bytes before an initiation and a response
	H              [4]uint32
}

// On reports whether any parameter is set.
func (p *Params) On() bool { return *p != Params{} }

// Normalize returns p with every H[i] equal to the standard type i+1
// cleared, so that equal configurations compare equal.
func (p Params) Normalize() Params {
	for i := range p.H {
		if p.H[i] == uint32(i+1) {
			p.H[i] = 0
		}
	}
	return p
}

// Validate checks p against the limits above and the rules amneziawg-go
// enforces: the four types distinct, the padded handshake messages of
// different sizes (the receiver tells them apart by size), Jmin <= Jmax.
// A configured type may not be one of the standard types 1 to 4 other than
// its own (amneziawg-go silently reads those as "unset").
func (p *Params) Validate() error {
	switch {
	case p.Jc < 0 || p.Jc > MaxJunkCount:
		return fmt.Errorf("%w: jc %d is not in 0..%d", ErrInvalid, p.Jc, MaxJunkCount)
	case p.Jmin < 0 || p.Jmin > MaxDatagram:
		return fmt.Errorf("%w: jmin %d is not in 0..%d", ErrInvalid, p.Jmin, MaxDatagram)
	case p.Jmax < 0 || p.Jmax > MaxDatagram:
		return fmt.Errorf("%w: jmax %d is not in 0..%d", ErrInvalid, p.Jmax, MaxDatagram)
	case p.Jmin > p.Jmax:
		return fmt.Errorf("%w: jmin %d is larger than jmax %d", ErrInvalid, p.Jmin, p.Jmax)
	case p.S1 < 0 || p.S1 > MaxS1:
		return fmt.Errorf("%w: s1 %d is not in 0..%d (the padded initiation must fit in %d bytes)", ErrInvalid, p.S1, MaxS1, MaxDatagram)
	case p.S2 < 0 || p.S2 > MaxS2:
		return fmt.Errorf("%w: s2 %d is not in 0..%d (the padded response must fit in %d bytes)", ErrInvalid, p.S2, MaxS2, MaxDatagram)
	case noise.InitiationSize+p.S1 == noise.ResponseSize+p.S2:
		return fmt.Errorf("%w: s1 %d and s2 %d make the initiation and the response the same size (s2 must not be s1+%d)",
			ErrInvalid, p.S1, p.S2, noise.InitiationSize-noise.ResponseSize)
	}
	for i, h := range p.H {
		if h >= 1 && h <= 4 && h != uint32(i+1) {
			return fmt.Errorf("%w: h%d %d is one of the standard types 1-4", ErrInvalid, i+1, h)
		}
	}
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			if p.Type(uint32(i+1)) == p.Type(uint32(j+1)) {
				return fmt.Errorf("%w: h%d and h%d are both %d", ErrInvalid, i+1, j+1, p.Type(uint32(i+1)))
			}
		}
	}
	return nil
}

// Type is the type word sent for the standard type typ (1 to 4).
func (p *Params) Type(typ uint32) uint32 {
	if typ >= 1 && typ <= 4 && p.H[typ-1] != 0 {
		return p.H[typ-1]
	}
	return typ
}

// StandardType maps a received type word back to its standard type; false
// when the word is no configured type (a standard type that a configured
// one replaces included).
func (p *Params) StandardType(w uint32) (uint32, bool) {
	for t := uint32(1); t <= 4; t++ {
		if w == p.Type(t) {
			return t, true
		}
	}
	return 0, false
}

// Padding is how many random bytes precede a message of standard type typ.
func (p *Params) Padding(typ uint32) int {
	switch typ {
	case noise.TypeInitiation:
		return p.S1
	case noise.TypeResponse:
		return p.S2
	}
	return 0
}

// SetType writes the type word for the standard type typ into msg's first
// four bytes. msg must hold at least four bytes.
func (p *Params) SetType(msg []byte, typ uint32) {
	binary.LittleEndian.PutUint32(msg[:4], p.Type(typ))
}

// JunkSize maps a random value to a junk datagram size in [Jmin, Jmax].
func (p *Params) JunkSize(r uint32) int {
	span := uint32(p.Jmax-p.Jmin) + 1
	return p.Jmin + int(r%span)
}

// Classify tells which message a received datagram b is, as amneziawg-go
// does: a datagram of a padded handshake message's size whose type word at
// the padding's end is that message's is that message; any other datagram
// is what its first four bytes say. It returns the standard type and the
// offset where the message (with its configured type word) starts, or ok
// false for anything else: junk, a standard type that a configured one
// replaces, a size its type cannot have. It never panics.
func (p *Params) Classify(b []byte) (typ uint32, off int, ok bool) {
	for _, t := range [...]uint32{noise.TypeInitiation, noise.TypeResponse} {
		pad := p.Padding(t)
		if pad > 0 && len(b) == pad+size(t) && binary.LittleEndian.Uint32(b[pad:]) == p.Type(t) {
			return t, pad, true
		}
	}
	if len(b) < 4 {
		return 0, 0, false
	}
	w := binary.LittleEndian.Uint32(b)
	for t := uint32(1); t <= 4; t++ {
		if w != p.Type(t) {
			continue
		}
		if p.Padding(t) > 0 {
			return 0, 0, false // a padded message without its padding
		}
		if t == noise.TypeTransport {
			return t, 0, len(b) >= noise.TransportOverhead
		}
		return t, 0, len(b) == size(t)
	}
	return 0, 0, false
}

// Standard rewrites the type word of a classified message to the standard
// type typ, for the Noise parsers; the MACs must have been checked first.
func Standard(msg []byte, typ uint32) {
	binary.LittleEndian.PutUint32(msg[:4], typ)
}

func size(typ uint32) int {
	switch typ {
	case noise.TypeInitiation:
		return noise.InitiationSize
	case noise.TypeResponse:
		return noise.ResponseSize
	case noise.TypeCookieReply:
		return noise.CookieReplySize
	}
	return noise.TransportOverhead
}
