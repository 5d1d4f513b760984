package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrBadInput is wrapped by the builders' errors.
var ErrBadInput = errors.New("cannot build packet")

const defaultTTL = 64

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// ipHeader returns a packet with room for an IP header for src->dst and a
// transport part of tlen bytes, the IP header filled in (IPv4 header
// checksum included), and the offset where the transport part starts.
func ipHeader(src, dst netip.Addr, proto uint8, tlen int, id uint16) ([]byte, int, error) {
	src, dst = src.Unmap(), dst.Unmap()
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return nil, 0, badInput("addresses %v and %v are not both IPv4 or both IPv6", src, dst)
	}
	if src.Is4() {
		total := IPv4HeaderLen + tlen
		if total > 0xffff {
			return nil, 0, badInput("IPv4 packet of %d bytes", total)
		}
		p := make([]byte, total)
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:], uint16(total))
		binary.BigEndian.PutUint16(p[4:], id)
		p[6] = 0x40 // DF: the tunnel never fragments
		p[8] = defaultTTL
		p[9] = proto
		s, d := src.As4(), dst.As4()
		copy(p[12:], s[:])
		copy(p[16:], d[:])
		binary.BigEndian.PutUint16(p[10:], Checksum(p[:IPv4HeaderLen]))
		return p, IPv4HeaderLen, nil
	}
	if tlen > 0xffff {
		return nil, 0, badInput("IPv6 payload of %d bytes", tlen)
	}
	p := make([]byte, IPv6HeaderLen+tlen)
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(tlen))
	p[6] = proto
	p[7] = defaultTTL
	s, d := src.As16(), dst.As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	return p, IPv6HeaderLen, nil
}

// UDP returns an IPv4 or IPv6 UDP packet from src to dst with a correct
// checksum.
func UDP(src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	tlen := UDPHeaderLen + len(payload)
	p, off, err := ipHeader(src.Addr(), dst.Addr(), ProtoUDP, tlen, 0)
	if err != nil {
		return nil, err
	}
	t := p[off:]
	binary.BigEndian.PutUint16(t[0:], src.Port())
	binary.BigEndian.PutUint16(t[2:], dst.Port())
	binary.BigEndian.PutUint16(t[4:], uint16(tlen))
	copy(t[UDPHeaderLen:], payload)
	c := Checksum(pseudoHeader(src.Addr().Unmap().AsSlice(), dst.Addr().Unmap().AsSlice(), ProtoUDP, tlen), t)
	if c == 0 {
		c = 0xffff // zero means "no checksum" (RFC 768)
	}
	binary.BigEndian.PutUint16(t[6:], c)
	return p, nil
}

// ICMPEcho returns an ICMP (IPv4) or ICMPv6 echo request, or echo reply if
// reply is set, with a correct checksum.
func ICMPEcho(src, dst netip.Addr, reply bool, id, seq uint16, payload []byte) ([]byte, error) {
	v4 := src.Unmap().Is4()
	proto, typ := uint8(ProtoICMPv6), uint8(128) // echo request (RFC 4443)
	if v4 {
		proto, typ = ProtoICMPv4, 8 // echo request (RFC 792)
	}
	switch {
	case reply && v4:
		typ = 0
	case reply:
		typ = 129
	}
	tlen := ICMPHeaderLen + len(payload)
	p, off, err := ipHeader(src, dst, proto, tlen, 0)
	if err != nil {
		return nil, err
	}
	t := p[off:]
	t[0] = typ
	binary.BigEndian.PutUint16(t[4:], id)
	binary.BigEndian.PutUint16(t[6:], seq)
	copy(t[ICMPHeaderLen:], payload)
	var c uint16
	if v4 {
		c = Checksum(t)
	} else {
		c = Checksum(pseudoHeader(src.Unmap().AsSlice(), dst.Unmap().AsSlice(), ProtoICMPv6, tlen), t)
	}
	binary.BigEndian.PutUint16(t[2:], c)
	return p, nil
}

// TCPSegment describes a TCP segment for TCP.
type TCPSegment struct {
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	Flags    uint8
	Window   uint16
	IPID     uint16 // IPv4 identification
	Options  []byte // TCP options; length must be a multiple of 4, at most 40
	Payload  []byte
}

// TCP returns an IPv4 or IPv6 TCP segment with correct checksums. The
// payload may exceed an MTU: the segmenter tests build super-packets with it.
func TCP(s TCPSegment) ([]byte, error) {
	if len(s.Options)%4 != 0 || len(s.Options) > 40 {
		return nil, badInput("TCP options of %d bytes", len(s.Options))
	}
	hlen := TCPHeaderLen + len(s.Options)
	tlen := hlen + len(s.Payload)
	p, off, err := ipHeader(s.Src.Addr(), s.Dst.Addr(), ProtoTCP, tlen, s.IPID)
	if err != nil {
		return nil, err
	}
	t := p[off:]
	binary.BigEndian.PutUint16(t[0:], s.Src.Port())
	binary.BigEndian.PutUint16(t[2:], s.Dst.Port())
	binary.BigEndian.PutUint32(t[4:], s.Seq)
	binary.BigEndian.PutUint32(t[8:], s.Ack)
	t[12] = uint8(hlen/4) << 4
	t[13] = s.Flags
	binary.BigEndian.PutUint16(t[14:], s.Window)
	copy(t[TCPHeaderLen:], s.Options)
	copy(t[hlen:], s.Payload)
	c := Checksum(pseudoHeader(s.Src.Addr().Unmap().AsSlice(), s.Dst.Addr().Unmap().AsSlice(), ProtoTCP, tlen), t)
	binary.BigEndian.PutUint16(t[16:], c)
	return p, nil
}
