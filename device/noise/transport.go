package noise

import (
	"encoding/binary"
	"fmt"
)

// A transport message carries one encrypted packet:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  type = 4     |          reserved (zero)                      |  0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                receiver index (little-endian)                 |  4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |  8
//	+                  counter (little-endian, 64 bits)             +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        encrypted packet (padded to 16) + Poly1305 tag (16)    | 16
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The header is handled in place in packet buffers, so there is no struct,
// only a writer and a reader that allocate nothing.

// PutTransportHeader writes the TransportHeaderSize-byte header into b[:16].
// b is a caller-owned packet buffer; it panics, like binary.PutUint64, if b
// is shorter than TransportHeaderSize.
func PutTransportHeader(b []byte, receiver uint32, counter uint64) {
	_ = b[TransportHeaderSize-1] // one bounds check, before any write
	binary.LittleEndian.PutUint32(b[0:], TypeTransport)
	binary.LittleEndian.PutUint32(b[4:], receiver)
	binary.LittleEndian.PutUint64(b[8:], counter)
}

// ParseTransportHeader reads the header of a transport message. b must be
// the whole message: at least TransportOverhead bytes (an empty keepalive),
// of type TypeTransport with zero reserved bytes.
func ParseTransportHeader(b []byte) (receiver uint32, counter uint64, err error) {
	if len(b) < TransportOverhead {
		return 0, 0, errShortTransport
	}
	if PeekType(b) != TypeTransport {
		return 0, 0, errTransportType
	}
	return binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:]), nil
}

// The transport errors are built once: the receive path parses every packet
// and must not allocate an error for the ones it drops.
var (
	errShortTransport = fmt.Errorf("%w: transport message shorter than %d bytes", ErrMessageSize, TransportOverhead)
	errTransportType  = fmt.Errorf("%w: not a transport message", ErrMessageType)
)
