package interop

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// IP protocol numbers of ICMP and ICMPv6.
const (
	protoICMP   = 1
	protoICMPv6 = 58
)

// echoRequest builds a whole IP packet (IPv4 or IPv6 after src's family)
// carrying an ICMP echo request with valid checksums, the way a host's
// stack would hand it to a TUN.
//
//	IPv4: | 0x45 | tos | total len | id | flags/frag | ttl | proto | csum | src | dst | ICMP... |
//	IPv6: | 0x60 tc/flow (4) | payload len | next hdr | hop limit | src (16) | dst (16) | ICMPv6... |
func echoRequest(src, dst netip.Addr, id, seq int, data []byte) []byte {
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: data}}
	var psh []byte
	if src.Is6() {
		msg.Type = ipv6.ICMPTypeEchoRequest
		psh = icmp.IPv6PseudoHeader(src.AsSlice(), dst.AsSlice())
	}
	body, err := msg.Marshal(psh)
	if err != nil {
		panic(err) // only for out-of-range id/seq, which callers never pass
	}
	if src.Is6() {
		h := make([]byte, 40, 40+len(body))
		h[0] = 0x60
		binary.BigEndian.PutUint16(h[4:], uint16(len(body)))
		h[6] = protoICMPv6
		h[7] = 64
		s, d := src.As16(), dst.As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		return append(h, body...)
	}
	h := make([]byte, 20, 20+len(body))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(body)))
	h[8] = 64
	h[9] = protoICMP
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], ipChecksum(h))
	return append(h, body...)
}

// ipChecksum is the Internet checksum (RFC 1071) of b.
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// echoReply is a parsed ICMP or ICMPv6 echo reply.
type echoReply struct {
	src, dst netip.Addr
	echo     *icmp.Echo
}

// parseEchoReply recognises an IP packet carrying an ICMP(v6) echo reply
// (no IPv6 extension headers); ok is false for anything else.
func parseEchoReply(pkt []byte) (r echoReply, ok bool) {
	if len(pkt) < 1 {
		return r, false
	}
	var body []byte
	var proto int
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		if len(pkt) < 20 || ihl < 20 || pkt[9] != protoICMP {
			return r, false
		}
		total := int(binary.BigEndian.Uint16(pkt[2:]))
		if total < ihl || total > len(pkt) {
			return r, false
		}
		r.src = netip.AddrFrom4([4]byte(pkt[12:16]))
		r.dst = netip.AddrFrom4([4]byte(pkt[16:20]))
		body, proto = pkt[ihl:total], protoICMP
	case 6:
		if len(pkt) < 40 || pkt[6] != protoICMPv6 {
			return r, false
		}
		plen := int(binary.BigEndian.Uint16(pkt[4:]))
		if 40+plen > len(pkt) {
			return r, false
		}
		r.src = netip.AddrFrom16([16]byte(pkt[8:24]))
		r.dst = netip.AddrFrom16([16]byte(pkt[24:40]))
		body, proto = pkt[40:40+plen], protoICMPv6
	default:
		return r, false
	}
	m, err := icmp.ParseMessage(proto, body)
	if err != nil || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
		return r, false
	}
	e, isEcho := m.Body.(*icmp.Echo)
	if !isEcho {
		return r, false
	}
	r.echo = e
	return r, true
}
