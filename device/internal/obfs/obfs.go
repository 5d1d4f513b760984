// Package obfs is AmneziaWG's disguise of the WireGuard wire format, as
// amneziawg-go (up to v0.2.19, "AmneziaWG 2.0") sends it: signature and junk
// datagrams before each handshake initiation, random bytes in front of every
// message, and configured values (or ranges) in place of the four message
// types. It is pure: it classifies received datagrams and lays out sent
// ones, and the device does the I/O.
//
// The layout:
//
//	initiation:   S1 random bytes | H1 | initiation body (148 bytes with H1)
//	response:     S2 random bytes | H2 | response body   (92 bytes with H2)
//	cookie reply: S3 random bytes | H3 | cookie reply body (64 bytes)
//	transport:    S4 random bytes | H4 | transport body
//
// The type word (4 bytes, little-endian) replaces the standard type and its
// three reserved zero bytes; a sender draws it at random from its range for
// every message. MAC1 and MAC2 are computed over the message after the
// padding, with the configured type in it: a message is verified as
// received, and only its type is rewritten for the Noise parser after the
// MACs have been checked.
package obfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/fips-go/fips-go/device/noise"
)

// Limits. AmneziaWG's documentation bounds the junk and the padded
// handshake messages by 1280 bytes, the smallest IPv6 MTU, so that every
// path carries them unfragmented and every receive buffer holds them; the
// signature packets get the same bound. Transport padding is paid by every
// data packet and taken off the tunnel MTU, so it is kept small.
const (
	MaxJunkCount = 128
	MaxDatagram  = 1280
	MaxS1        = MaxDatagram - noise.InitiationSize
	MaxS2        = MaxDatagram - noise.ResponseSize
	MaxS3        = MaxDatagram - noise.CookieReplySize
	MaxS4        = 256
)

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("invalid obfuscation parameters")

// Range is a range of type words, Lo..Hi inclusive. The zero value is
// unset: the standard type.
type Range struct{ Lo, Hi uint32 }

// Params are the AmneziaWG parameters. The zero value is off: every byte on
// the wire is WireGuard's. H[i] is the range of types sent for the standard
// type i+1; the zero Range (or {i+1, i+1}) keeps the standard type. I[i]
// is the tag specification of signature packet i+1 (see ParseSignature);
// "" sends none.
type Params struct {
	Jc, Jmin, Jmax int // junk datagrams before an initiation, sizes in [Jmin, Jmax]
	S1, S2, S3, S4 int // random bytes before an initiation, response, cookie reply, transport
	H              [4]Range
	I              [5]string
	HeaderKey      [32]byte // header protection (header.go); zero: off
}

// On reports whether any parameter is set.
func (p *Params) On() bool { return *p != Params{} }

// Normalize returns p with every H[i] that is the standard type i+1
// cleared, so that equal configurations compare equal.
func (p Params) Normalize() Params {
	for i := range p.H {
		if p.H[i] == (Range{uint32(i + 1), uint32(i + 1)}) {
			p.H[i] = Range{}
		}
	}
	return p
}

// effective is the range of types of the standard type typ (1 to 4).
func (p *Params) effective(typ uint32) Range {
	if r := p.H[typ-1]; r != (Range{}) {
		return r
	}
	return Range{typ, typ}
}

// Validate checks p against the limits above and the rules that make a
// received datagram's type unambiguous: the four type ranges apart (an
// unset one is its standard type, so h1 = 2 clashes with the response's
// standard type), the padded handshake messages of different sizes,
// Jmin <= Jmax, every signature specification well formed.
func (p *Params) Validate() error {
	if err := p.validateSizes(); err != nil {
		return err
	}
	for i, r := range p.H {
		if r.Lo > r.Hi {
			return fmt.Errorf("%w: h%d %d-%d is an empty range", ErrInvalid, i+1, r.Lo, r.Hi)
		}
	}
	for i := uint32(1); i <= 4; i++ {
		for j := i + 1; j <= 4; j++ {
			a, b := p.effective(i), p.effective(j)
			if a.Lo <= b.Hi && b.Lo <= a.Hi {
				return fmt.Errorf("%w: the types of h%d (%s) and h%d (%s) overlap", ErrInvalid, i, a, j, b)
			}
		}
	}
	if p.HeaderProtected() {
		for i, s := range []int{p.S1, p.S2, p.S3, p.S4} {
			if s < NonceSize {
				return fmt.Errorf("%w: header protection needs s1 to s4 of at least %d bytes (its nonce), s%d is %d", ErrInvalid, NonceSize, i+1, s)
			}
		}
	}
	for i, spec := range p.I {
		if _, err := ParseSignature(spec); err != nil {
			return fmt.Errorf("%w: i%d: %w", ErrInvalid, i+1, err)
		}
	}
	return nil
}

func (p *Params) validateSizes() error {
	switch {
	case p.Jc < 0 || p.Jc > MaxJunkCount:
		return fmt.Errorf("%w: jc %d is not in 0..%d", ErrInvalid, p.Jc, MaxJunkCount)
	case p.Jmin < 0 || p.Jmin > MaxDatagram:
		return fmt.Errorf("%w: jmin %d is not in 0..%d", ErrInvalid, p.Jmin, MaxDatagram)
	case p.Jmax < 0 || p.Jmax > MaxDatagram:
		return fmt.Errorf("%w: jmax %d is not in 0..%d", ErrInvalid, p.Jmax, MaxDatagram)
	case p.Jmin > p.Jmax:
		return fmt.Errorf("%w: jmin %d is larger than jmax %d", ErrInvalid, p.Jmin, p.Jmax)
	}
	for _, s := range []struct {
		name     string
		v, max   int
		what     string
		msgBytes int
	}{
		{"s1", p.S1, MaxS1, "initiation", noise.InitiationSize},
		{"s2", p.S2, MaxS2, "response", noise.ResponseSize},
		{"s3", p.S3, MaxS3, "cookie reply", noise.CookieReplySize},
	} {
		if s.v < 0 || s.v > s.max {
			return fmt.Errorf("%w: %s %d is not in 0..%d (the padded %s must fit in %d bytes)", ErrInvalid, s.name, s.v, s.max, s.what, MaxDatagram)
		}
	}
	if p.S4 < 0 || p.S4 > MaxS4 {
		return fmt.Errorf("%w: s4 %d is not in 0..%d", ErrInvalid, p.S4, MaxS4)
	}
	// The receiver tells the handshake messages apart by size first.
	sizes := [3]int{p.S1 + noise.InitiationSize, p.S2 + noise.ResponseSize, p.S3 + noise.CookieReplySize}
	for i := range sizes {
		for j := i + 1; j < len(sizes); j++ {
			if sizes[i] == sizes[j] {
				return fmt.Errorf("%w: s%d %d and s%d %d make two handshake messages the same size (%d bytes)",
					ErrInvalid, i+1, p.Padding(uint32(i+1)), j+1, p.Padding(uint32(j+1)), sizes[i])
			}
		}
	}
	return nil
}

// String formats r as amneziawg-go does: "5" or "5-9".
func (r Range) String() string {
	if r.Lo == r.Hi {
		return strconv.FormatUint(uint64(r.Lo), 10)
	}
	return strconv.FormatUint(uint64(r.Lo), 10) + "-" + strconv.FormatUint(uint64(r.Hi), 10)
}

// Type is the type word sent for the standard type typ (1 to 4), drawn
// from its range with the random value r.
func (p *Params) Type(typ, r uint32) uint32 {
	if typ < 1 || typ > 4 {
		return typ
	}
	e := p.effective(typ)
	span := uint64(e.Hi) - uint64(e.Lo) + 1
	return e.Lo + uint32(uint64(r)%span)
}

// StandardType maps a received type word back to its standard type; false
// when the word is in no configured range (a standard type that a
// configured one replaces included).
func (p *Params) StandardType(w uint32) (uint32, bool) {
	for t := uint32(1); t <= 4; t++ {
		if e := p.effective(t); e.Lo <= w && w <= e.Hi {
			return t, true
		}
	}
	return 0, false
}

// is reports whether w is a type word of the standard type typ.
func (p *Params) is(typ, w uint32) bool {
	e := p.effective(typ)
	return e.Lo <= w && w <= e.Hi
}

// Padding is how many random bytes precede a message of standard type typ.
func (p *Params) Padding(typ uint32) int {
	switch typ {
	case noise.TypeInitiation:
		return p.S1
	case noise.TypeResponse:
		return p.S2
	case noise.TypeCookieReply:
		return p.S3
	case noise.TypeTransport:
		return p.S4
	}
	return 0
}

// SetType writes a type word for the standard type typ, drawn with r, into
// msg's first four bytes. msg must hold at least four bytes.
func (p *Params) SetType(msg []byte, typ, r uint32) {
	binary.LittleEndian.PutUint32(msg[:4], p.Type(typ, r))
}

// JunkSize maps a random value to a junk datagram size in [Jmin, Jmax].
func (p *Params) JunkSize(r uint32) int {
	span := uint32(p.Jmax-p.Jmin) + 1
	return p.Jmin + int(r%span)
}

// Classify tells which message a received datagram b is, as amneziawg-go
// does, in this order: a datagram of the padded initiation's, response's or
// cookie reply's size whose type word at the padding's end is in that
// message's range is that message; one of at least S4 plus a transport
// header's size whose word at S4 is in the transport range is transport.
// It returns the standard type and the offset where the message (with its
// configured type word) starts, or ok false for anything else: junk,
// signature packets, a standard type that a configured one replaces, a
// size its type cannot have. It never panics.
//
// With header protection the type word is compared unmasked, and the
// message stays masked: Mask unmasks it.
func (p *Params) Classify(b []byte) (typ uint32, off int, ok bool) {
	mask, ok := p.typeMask(b)
	if !ok {
		return 0, 0, false
	}
	return p.classify(b, mask)
}

// classify is Classify with the type words' mask given.
func (p *Params) classify(b []byte, mask uint32) (typ uint32, off int, ok bool) {
	for t := uint32(1); t <= 3; t++ {
		pad := p.Padding(t)
		if len(b) == pad+size(t) && p.is(t, binary.LittleEndian.Uint32(b[pad:])^mask) {
			return t, pad, true
		}
	}
	if pad := p.S4; len(b) >= pad+noise.TransportOverhead && p.is(noise.TypeTransport, binary.LittleEndian.Uint32(b[pad:])^mask) {
		return noise.TypeTransport, pad, true
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
