package packet

import "encoding/binary"

// Header views: a packet (or the part of it from the header on) typed as
// the header it starts with. Accessors read and write fixed fields at fixed
// offsets and do not check the length, so that each inlines to the index
// expression it replaces and a view costs nothing on the hot path: the
// caller checks len(h) against the header's length (IPv4HeaderLen,
// IPv6HeaderLen, TCPHeaderLen, UDPHeaderLen) once, and only reads further
// (options, HeaderLen) after checking that too. Parse is the checked way in.

// More IP protocol numbers, for classifying flows by ports.
const (
	ProtoDCCP    = 33
	ProtoSCTP    = 132
	ProtoUDPLite = 136
)

// Version is the IP version in pkt's first nibble, 0 for an empty packet.
func Version(pkt []byte) int {
	if len(pkt) == 0 {
		return 0
	}
	return int(pkt[0] >> 4)
}

// IPv4Header is a view of an IPv4 header (RFC 791), drawn at Parse.
type IPv4Header []byte

// HeaderLen is the header length in bytes (IHL, options included).
func (h IPv4Header) HeaderLen() int { return int(h[0]&0x0f) * 4 }

// TOS is the type-of-service byte: DSCP and, in its low two bits, ECN.
func (h IPv4Header) TOS() uint8 { return h[1] }

// TotalLen is the length the header claims for the whole packet.
func (h IPv4Header) TotalLen() int { return int(binary.BigEndian.Uint16(h[2:4])) }

// SetTotalLen sets TotalLen; the header checksum is the caller's.
func (h IPv4Header) SetTotalLen(n int) { binary.BigEndian.PutUint16(h[2:4], uint16(n)) }

// ID is the identification field.
func (h IPv4Header) ID() uint16 { return binary.BigEndian.Uint16(h[4:6]) }

// SetID sets the identification field.
func (h IPv4Header) SetID(id uint16) { binary.BigEndian.PutUint16(h[4:6], id) }

// FlagsFrag is the flags and fragment offset word.
func (h IPv4Header) FlagsFrag() uint16 { return binary.BigEndian.Uint16(h[6:8]) }

// FragOffset is the fragment offset (in 8-byte units): nonzero for every
// fragment but the first, which alone carries the transport header.
func (h IPv4Header) FragOffset() uint16 { return h.FlagsFrag() & 0x1fff }

// Fragment reports whether the packet is a fragment of a larger one (MF
// set or a nonzero offset).
func (h IPv4Header) Fragment() bool { return h.FlagsFrag()&0x3fff != 0 }

// DF reports the don't-fragment flag.
func (h IPv4Header) DF() bool { return h[6]&0x40 != 0 }

// TTL is the time to live.
func (h IPv4Header) TTL() uint8 { return h[8] }

// Protocol is the transport protocol.
func (h IPv4Header) Protocol() uint8 { return h[9] }

// Checksum is the header checksum field.
func (h IPv4Header) Checksum() []byte { return h[10:12] }

// Src is the source address.
func (h IPv4Header) Src() []byte { return h[12:16] }

// Dst is the destination address.
func (h IPv4Header) Dst() []byte { return h[16:20] }

// Addrs is the source and destination addresses, in that order.
func (h IPv4Header) Addrs() []byte { return h[12:20] }

// IPv6Header is a view of an IPv6 header (RFC 8200), drawn at Parse. Extension
// headers are not walked: NextHeader is the first one.
type IPv6Header []byte

// TrafficClass is the traffic class: DSCP and, in its low two bits, ECN.
func (h IPv6Header) TrafficClass() uint8 { return h[0]<<4 | h[1]>>4 }

// PayloadLen is the length the header claims for what follows it.
func (h IPv6Header) PayloadLen() int { return int(binary.BigEndian.Uint16(h[4:6])) }

// SetPayloadLen sets PayloadLen.
func (h IPv6Header) SetPayloadLen(n int) { binary.BigEndian.PutUint16(h[4:6], uint16(n)) }

// NextHeader is the next header (the transport protocol when there are no
// extension headers).
func (h IPv6Header) NextHeader() uint8 { return h[6] }

// HopLimit is the hop limit.
func (h IPv6Header) HopLimit() uint8 { return h[7] }

// Src is the source address.
func (h IPv6Header) Src() []byte { return h[8:24] }

// Dst is the destination address.
func (h IPv6Header) Dst() []byte { return h[24:40] }

// Addrs is the source and destination addresses, in that order.
func (h IPv6Header) Addrs() []byte { return h[8:40] }

// TCPHeader is a view of a TCP header (RFC 9293), drawn at parseTransport.
type TCPHeader []byte

// Ports is the source and destination ports as one big-endian word.
func (h TCPHeader) Ports() uint32 { return binary.BigEndian.Uint32(h[0:4]) }

// SrcPort is the source port.
func (h TCPHeader) SrcPort() uint16 { return binary.BigEndian.Uint16(h[0:2]) }

// DstPort is the destination port.
func (h TCPHeader) DstPort() uint16 { return binary.BigEndian.Uint16(h[2:4]) }

// Seq is the sequence number.
func (h TCPHeader) Seq() uint32 { return binary.BigEndian.Uint32(h[4:8]) }

// SetSeq sets the sequence number.
func (h TCPHeader) SetSeq(s uint32) { binary.BigEndian.PutUint32(h[4:8], s) }

// Ack is the acknowledgment number.
func (h TCPHeader) Ack() uint32 { return binary.BigEndian.Uint32(h[8:12]) }

// HeaderLen is the data offset in bytes (options included).
func (h TCPHeader) HeaderLen() int { return int(h[12]>>4) * 4 }

// Flags is the flags byte (TCPFin ... TCPCwr).
func (h TCPHeader) Flags() uint8 { return h[13] }

// ClearFlags clears the flags in f.
func (h TCPHeader) ClearFlags(f uint8) { h[13] &^= f }

// Window is the receive window, unscaled.
func (h TCPHeader) Window() uint16 { return binary.BigEndian.Uint16(h[14:16]) }

// Checksum is the checksum field.
func (h TCPHeader) Checksum() []byte { return h[16:18] }

// UDPHeader is a view of a UDP header (RFC 768), drawn at parseTransport.
type UDPHeader []byte

// Ports is the source and destination ports as one big-endian word.
func (h UDPHeader) Ports() uint32 { return binary.BigEndian.Uint32(h[0:4]) }

// SrcPort is the source port.
func (h UDPHeader) SrcPort() uint16 { return binary.BigEndian.Uint16(h[0:2]) }

// DstPort is the destination port.
func (h UDPHeader) DstPort() uint16 { return binary.BigEndian.Uint16(h[2:4]) }

// Length is the length the header claims for itself and its payload.
func (h UDPHeader) Length() int { return int(binary.BigEndian.Uint16(h[4:6])) }

// SetLength sets Length.
func (h UDPHeader) SetLength(n int) { binary.BigEndian.PutUint16(h[4:6], uint16(n)) }

// Checksum is the checksum field.
func (h UDPHeader) Checksum() []byte { return h[6:8] }

// ICMPEchoID is the identifier of an ICMP or ICMPv6 echo message (RFC 792,
// RFC 4443), which tells one ping session from another as a port would.
func ICMPEchoID(h []byte) []byte { return h[4:6] }
