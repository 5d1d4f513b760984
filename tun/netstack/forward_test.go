package netstack

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun"
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

// Forwarder.Ping gets the echo requests to addresses not the stack's own,
// with their addresses, identifier, sequence and payload; the stack
// itself still answers those to its own addresses.
func TestForwarderPing(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4, addrA6}, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	got := make(chan PingRequest, 4)
	if err := n.SetForwarder(Forwarder{Ping: func(q PingRequest) bool { got <- q; return true }}); err != nil {
		t.Fatal(err)
	}
	payload := []byte("through the exit")
	for _, tc := range []struct{ peer, far netip.Addr }{
		{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("192.0.2.1")},
		{netip.MustParseAddr("fd00::9"), netip.MustParseAddr("2001:db8::1")},
	} {
		req, err := packet.ICMPEcho(tc.peer, tc.far, false, 0x1234, 7, payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Write([][]byte{append(make([]byte, tun.Headroom), req...)}, tun.Headroom); err != nil {
			t.Fatal(err)
		}
		var q PingRequest
		select {
		case q = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: no ping request within 10s", tc.far)
		}
		if q.Src != tc.peer || q.Dst != tc.far || q.ID != 0x1234 || q.Seq != 7 || !bytes.Equal(q.Payload, payload) {
			t.Fatalf("ping request %+v", q)
		}
	}
	// To the stack's own address: answered by the stack, not forwarded.
	req, _ := packet.ICMPEcho(netip.MustParseAddr("10.0.0.9"), addrA4, false, 1, 2, nil)
	if _, err := n.Write([][]byte{append(make([]byte, tun.Headroom), req...)}, tun.Headroom); err != nil {
		t.Fatal(err)
	}
	if in, _ := packet.Parse(readPacket(t, n)); in.ICMPType != 0 || in.Src != addrA4 {
		t.Fatalf("reply %+v", in)
	}
	if len(got) != 0 {
		t.Fatalf("forwarded an echo request to the stack's own address: %+v", <-got)
	}
}

// A forwarded connection whose peer never completes the handshake (its
// SYN-ACKs vanish) fails Accept after HandshakeTimeout and frees its
// pending slot, instead of holding it through gVisor's two minutes of
// SYN-ACK retries.
func TestForwarderHandshakeTimeout(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4}, Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	accepted := make(chan error, 1)
	if err := n.SetForwarder(Forwarder{
		TCP:              func(q *TCPRequest) { _, err := q.Accept(); accepted <- err },
		HandshakeTimeout: 200 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
	// Nobody reads the stack's SYN-ACKs: they go nowhere.
	go func() {
		bufs := [][]byte{make([]byte, tun.Headroom+DefaultMTU)}
		sizes := make([]int, 1)
		for {
			if _, err := n.Read(bufs, sizes, tun.Headroom); err != nil {
				return
			}
		}
	}()
	syn, err := packet.TCP(packet.TCPSegment{
		Src: netip.MustParseAddrPort("10.0.0.9:40000"), Dst: netip.MustParseAddrPort("192.0.2.1:80"),
		Seq: 1000, Flags: packet.TCPSyn, Window: 65535,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Write([][]byte{append(make([]byte, tun.Headroom), syn...)}, tun.Headroom); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-accepted:
		if err == nil {
			t.Fatal("Accept succeeded for a handshake the peer never completed")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Accept still waiting for the peer's handshake after 60 s (HandshakeTimeout 200 ms)")
	}
}
