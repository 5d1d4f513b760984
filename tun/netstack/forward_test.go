package netstack

import (
	"errors"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

func TestSetForwarderNeedsPromiscuous(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.SetForwarder(Forwarder{TCP: func(q *TCPRequest) { q.Refuse() }}); !errors.Is(err, ErrNotPromiscuous) {
		t.Fatalf("SetForwarder on a plain Net: %v, want ErrNotPromiscuous", err)
	}
	p, err := New(Options{Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := p.SetForwarder(Forwarder{}); err == nil {
		t.Fatal("SetForwarder after Close succeeded")
	}
}

func TestEchoReplyPackets(t *testing.T) {
	payload := []byte("abcdefghijklmnopq") // odd length: the checksum's padding
	b := echoReply4(netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("10.0.0.2"), 7, 9, payload)
	ip := header.IPv4(b)
	if !ip.IsValid(len(b)) || !ip.IsChecksumValid() || ip.Protocol() != uint8(header.ICMPv4ProtocolNumber) {
		t.Fatalf("bad IPv4 header % x", b[:20])
	}
	ic := header.ICMPv4(ip.Payload())
	if ic.Type() != header.ICMPv4EchoReply || ic.Ident() != 7 || ic.Sequence() != 9 || string(ic.Payload()) != string(payload) {
		t.Fatalf("bad ICMP % x", ic)
	}
	if checksum.Checksum(ic, 0) != 0xffff {
		t.Fatal("bad ICMP checksum")
	}
	src, dst := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("fd00::2")
	b = echoReply6(src, dst, 7, 9, payload)
	ip6 := header.IPv6(b)
	if !ip6.IsValid(len(b)) || b[6] != uint8(header.ICMPv6ProtocolNumber) {
		t.Fatalf("bad IPv6 header % x", b[:40])
	}
	ic6 := header.ICMPv6(ip6.Payload())
	want := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
		Header: ic6[:header.ICMPv6MinimumSize], Src: ip6.SourceAddress(), Dst: ip6.DestinationAddress(),
		PayloadCsum: checksum.Checksum(payload, 0), PayloadLen: len(payload),
	})
	if ic6.Type() != header.ICMPv6EchoReply || ic6.Ident() != 7 || ic6.Sequence() != 9 || ic6.Checksum() != want {
		t.Fatalf("bad ICMPv6 % x", ic6)
	}
}
