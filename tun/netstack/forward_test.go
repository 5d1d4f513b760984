package netstack

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/internal/packet"
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

// SendEchoReply puts a well-formed echo reply from the answered address
// on the way to the peer, and refuses mixed families.
func TestSendEchoReply(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4, addrA6}, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	payload := []byte("abcdefghijklmnopq") // odd length: the checksum's padding
	for _, tc := range []struct {
		from, to netip.Addr
		typ      uint8
	}{
		{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("10.0.0.2"), 0},
		{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("fd00::2"), 129},
	} {
		if err := n.SendEchoReply(tc.from, tc.to, 7, 9, payload); err != nil {
			t.Fatal(err)
		}
		p := readPacket(t, n)
		if err := packet.Verify(p); err != nil {
			t.Fatalf("%v: %v", tc.from, err)
		}
		in, _ := packet.Parse(p)
		if in.Src != tc.from || in.Dst != tc.to || in.ICMPType != tc.typ || in.EchoID != 7 || in.EchoSeq != 9 || !bytes.Equal(in.Payload, payload) {
			t.Fatalf("reply %+v", in)
		}
	}
	if err := n.SendEchoReply(addrA4, addrA6, 1, 1, nil); err == nil {
		t.Fatal("echo reply from IPv4 to IPv6 accepted")
	}
}
