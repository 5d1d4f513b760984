package noise

import (
	"encoding/binary"
	"fmt"
)

// Message types. On the wire the type is one byte followed by three zero
// reserved bytes; read as a little-endian uint32 the four bytes equal the
// type exactly when the reserved bytes are zero.
const (
	TypeInitiation  uint32 = 1
	TypeResponse    uint32 = 2
	TypeCookieReply uint32 = 3
	TypeTransport   uint32 = 4
)

// Message sizes.
const (
	InitiationSize      = 148
	ResponseSize        = 92
	CookieReplySize     = 64
	TransportHeaderSize = 16
	TagSize             = 16
	// TransportOverhead is what sealing adds to a packet: header plus tag.
	// A keepalive is a transport message of exactly this size.
	TransportOverhead = TransportHeaderSize + TagSize
)

// PeekType returns the first four bytes as a little-endian uint32: one of the
// Type constants for a well-formed message, anything else otherwise, and 0
// when b is shorter than four bytes.
func PeekType(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// ReceiverIndex returns the receiver index of a response, cookie reply or
// transport message, so the caller can route it through its index table
// before any cryptography. It reports false for other types and for sizes
// the parser would reject.
func ReceiverIndex(msg []byte) (uint32, bool) {
	switch PeekType(msg) {
	case TypeResponse:
		if len(msg) == ResponseSize {
			return binary.LittleEndian.Uint32(msg[8:]), true
		}
	case TypeCookieReply:
		if len(msg) == CookieReplySize {
			return binary.LittleEndian.Uint32(msg[4:]), true
		}
	case TypeTransport:
		if len(msg) >= TransportOverhead {
			return binary.LittleEndian.Uint32(msg[4:]), true
		}
	}
	return 0, false
}

// checkMessage validates the size and the type word of a fixed-size message.
func checkMessage(b []byte, typ uint32, size int) error {
	if len(b) != size {
		return fmt.Errorf("%w: type %d wants %d bytes, got %d", ErrMessageSize, typ, size, len(b))
	}
	if got := PeekType(b); got != typ {
		return fmt.Errorf("%w: want %d, got %#08x", ErrMessageType, typ, got)
	}
	return nil
}
