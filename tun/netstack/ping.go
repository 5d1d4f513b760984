package netstack

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// MaxPingPayload bounds the payload of Ping.
const MaxPingPayload = 65000

// Ping sends one ICMP echo request with seq and payload to dst through the
// stack and waits until ctx ends for the matching reply, returning the
// round-trip time. The stack answers echo requests to its own addresses by
// itself, so the far side can ping us too.
func (n *Net) Ping(ctx context.Context, dst netip.Addr, seq uint16, payload []byte) (time.Duration, error) {
	if n.isClosed() {
		return 0, errClosed
	}
	dst = dst.Unmap()
	if !dst.IsValid() || dst.IsUnspecified() || len(payload) > MaxPingPayload {
		return 0, fmt.Errorf("netstack: ping %v: invalid address or payload of %d bytes", dst, len(payload))
	}
	tproto, nproto := icmp.ProtocolNumber4, ipv4.ProtocolNumber
	if dst.Is6() {
		tproto, nproto = icmp.ProtocolNumber6, ipv6.ProtocolNumber
	}
	var wq waiter.Queue
	ep, terr := n.stack.NewEndpoint(tproto, nproto, &wq)
	if terr != nil {
		return 0, tcpipErr("ping endpoint", terr)
	}
	defer ep.Close()
	if terr := ep.Connect(tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFromSlice(dst.AsSlice())}); terr != nil {
		return 0, tcpipErr("ping "+dst.String(), terr)
	}
	entry, readable := waiter.NewChannelEntry(waiter.ReadableEvents)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)

	pkt := echoRequest(dst.Is6(), seq, payload)
	start := time.Now()
	if _, terr := ep.Write(bytes.NewReader(pkt), tcpip.WriteOptions{}); terr != nil {
		return 0, tcpipErr("ping "+dst.String(), terr)
	}
	var buf bytes.Buffer
	for {
		buf.Reset()
		_, terr := ep.Read(&buf, tcpip.ReadOptions{})
		if _, wait := terr.(*tcpip.ErrWouldBlock); wait {
			select {
			case <-readable:
				continue
			case <-ctx.Done():
				return 0, fmt.Errorf("netstack: ping %v seq %d: %w", dst, seq, ctx.Err())
			}
		}
		if terr != nil {
			return 0, tcpipErr("ping "+dst.String(), terr)
		}
		if isEchoReply(dst.Is6(), seq, buf.Bytes()) {
			return time.Since(start), nil
		}
	}
}

// echoRequest is an ICMP echo request; the stack fills in the identifier
// (the endpoint's) and the checksum.
func echoRequest(v6 bool, seq uint16, payload []byte) []byte {
	if v6 {
		b := make(header.ICMPv6, header.ICMPv6EchoMinimumSize+len(payload))
		b.SetType(header.ICMPv6EchoRequest)
		b.SetSequence(seq)
		copy(b.Payload(), payload)
		return b
	}
	b := make(header.ICMPv4, header.ICMPv4MinimumSize+len(payload))
	b.SetType(header.ICMPv4Echo)
	b.SetSequence(seq)
	copy(b.Payload(), payload)
	return b
}

func isEchoReply(v6 bool, seq uint16, b []byte) bool {
	if v6 {
		h := header.ICMPv6(b)
		return len(b) >= header.ICMPv6EchoMinimumSize && h.Type() == header.ICMPv6EchoReply && h.Sequence() == seq
	}
	h := header.ICMPv4(b)
	return len(b) >= header.ICMPv4MinimumSize && h.Type() == header.ICMPv4EchoReply && h.Sequence() == seq
}
