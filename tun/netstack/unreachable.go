package netstack

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// SendPortUnreachable tells the peer at to that nothing listens on from
// for the UDP datagram it sent there (udpLen bytes, UDP header included):
// an ICMP port unreachable (ICMPv6 for IPv6) from from's address, as that
// host would have sent it. The message quotes the datagram's IP and UDP
// headers, rebuilt from the addresses (the quoted UDP checksum is zero):
// what a receiving stack needs to find the socket. It never waits: when
// the outbound queue is full the message is dropped.
func (n *Net) SendPortUnreachable(from, to netip.AddrPort, udpLen int) error {
	fa, ta := from.Addr().Unmap(), to.Addr().Unmap()
	if !fa.IsValid() || !ta.IsValid() || fa.Is4() != ta.Is4() {
		return fmt.Errorf("netstack: port unreachable from %v to %v: mixed or invalid addresses", from, to)
	}
	if udpLen < header.UDPMinimumSize || udpLen > 0xffff-header.IPv6MinimumSize {
		return fmt.Errorf("netstack: port unreachable for a UDP datagram of %d bytes", udpLen)
	}
	if n.isClosed() {
		return errClosed
	}
	var pkt []byte
	var proto tcpip.NetworkProtocolNumber
	if fa.Is4() {
		pkt, proto = portUnreachable4(netip.AddrPortFrom(fa, from.Port()), netip.AddrPortFrom(ta, to.Port()), udpLen), ipv4.ProtocolNumber
	} else {
		pkt, proto = portUnreachable6(from, to, udpLen), ipv6.ProtocolNumber
	}
	if err := n.stack.WriteRawPacket(nicID, proto, buffer.MakeWithData(pkt)); err != nil {
		return tcpipErr("port unreachable", err)
	}
	return nil
}

// quotedUDP is the UDP header of a datagram from src to dst of udpLen
// bytes, checksum zero.
func quotedUDP(b []byte, src, dst netip.AddrPort, udpLen int) {
	header.UDP(b).Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(udpLen)})
}

// portUnreachable4 builds an IPv4 packet from from to to carrying an ICMP
// port unreachable for to's datagram to from.
func portUnreachable4(from, to netip.AddrPort, udpLen int) []byte {
	const quote = header.IPv4MinimumSize + header.UDPMinimumSize
	b := make([]byte, header.IPv4MinimumSize+header.ICMPv4MinimumSize+quote)
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(b)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(from.Addr().As4()), DstAddr: tcpip.AddrFrom4(to.Addr().As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	ic := b[header.IPv4MinimumSize:]
	ic[0] = byte(header.ICMPv4DstUnreachable)
	ic[1] = byte(header.ICMPv4PortUnreachable)
	in := header.IPv4(ic[header.ICMPv4MinimumSize:])
	in.Encode(&header.IPv4Fields{
		TotalLength: uint16(min(header.IPv4MinimumSize+udpLen, 0xffff)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(to.Addr().As4()), DstAddr: tcpip.AddrFrom4(from.Addr().As4()),
	})
	in.SetChecksum(^in.CalculateChecksum())
	quotedUDP(in[header.IPv4MinimumSize:], to, from, udpLen)
	binary.BigEndian.PutUint16(ic[2:], ^checksum.Checksum(ic, 0))
	return b
}

// portUnreachable6 is portUnreachable4 for IPv6.
func portUnreachable6(from, to netip.AddrPort, udpLen int) []byte {
	const quote = header.IPv6MinimumSize + header.UDPMinimumSize
	b := make([]byte, header.IPv6MinimumSize+header.ICMPv6MinimumSize+quote)
	src, dst := tcpip.AddrFrom16(from.Addr().As16()), tcpip.AddrFrom16(to.Addr().As16())
	header.IPv6(b).Encode(&header.IPv6Fields{
		PayloadLength: uint16(len(b) - header.IPv6MinimumSize), TransportProtocol: header.ICMPv6ProtocolNumber,
		HopLimit: 64, SrcAddr: src, DstAddr: dst,
	})
	ic := header.ICMPv6(b[header.IPv6MinimumSize:])
	ic.SetType(header.ICMPv6DstUnreachable)
	ic.SetCode(header.ICMPv6PortUnreachable)
	in := ic[header.ICMPv6MinimumSize:]
	header.IPv6(in).Encode(&header.IPv6Fields{
		PayloadLength: uint16(udpLen), TransportProtocol: header.UDPProtocolNumber,
		HopLimit: 64, SrcAddr: dst, DstAddr: src,
	})
	quotedUDP(in[header.IPv6MinimumSize:], to, from, udpLen)
	ic.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
		Header: ic[:header.ICMPv6MinimumSize], Src: src, Dst: dst,
		PayloadCsum: checksum.Checksum(in, 0), PayloadLen: len(in),
	}))
	return b
}
