package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// IP protocol numbers this package understands.
const (
	ProtoICMPv4 = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
)

// TCP flag bits (byte 13 of the TCP header).
const (
	TCPFin = 0x01
	TCPSyn = 0x02
	TCPRst = 0x04
	TCPPsh = 0x08
	TCPAck = 0x10
	TCPUrg = 0x20
	TCPEce = 0x40
	TCPCwr = 0x80
)

// Header sizes.
const (
	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	TCPHeaderLen  = 20
	UDPHeaderLen  = 8
	ICMPHeaderLen = 8
)

// ErrMalformed is wrapped by every error Parse and Verify return for a
// packet whose structure is wrong; ErrChecksum by those for a bad checksum.
var (
	ErrMalformed = errors.New("malformed packet")
	ErrChecksum  = errors.New("bad checksum")
)

// Info describes a parsed packet. Slices alias the packet.
type Info struct {
	Version   int // 4 or 6
	Src, Dst  netip.Addr
	Proto     uint8 // transport protocol (IPv6: the first next header; extension headers are not supported)
	TTL       uint8 // IPv4 TTL or IPv6 hop limit
	IPID      uint16
	DF        bool
	IPHeader  []byte
	Transport []byte // transport header and payload
	Payload   []byte // transport payload

	// TCP and UDP.
	SrcPort, DstPort uint16
	// TCP.
	Seq, Ack uint32
	Flags    uint8
	Window   uint16
	// ICMP echo.
	ICMPType, ICMPCode uint8
	EchoID, EchoSeq    uint16
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse decodes the IP and transport headers of pkt. Bytes after the IP
// total length are ignored. It checks structure only; Verify also checks
// checksums.
//
// IPv4 header (RFC 791), IPv6 header (RFC 8200):
//
//	 0               1               2               3
//	|Ver| IHL |  TOS  |         Total Length          |   (v4)
//	|        Identification       |Flags|  Frag Offset  |
//	|  TTL  | Proto |       Header Checksum             |
//	|                 Source Address                    |
//	|               Destination Address                 |
//
//	|Ver| Traffic Class |          Flow Label          |   (v6)
//	|       Payload Length        | Next Hdr | Hop Lim  |
//	|             Source Address (16 bytes)             |
//	|          Destination Address (16 bytes)           |
func Parse(pkt []byte) (Info, error) {
	var in Info
	if len(pkt) < 1 {
		return in, malformed("empty packet")
	}
	var err error
	switch pkt[0] >> 4 {
	case 4:
		err = parseIPv4(&in, pkt)
	case 6:
		err = parseIPv6(&in, pkt)
	default:
		return in, malformed("IP version %d", pkt[0]>>4)
	}
	if err != nil {
		return in, err
	}
	return in, parseTransport(&in)
}

func parseIPv4(in *Info, pkt []byte) error {
	if len(pkt) < IPv4HeaderLen {
		return malformed("IPv4 packet of %d bytes", len(pkt))
	}
	h := IPv4Header(pkt)
	ihl, total := h.HeaderLen(), h.TotalLen()
	if ihl < IPv4HeaderLen || total < ihl || total > len(pkt) {
		return malformed("IPv4 header length %d, total length %d, packet %d", ihl, total, len(pkt))
	}
	if h.Fragment() {
		return malformed("IPv4 fragment")
	}
	in.Version = 4
	in.IPID = h.ID()
	in.DF = h.DF()
	in.TTL = h.TTL()
	in.Proto = h.Protocol()
	in.Src = netip.AddrFrom4([4]byte(h.Src()))
	in.Dst = netip.AddrFrom4([4]byte(h.Dst()))
	in.IPHeader = pkt[:ihl]
	in.Transport = pkt[ihl:total]
	return nil
}

func parseIPv6(in *Info, pkt []byte) error {
	if len(pkt) < IPv6HeaderLen {
		return malformed("IPv6 packet of %d bytes", len(pkt))
	}
	h := IPv6Header(pkt)
	plen := h.PayloadLen()
	if IPv6HeaderLen+plen > len(pkt) {
		return malformed("IPv6 payload length %d, packet %d", plen, len(pkt))
	}
	in.Version = 6
	in.Proto = h.NextHeader()
	in.TTL = h.HopLimit()
	in.Src = netip.AddrFrom16([16]byte(h.Src()))
	in.Dst = netip.AddrFrom16([16]byte(h.Dst()))
	in.IPHeader = pkt[:IPv6HeaderLen]
	in.Transport = pkt[IPv6HeaderLen : IPv6HeaderLen+plen]
	return nil
}

// parseTransport decodes the TCP, UDP or ICMP header in in.Transport.
//
// TCP (RFC 9293), UDP (RFC 768), ICMP echo (RFC 792, RFC 4443):
//
//	|   Source Port   |    Dest Port    |   (TCP)
//	|         Sequence Number           |
//	|      Acknowledgment Number        |
//	|Off|Rsv| Flags |     Window        |
//	|   Checksum      |  Urgent Pointer |
//
//	|   Source Port   |    Dest Port    |   (UDP)
//	|     Length      |    Checksum     |
//
//	| Type  | Code  |    Checksum       |   (ICMP echo)
//	|   Identifier    |   Sequence      |
func parseTransport(in *Info) error {
	t := in.Transport
	switch in.Proto {
	case ProtoTCP:
		if len(t) < TCPHeaderLen {
			return malformed("TCP segment of %d bytes", len(t))
		}
		h := TCPHeader(t)
		off := h.HeaderLen()
		if off < TCPHeaderLen || off > len(t) {
			return malformed("TCP data offset %d in %d bytes", off, len(t))
		}
		in.SrcPort, in.DstPort = h.SrcPort(), h.DstPort()
		in.Seq, in.Ack = h.Seq(), h.Ack()
		in.Flags = h.Flags()
		in.Window = h.Window()
		in.Payload = t[off:]
	case ProtoUDP:
		if len(t) < UDPHeaderLen {
			return malformed("UDP datagram of %d bytes", len(t))
		}
		h := UDPHeader(t)
		ulen := h.Length()
		if ulen < UDPHeaderLen || ulen > len(t) {
			return malformed("UDP length %d in %d bytes", ulen, len(t))
		}
		in.SrcPort, in.DstPort = h.SrcPort(), h.DstPort()
		in.Transport = t[:ulen]
		in.Payload = t[UDPHeaderLen:ulen]
	case ProtoICMPv4, ProtoICMPv6:
		if (in.Proto == ProtoICMPv4) != (in.Version == 4) {
			return malformed("ICMP protocol %d in IPv%d", in.Proto, in.Version)
		}
		if len(t) < ICMPHeaderLen {
			return malformed("ICMP message of %d bytes", len(t))
		}
		in.ICMPType, in.ICMPCode = t[0], t[1]
		in.EchoID = binary.BigEndian.Uint16(t[4:])
		in.EchoSeq = binary.BigEndian.Uint16(t[6:])
		in.Payload = t[ICMPHeaderLen:]
	}
	return nil
}

// Verify parses pkt and checks the IPv4 header checksum and the TCP, UDP or
// ICMP checksum. An IPv4 UDP checksum of zero means "not computed" and is
// accepted (RFC 768); over IPv6 it is an error (RFC 8200 section 8.1).
func Verify(pkt []byte) error {
	in, err := Parse(pkt)
	if err != nil {
		return err
	}
	if in.Version == 4 && Checksum(in.IPHeader) != 0 {
		return fmt.Errorf("%w: IPv4 header", ErrChecksum)
	}
	src, dst := in.Src.AsSlice(), in.Dst.AsSlice()
	t := in.Transport
	var got uint16
	switch in.Proto {
	case ProtoTCP:
		got = Checksum(pseudoHeader(src, dst, ProtoTCP, len(t)), t)
	case ProtoUDP:
		if binary.BigEndian.Uint16(t[6:]) == 0 {
			if in.Version == 4 {
				return nil
			}
			return fmt.Errorf("%w: zero UDP checksum over IPv6", ErrChecksum)
		}
		got = Checksum(pseudoHeader(src, dst, ProtoUDP, len(t)), t)
	case ProtoICMPv4:
		got = Checksum(t)
	case ProtoICMPv6:
		got = Checksum(pseudoHeader(src, dst, ProtoICMPv6, len(t)), t)
	default:
		return nil
	}
	if got != 0 {
		return fmt.Errorf("%w: protocol %d", ErrChecksum, in.Proto)
	}
	return nil
}
