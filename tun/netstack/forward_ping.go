package netstack

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/fips-go/fips-go/internal/packet"
	"gvisor.dev/gvisor/pkg/buffer"
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
		srcA, dstA := pkt.Network().SourceAddress(), pkt.Network().DestinationAddress()
		src, _ := netip.AddrFromSlice(srcA.AsSlice())
		dst, _ := netip.AddrFromSlice(dstA.AsSlice())
		// Not pkt's LocalAddressTemporary: IPv6 leaves it false for a
		// promiscuous NIC's temporary addresses, and the stack then
		// answered pings to every IPv6 address itself.
		if slices.Contains(n.opts.Addresses, dst.Unmap()) {
			return false // to one of our addresses: the stack answers
		}
		v := stack.PayloadSince(pkt.TransportHeader())
		defer v.Release()
		b := v.AsSlice()
		if len(b) < 8 || b[0] != echo || b[1] != 0 {
			return false
		}
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
	pkt, err := packet.ICMPEcho(from, to, true, id, seq, payload)
	if err != nil {
		return fmt.Errorf("netstack: echo reply: %w", err)
	}
	proto := ipv4.ProtocolNumber
	if from.Is6() {
		proto = ipv6.ProtocolNumber
	}
	if len(pkt) > n.opts.MTU {
		return fmt.Errorf("netstack: echo reply of %d bytes exceeds the MTU %d", len(pkt), n.opts.MTU)
	}
	if err := n.stack.WriteRawPacket(nicID, proto, buffer.MakeWithData(pkt)); err != nil {
		return tcpipErr("echo reply", err)
	}
	return nil
}
