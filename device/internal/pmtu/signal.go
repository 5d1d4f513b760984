// Package pmtu is what the device does about a path that carries less than
// the tunnel's MTU: the arithmetic from a path MTU to what fits inside the
// tunnel, the ICMP a router would send the inner sender (RFC 1191
// fragmentation-needed, RFC 8201 packet-too-big), the clamp of TCP SYNs'
// MSS option, a token bucket that bounds the ICMP, and the probe controller
// that finds the path MTU without ICMP (RFC 8899 in spirit). It is pure:
// no I/O, time passed in.
package pmtu

import (
	"encoding/binary"

	"github.com/fips-go/fips-go/internal/packet"
)

// WireGuard's overhead over the inner packet: the 16-byte transport header
// and the 16-byte tag, then UDP and the outer IP header.
const (
	wgOverhead = 32
	udpHeader  = 8
)

// Overhead is what WireGuard adds to an inner packet on a path of the
// given outer family (IPv6 when v6).
func Overhead(v6 bool) int {
	if v6 {
		return wgOverhead + udpHeader + packet.IPv6HeaderLen
	}
	return wgOverhead + udpHeader + packet.IPv4HeaderLen
}

// MinInnerMTU is the floor of what the device tells an inner sender: IPv6
// needs 1280 of every link (RFC 8200), and a smaller figure for IPv4 would
// only be ignored by most stacks (Linux's min_pmtu is 552).
const (
	MinInnerMTUv4 = 552
	MinInnerMTUv6 = 1280
)

// InnerMTU is the largest inner packet whose datagram fits a path MTU of
// pathMTU on an outer family (v6Outer), 0 when pathMTU is unknown (0) or
// leaves no room.
func InnerMTU(pathMTU int, v6Outer bool) int {
	if pathMTU <= 0 {
		return 0
	}
	return max(pathMTU-Overhead(v6Outer), 0)
}

// maxQuote is how much of the offending packet an ICMP error carries: what
// keeps the error within the minimum MTU of its family (576 bytes for IPv4,
// RFC 1812 section 4.3.2.3; 1280 for IPv6, RFC 4443 section 2.4).
const (
	maxQuoteV4 = 576 - packet.IPv4HeaderLen - packet.ICMPHeaderLen
	maxQuoteV6 = 1280 - packet.IPv6HeaderLen - packet.ICMPHeaderLen
)

// TooBig appends to dst, and returns, the ICMP error a router with a next
// hop of mtu bytes would send the source of pkt, an inner packet too big
// for it: fragmentation-needed (type 3, code 4) for an IPv4 packet with DF,
// packet-too-big (type 2) for IPv6. It comes from pkt's destination, as
// the tunnel has no address of its own, and quotes the start of pkt. ok is
// false, and nothing is appended, where a router must stay silent or where
// a sender could do nothing with it: pkt fits, an IPv4 packet without DF
// (the device sends it as it is, fragmented outside), a non-first
// fragment, an ICMP error (never answer one with another), a source that is
// not a unicast host, or a packet too short to tell.
func TooBig(dst, pkt []byte, mtu int) ([]byte, bool) {
	if len(pkt) <= mtu {
		return dst, false
	}
	switch packet.Version(pkt) {
	case 4:
		return tooBig4(dst, pkt, max(mtu, MinInnerMTUv4))
	case 6:
		return tooBig6(dst, pkt, max(mtu, MinInnerMTUv6))
	}
	return dst, false
}

func tooBig4(dst, pkt []byte, mtu int) ([]byte, bool) {
	if len(pkt) < packet.IPv4HeaderLen {
		return dst, false
	}
	h := packet.IPv4Header(pkt)
	ihl := h.HeaderLen()
	if ihl < packet.IPv4HeaderLen || ihl > len(pkt) || !h.DF() || h.FragOffset() != 0 || len(pkt) <= mtu {
		return dst, false
	}
	src := h.Src()
	if src[0] == 0 || src[0] == 127 || src[0] >= 224 || h.Dst()[0] >= 224 {
		return dst, false
	}
	if h.Protocol() == packet.ProtoICMPv4 && (len(pkt) < ihl+1 || !icmp4Informational(pkt[ihl])) {
		return dst, false
	}
	quote := pkt[:min(len(pkt), maxQuoteV4)]
	total := packet.IPv4HeaderLen + packet.ICMPHeaderLen + len(quote)
	start := len(dst)
	dst = append(dst, make([]byte, total)...)
	r := dst[start:]
	r[0] = 0x45
	binary.BigEndian.PutUint16(r[2:], uint16(total))
	r[8] = 64
	r[9] = packet.ProtoICMPv4
	copy(r[12:16], h.Dst())
	copy(r[16:20], src)
	binary.BigEndian.PutUint16(r[10:], packet.Checksum(r[:packet.IPv4HeaderLen]))
	m := r[packet.IPv4HeaderLen:]
	m[0], m[1] = 3, 4 // destination unreachable: fragmentation needed and DF set
	binary.BigEndian.PutUint16(m[6:], uint16(min(mtu, 0xffff)))
	copy(m[packet.ICMPHeaderLen:], quote)
	binary.BigEndian.PutUint16(m[2:], packet.Checksum(m))
	return dst, true
}

// icmp4Informational reports whether an ICMP type is a query or reply
// (echo, timestamp, ...), which may be answered with an error, rather than
// an error itself.
func icmp4Informational(typ uint8) bool {
	switch typ {
	case 0, 8, 13, 14:
		return true
	}
	return false
}

func tooBig6(dst, pkt []byte, mtu int) ([]byte, bool) {
	if len(pkt) < packet.IPv6HeaderLen || len(pkt) <= mtu {
		return dst, false
	}
	h := packet.IPv6Header(pkt)
	src := h.Src()
	if src[0] == 0xff || isUnspecified(src) || h.Dst()[0] == 0xff {
		return dst, false
	}
	// An ICMPv6 error (types below 128) is never answered. Only a bare
	// ICMPv6 header is recognized: behind extension headers the packet is
	// answered, which a router does too.
	if h.NextHeader() == packet.ProtoICMPv6 && (len(pkt) <= packet.IPv6HeaderLen || pkt[packet.IPv6HeaderLen] < 128) {
		return dst, false
	}
	quote := pkt[:min(len(pkt), maxQuoteV6)]
	plen := packet.ICMPHeaderLen + len(quote)
	start := len(dst)
	dst = append(dst, make([]byte, packet.IPv6HeaderLen+plen)...)
	r := dst[start:]
	r[0] = 0x60
	binary.BigEndian.PutUint16(r[4:], uint16(plen))
	r[6] = packet.ProtoICMPv6
	r[7] = 64
	copy(r[8:24], h.Dst())
	copy(r[24:40], src)
	m := r[packet.IPv6HeaderLen:]
	m[0] = 2 // packet too big
	binary.BigEndian.PutUint32(m[4:], uint32(mtu))
	copy(m[packet.ICMPHeaderLen:], quote)
	ph := pseudo6(r[8:24], r[24:40], plen)
	binary.BigEndian.PutUint16(m[2:], packet.Checksum(ph[:], m))
	return dst, true
}

func isUnspecified(a []byte) bool {
	for _, b := range a {
		if b != 0 {
			return false
		}
	}
	return true
}

// pseudo6 is the ICMPv6 checksum's pseudo-header (RFC 8200 section 8.1).
func pseudo6(src, dst []byte, length int) [40]byte {
	var ph [40]byte
	copy(ph[:16], src)
	copy(ph[16:32], dst)
	binary.BigEndian.PutUint32(ph[32:], uint32(length))
	ph[39] = packet.ProtoICMPv6
	return ph
}
