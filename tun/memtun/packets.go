package memtun

import (
	"net/netip"

	"github.com/fips-go/fips-go/internal/packet"
)

// Packet builders and checkers for tests. The Build* functions with a fixed
// family return nil when an address is of the other family or the packet
// would exceed 65535 bytes; the generic ones return an error instead.

// BuildUDPv4 returns an IPv4 UDP packet with correct checksums, or nil.
func BuildUDPv4(src, dst netip.AddrPort, payload []byte) []byte {
	if !src.Addr().Unmap().Is4() {
		return nil
	}
	p, _ := packet.UDP(src, dst, payload)
	return p
}

// BuildUDPv6 returns an IPv6 UDP packet with a correct checksum, or nil.
func BuildUDPv6(src, dst netip.AddrPort, payload []byte) []byte {
	if !src.Addr().Is6() || src.Addr().Is4In6() {
		return nil
	}
	p, _ := packet.UDP(src, dst, payload)
	return p
}

// BuildUDP returns a UDP packet of src's family with correct checksums.
func BuildUDP(src, dst netip.AddrPort, payload []byte) ([]byte, error) {
	return packet.UDP(src, dst, payload)
}

// BuildICMPv4Echo returns an ICMP echo request (or reply) with correct
// checksums, or nil.
func BuildICMPv4Echo(src, dst netip.Addr, reply bool, id, seq uint16, payload []byte) []byte {
	if !src.Unmap().Is4() {
		return nil
	}
	p, _ := packet.ICMPEcho(src, dst, reply, id, seq, payload)
	return p
}

// BuildICMPv6Echo returns an ICMPv6 echo request (or reply) with a correct
// checksum, or nil.
func BuildICMPv6Echo(src, dst netip.Addr, reply bool, id, seq uint16, payload []byte) []byte {
	if !src.Is6() || src.Is4In6() {
		return nil
	}
	p, _ := packet.ICMPEcho(src, dst, reply, id, seq, payload)
	return p
}

// BuildICMPEcho returns an echo request (or reply) of src's family.
func BuildICMPEcho(src, dst netip.Addr, reply bool, id, seq uint16, payload []byte) ([]byte, error) {
	return packet.ICMPEcho(src, dst, reply, id, seq, payload)
}

// VerifyPacket parses pkt and checks its IPv4 header checksum and its TCP,
// UDP or ICMP checksum; errors wrap ErrMalformed or ErrChecksum.
func VerifyPacket(pkt []byte) error { return packet.Verify(pkt) }

// ErrMalformed and ErrChecksum are the sentinels VerifyPacket's errors wrap.
var (
	ErrMalformed = packet.ErrMalformed
	ErrChecksum  = packet.ErrChecksum
)
