package packet

import (
	"net/netip"
	"testing"
)

// The views read what the checked parser reads, on packets the builders
// made; the setters write what they read back.
func TestViewsAgreeWithParse(t *testing.T) {
	for _, ap := range [][2]string{{"10.0.0.1:1234", "10.0.0.2:80"}, {"[fd00::1]:1234", "[fd00::2]:80"}} {
		src, dst := netip.MustParseAddrPort(ap[0]), netip.MustParseAddrPort(ap[1])
		p, err := TCP(TCPSegment{Src: src, Dst: dst, Seq: 7, Ack: 9, Flags: TCPAck | TCPPsh, Window: 512, IPID: 3,
			Options: []byte{1, 1, 1, 0}, Payload: []byte("data")})
		if err != nil {
			t.Fatal(err)
		}
		in, err := Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		hl := IPv6HeaderLen
		if Version(p) == 4 {
			h := IPv4Header(p)
			hl = h.HeaderLen()
			if h.TotalLen() != len(p) || h.Protocol() != ProtoTCP || h.ID() != in.IPID || !h.DF() || h.Fragment() ||
				netip.AddrFrom4([4]byte(h.Src())) != in.Src || netip.AddrFrom4([4]byte(h.Dst())) != in.Dst {
				t.Fatalf("IPv4 view disagrees with %+v", in)
			}
		} else {
			h := IPv6Header(p)
			if h.PayloadLen()+IPv6HeaderLen != len(p) || h.NextHeader() != ProtoTCP || h.HopLimit() != in.TTL ||
				netip.AddrFrom16([16]byte(h.Src())) != in.Src || netip.AddrFrom16([16]byte(h.Dst())) != in.Dst {
				t.Fatalf("IPv6 view disagrees with %+v", in)
			}
		}
		tcp := TCPHeader(p[hl:])
		if tcp.SrcPort() != src.Port() || tcp.DstPort() != dst.Port() || tcp.Ports() != uint32(src.Port())<<16|uint32(dst.Port()) ||
			tcp.Seq() != 7 || tcp.Ack() != 9 || tcp.Flags() != TCPAck|TCPPsh || tcp.Window() != 512 || tcp.HeaderLen() != 24 {
			t.Fatalf("TCP view disagrees with %+v", in)
		}
		tcp.SetSeq(100)
		tcp.ClearFlags(TCPPsh)
		if tcp.Seq() != 100 || tcp.Flags() != TCPAck {
			t.Fatalf("TCP setters: seq %d flags %#x", tcp.Seq(), tcp.Flags())
		}
	}
	if Version(nil) != 0 {
		t.Fatal("Version of an empty packet")
	}
	u, err := UDP(netip.MustParseAddrPort("10.0.0.1:53"), netip.MustParseAddrPort("10.0.0.2:5353"), []byte("q"))
	if err != nil {
		t.Fatal(err)
	}
	h := UDPHeader(u[IPv4HeaderLen:])
	if h.SrcPort() != 53 || h.DstPort() != 5353 || h.Length() != UDPHeaderLen+1 {
		t.Fatalf("UDP view: %d -> %d, length %d", h.SrcPort(), h.DstPort(), h.Length())
	}
}
