package packet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

// A known-answer test: the IPv4 header example from RFC 1071's companion
// literature (Wikipedia "IPv4 header checksum"), checksum 0xb861.
func TestChecksumKnownAnswer(t *testing.T) {
	hdr := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
		0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := Checksum(hdr); got != 0xb861 {
		t.Fatalf("checksum = %#04x, want 0xb861", got)
	}
	// Split across parts at an even boundary gives the same sum.
	if got := Checksum(hdr[:8], hdr[8:]); got != 0xb861 {
		t.Fatalf("split checksum = %#04x, want 0xb861", got)
	}
	// An odd trailing byte is padded with zero.
	if got, want := Checksum([]byte{0x01, 0x02, 0x03}), ^uint16(0x0102+0x0300); got != want {
		t.Fatalf("odd checksum = %#04x, want %#04x", got, want)
	}
}

func TestBuildParseVerify(t *testing.T) {
	v4a, v4b := netip.MustParseAddrPort("10.0.0.1:1234"), netip.MustParseAddrPort("10.0.0.2:53")
	v6a, v6b := netip.MustParseAddrPort("[fd00::1]:1234"), netip.MustParseAddrPort("[fd00::2]:53")
	payload := []byte("hello, tunnel")
	for _, tc := range []struct {
		name     string
		src, dst netip.AddrPort
	}{{"v4", v4a, v4b}, {"v6", v6a, v6b}} {
		t.Run(tc.name+"/udp", func(t *testing.T) {
			p, err := UDP(tc.src, tc.dst, payload)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(p); err != nil {
				t.Fatal(err)
			}
			in, _ := Parse(p)
			if in.Proto != ProtoUDP || in.Src != tc.src.Addr() || in.Dst != tc.dst.Addr() ||
				in.SrcPort != tc.src.Port() || in.DstPort != tc.dst.Port() || !bytes.Equal(in.Payload, payload) {
				t.Fatalf("parsed %+v", in)
			}
			p[len(p)-1] ^= 1
			if err := Verify(p); !errors.Is(err, ErrChecksum) {
				t.Fatalf("corrupted packet: err = %v, want ErrChecksum", err)
			}
		})
		t.Run(tc.name+"/icmp", func(t *testing.T) {
			for _, reply := range []bool{false, true} {
				p, err := ICMPEcho(tc.src.Addr(), tc.dst.Addr(), reply, 7, 9, payload)
				if err != nil {
					t.Fatal(err)
				}
				if err := Verify(p); err != nil {
					t.Fatal(err)
				}
				in, _ := Parse(p)
				want := map[[2]bool]uint8{{true, false}: 8, {true, true}: 0, {false, false}: 128, {false, true}: 129}[[2]bool{tc.src.Addr().Is4(), reply}]
				if in.ICMPType != want || in.EchoID != 7 || in.EchoSeq != 9 || !bytes.Equal(in.Payload, payload) {
					t.Fatalf("parsed %+v, want type %d", in, want)
				}
			}
		})
		t.Run(tc.name+"/tcp", func(t *testing.T) {
			p, err := TCP(TCPSegment{Src: tc.src, Dst: tc.dst, Seq: 100, Ack: 200, Flags: TCPAck | TCPPsh,
				Window: 1000, Options: []byte{1, 1, 1, 0}, Payload: payload})
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(p); err != nil {
				t.Fatal(err)
			}
			in, _ := Parse(p)
			if in.Seq != 100 || in.Ack != 200 || in.Flags != TCPAck|TCPPsh || in.Window != 1000 || !bytes.Equal(in.Payload, payload) {
				t.Fatalf("parsed %+v", in)
			}
			p[len(p)-3] ^= 0x40
			if err := Verify(p); !errors.Is(err, ErrChecksum) {
				t.Fatalf("corrupted packet: err = %v, want ErrChecksum", err)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	if _, err := UDP(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("[fd00::1]:1"), nil); !errors.Is(err, ErrBadInput) {
		t.Fatalf("mixed families: err = %v", err)
	}
	if _, err := UDP(netip.AddrPort{}, netip.MustParseAddrPort("10.0.0.1:1"), nil); !errors.Is(err, ErrBadInput) {
		t.Fatalf("invalid address: err = %v", err)
	}
	if _, err := UDP(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1"), make([]byte, 70000)); !errors.Is(err, ErrBadInput) {
		t.Fatalf("oversize: err = %v", err)
	}
	if _, err := TCP(TCPSegment{Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.0.0.2:1"), Options: []byte{1}}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("bad options: err = %v", err)
	}
	// IPv4 UDP with a zero checksum is valid; IPv6 is not.
	p, _ := UDP(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), []byte("x"))
	binary.BigEndian.PutUint16(p[IPv4HeaderLen+6:], 0)
	if err := Verify(p); err != nil {
		t.Fatalf("v4 zero UDP checksum: %v", err)
	}
	p, _ = UDP(netip.MustParseAddrPort("[fd00::1]:1"), netip.MustParseAddrPort("[fd00::2]:2"), []byte("x"))
	binary.BigEndian.PutUint16(p[IPv6HeaderLen+6:], 0)
	if err := Verify(p); !errors.Is(err, ErrChecksum) {
		t.Fatalf("v6 zero UDP checksum: err = %v", err)
	}
}

// FuzzParse checks that Parse and Verify never panic and that whatever
// Verify accepts, Parse accepts with consistent lengths.
func FuzzParse(f *testing.F) {
	a, b := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2")
	p, _ := UDP(a, b, []byte("seed"))
	f.Add(p)
	p, _ = TCP(TCPSegment{Src: a, Dst: b, Flags: TCPSyn, Payload: []byte("x")})
	f.Add(p)
	p, _ = ICMPEcho(netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), false, 1, 2, nil)
	f.Add(p)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		in, perr := Parse(pkt)
		verr := Verify(pkt)
		if perr != nil {
			if verr == nil {
				t.Fatalf("Verify accepted what Parse rejected: %v", perr)
			}
			return
		}
		if len(in.IPHeader)+len(in.Transport) > len(pkt) {
			t.Fatalf("parsed lengths exceed packet")
		}
	})
}
