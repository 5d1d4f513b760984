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
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// PingRequest is an ICMP echo request a peer sent to an address that is
// not the stack's own. Payload is a copy the handler may keep.
type PingRequest struct {
	Src, Dst netip.Addr
	ID, Seq  uint16
	Payload  []byte
}

// handlePing is the stack's default ICMP handler under a Forwarder with
// Ping set: the stack gives it the echo requests no socket took, and
// answers none to temporary (not its own) addresses itself.
func (n *Net) handlePing(f func(PingRequest) bool, v6 bool) func(stack.TransportEndpointID, *stack.PacketBuffer) bool {
	echo := byte(header.ICMPv4Echo)
	if v6 {
		echo = byte(header.ICMPv6EchoRequest)
	}
	return func(_ stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		if !pkt.NetworkPacketInfo.LocalAddressTemporary {
			return false // to one of our addresses: the stack answers
		}
		v := stack.PayloadSince(pkt.TransportHeader())
		defer v.Release()
		b := v.AsSlice()
		if len(b) < 8 || b[0] != echo || b[1] != 0 {
			return false
		}
		srcA, dstA := pkt.Network().SourceAddress(), pkt.Network().DestinationAddress()
		src, _ := netip.AddrFromSlice(srcA.AsSlice())
		dst, _ := netip.AddrFromSlice(dstA.AsSlice())
		return f(PingRequest{
			Src: src.Unmap(), Dst: dst.Unmap(),
			ID: binary.BigEndian.Uint16(b[4:]), Seq: binary.BigEndian.Uint16(b[6:]),
			Payload: append([]byte(nil), b[8:]...),
		})
	}
}

// SendEchoReply sends the peer at to an ICMP echo reply from from, as if
// from had answered its request (id, seq, payload). It never waits: when
// the outbound queue is full the reply is dropped and counted.
func (n *Net) SendEchoReply(from, to netip.Addr, id, seq uint16, payload []byte) error {
	from, to = from.Unmap(), to.Unmap()
	if !from.IsValid() || from.Is4() != to.Is4() {
		return fmt.Errorf("netstack: echo reply from %v to %v: mixed or invalid addresses", from, to)
	}
	if n.isClosed() {
		return errClosed
	}
	var pkt []byte
	var proto tcpip.NetworkProtocolNumber
	if from.Is4() {
		pkt, proto = echoReply4(from, to, id, seq, payload), ipv4.ProtocolNumber
	} else {
		pkt, proto = echoReply6(from, to, id, seq, payload), ipv6.ProtocolNumber
	}
	if len(pkt) > n.opts.MTU {
		return fmt.Errorf("netstack: echo reply of %d bytes exceeds the MTU %d", len(pkt), n.opts.MTU)
	}
	if err := n.stack.WriteRawPacket(nicID, proto, buffer.MakeWithData(pkt)); err != nil {
		return tcpipErr("echo reply", err)
	}
	return nil
}

// echoReply4 builds an IPv4 packet carrying an ICMP echo reply.
func echoReply4(from, to netip.Addr, id, seq uint16, payload []byte) []byte {
	b := make([]byte, header.IPv4MinimumSize+header.ICMPv4MinimumSize+len(payload))
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(b)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(from.As4()), DstAddr: tcpip.AddrFrom4(to.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	ic := b[header.IPv4MinimumSize:]
	ic[0] = byte(header.ICMPv4EchoReply)
	binary.BigEndian.PutUint16(ic[4:], id)
	binary.BigEndian.PutUint16(ic[6:], seq)
	copy(ic[8:], payload)
	binary.BigEndian.PutUint16(ic[2:], ^checksum.Checksum(ic, 0))
	return b
}

// echoReply6 builds an IPv6 packet carrying an ICMPv6 echo reply.
func echoReply6(from, to netip.Addr, id, seq uint16, payload []byte) []byte {
	b := make([]byte, header.IPv6MinimumSize+header.ICMPv6MinimumSize+len(payload))
	src, dst := tcpip.AddrFrom16(from.As16()), tcpip.AddrFrom16(to.As16())
	header.IPv6(b).Encode(&header.IPv6Fields{
		PayloadLength: uint16(len(b) - header.IPv6MinimumSize), TransportProtocol: header.ICMPv6ProtocolNumber,
		HopLimit: 64, SrcAddr: src, DstAddr: dst,
	})
	ic := header.ICMPv6(b[header.IPv6MinimumSize:])
	ic.SetType(header.ICMPv6EchoReply)
	ic.SetIdent(id)
	ic.SetSequence(seq)
	copy(ic[header.ICMPv6MinimumSize:], payload)
	ic.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
		Header: ic[:header.ICMPv6MinimumSize], Src: src, Dst: dst,
		PayloadCsum: checksum.Checksum(payload, 0), PayloadLen: len(payload),
	}))
	return b
}
