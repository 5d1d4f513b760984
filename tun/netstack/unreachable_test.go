package netstack

import (
	"bytes"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// A port unreachable is well formed and quotes the datagram's headers
// the way a receiving stack matches them to a socket: the peer's address
// and port as the source, the far end's as the destination.
func TestPortUnreachable(t *testing.T) {
	for _, tc := range []struct{ from, to string }{
		{"198.51.100.7:9", "10.0.0.2:40000"},
		{"[2001:db8::7]:9", "[fd00::2]:40000"},
	} {
		from, to := netip.MustParseAddrPort(tc.from), netip.MustParseAddrPort(tc.to)
		var ip, dst netip.Addr
		var quote []byte
		var udpLen int
		if from.Addr().Is4() {
			b := portUnreachable4(from, to, 8+100)
			o := header.IPv4(b)
			if !o.IsValid(len(b)) || o.CalculateChecksum() != 0xffff || o.TransportProtocol() != header.ICMPv4ProtocolNumber {
				t.Fatalf("%v: bad outer IPv4 header % x", from, b[:20])
			}
			ic := header.ICMPv4(o.Payload())
			if ic.Type() != header.ICMPv4DstUnreachable || ic.Code() != header.ICMPv4PortUnreachable || checksum.Checksum(ic, 0) != 0xffff {
				t.Fatalf("%v: ICMP type %d code %d, checksum bad: % x", from, ic.Type(), ic.Code(), ic)
			}
			in := header.IPv4(ic[header.ICMPv4MinimumSize:])
			if in.CalculateChecksum() != 0xffff || in.TransportProtocol() != header.UDPProtocolNumber {
				t.Fatalf("%v: bad quoted IPv4 header", from)
			}
			ip, _ = addrOf(o.SourceAddress())
			dst, _ = addrOf(o.DestinationAddress())
			if a, _ := addrOf(in.SourceAddress()); a != to.Addr() {
				t.Errorf("%v: quoted source %v, want %v", from, a, to.Addr())
			}
			quote, udpLen = in[header.IPv4MinimumSize:], int(in.TotalLength())-header.IPv4MinimumSize
		} else {
			b := portUnreachable6(from, to, 8+100)
			o := header.IPv6(b)
			if !o.IsValid(len(b)) || o.NextHeader() != uint8(header.ICMPv6ProtocolNumber) {
				t.Fatalf("%v: bad outer IPv6 header", from)
			}
			ic := header.ICMPv6(o.Payload())
			// The checksum of a copy with the field cleared.
			c := append(header.ICMPv6(nil), ic...)
			c.SetChecksum(0)
			want := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
				Header: c[:header.ICMPv6MinimumSize], Src: o.SourceAddress(), Dst: o.DestinationAddress(),
				PayloadCsum: checksum.Checksum(c[header.ICMPv6MinimumSize:], 0), PayloadLen: len(c) - header.ICMPv6MinimumSize,
			})
			if ic.Type() != header.ICMPv6DstUnreachable || ic.Code() != header.ICMPv6PortUnreachable || ic.Checksum() != want {
				t.Fatalf("%v: ICMPv6 type %d code %d checksum %#x, want %#x", from, ic.Type(), ic.Code(), ic.Checksum(), want)
			}
			in := header.IPv6(ic[header.ICMPv6MinimumSize:])
			if in.NextHeader() != uint8(header.UDPProtocolNumber) {
				t.Fatalf("%v: quoted next header %d", from, in.NextHeader())
			}
			ip, _ = addrOf(o.SourceAddress())
			dst, _ = addrOf(o.DestinationAddress())
			if a, _ := addrOf(in.SourceAddress()); a != to.Addr() {
				t.Errorf("%v: quoted source %v, want %v", from, a, to.Addr())
			}
			quote, udpLen = in[header.IPv6MinimumSize:], int(in.PayloadLength())
		}
		if ip != from.Addr() || dst != to.Addr() {
			t.Errorf("%v: sent from %v to %v, want from %v to %v", from, ip, dst, from.Addr(), to.Addr())
		}
		u := header.UDP(quote)
		if u.SourcePort() != to.Port() || u.DestinationPort() != from.Port() || int(u.Length()) != 108 || udpLen != 108 {
			t.Errorf("%v: quoted UDP %d -> %d, length %d (IP says %d), want %d -> %d, 108", from, u.SourcePort(), u.DestinationPort(), u.Length(), udpLen, to.Port(), from.Port())
		}
	}
}

// SendPortUnreachable refuses what it cannot build, and sends nothing
// then.
func TestSendPortUnreachableBadInput(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	v4, v6 := netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("[fd00::2]:1")
	for _, tc := range []struct {
		from, to netip.AddrPort
		n        int
	}{{v4, v6, 8}, {netip.AddrPort{}, v4, 8}, {v4, v4, 7}, {v4, v4, 1 << 16}} {
		if err := n.SendPortUnreachable(tc.from, tc.to, tc.n); err == nil {
			t.Errorf("SendPortUnreachable(%v, %v, %d): no error", tc.from, tc.to, tc.n)
		}
	}
	// A good one leaves the stack toward the tunnel as built.
	to := netip.MustParseAddrPort("10.0.0.3:5")
	if err := n.SendPortUnreachable(v4, to, 8); err != nil {
		t.Fatalf("a good one: %v", err)
	}
	bufs, sizes := [][]byte{make([]byte, 1500)}, []int{0}
	if k, err := n.Read(bufs, sizes, 0); err != nil || k != 1 || !bytes.Equal(bufs[0][:sizes[0]], portUnreachable4(v4, to, 8)) {
		t.Errorf("read %d packets, %v: % x", k, err, bufs[0][:sizes[0]])
	}
}

func addrOf(a tcpip.Address) (netip.Addr, bool) {
	return netip.AddrFromSlice(a.AsSlice())
}
