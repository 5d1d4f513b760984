package pmtu

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
)

var (
	a4 = netip.MustParseAddrPort("10.0.0.1:40000")
	b4 = netip.MustParseAddrPort("10.0.0.2:5201")
	a6 = netip.MustParseAddrPort("[fd00::1]:40000")
	b6 = netip.MustParseAddrPort("[fd00::2]:5201")
)

func bigTCP(t *testing.T, src, dst netip.AddrPort, size int) []byte {
	t.Helper()
	hdr := packet.IPv4HeaderLen
	if src.Addr().Is6() {
		hdr = packet.IPv6HeaderLen
	}
	p, err := packet.TCP(packet.TCPSegment{Src: src, Dst: dst, Flags: packet.TCPAck, Window: 100,
		Payload: bytes.Repeat([]byte{7}, size-hdr-packet.TCPHeaderLen)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInnerMTU(t *testing.T) {
	for _, c := range []struct {
		path int
		v6   bool
		want int
	}{{1500, false, 1440}, {1500, true, 1420}, {1280, false, 1220}, {1280, true, 1200}, {0, false, 0}, {40, true, 0}} {
		if got := InnerMTU(c.path, c.v6); got != c.want {
			t.Errorf("InnerMTU(%d, v6=%v) = %d, want %d", c.path, c.v6, got, c.want)
		}
	}
}

// TestTooBig: a full-size packet gets the error a router would send, from
// its destination to its source, with checksums right, the next-hop MTU
// in place and the packet's start quoted; a packet that fits gets none.
func TestTooBig(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst netip.AddrPort
		mtu      int
		wantMTU  int
		typ      uint8
	}{
		{"ipv4", a4, b4, 1220, 1220, 3},
		{"ipv6", a6, b6, 1200, 1280, 2}, // IPv6 is never told less than 1280
	} {
		t.Run(c.name, func(t *testing.T) {
			pkt := bigTCP(t, c.src, c.dst, 1420)
			if _, ok := TooBig(nil, pkt, 1420); ok {
				t.Fatal("a packet that fits was answered")
			}
			prefix := []byte("keep")
			r, ok := TooBig(prefix, pkt, c.mtu)
			if !ok || !bytes.Equal(r[:4], prefix) {
				t.Fatalf("ok=%v, prefix %q", ok, r[:min(4, len(r))])
			}
			r = r[4:]
			if err := packet.Verify(r); err != nil {
				t.Fatalf("reply does not verify: %v", err)
			}
			in, _ := packet.Parse(r)
			if in.Src != c.dst.Addr() || in.Dst != c.src.Addr() || in.ICMPType != c.typ {
				t.Fatalf("reply %v -> %v type %d", in.Src, in.Dst, in.ICMPType)
			}
			var mtu int
			if c.typ == 3 {
				if in.ICMPCode != 4 {
					t.Fatalf("code %d", in.ICMPCode)
				}
				mtu = int(binary.BigEndian.Uint16(in.Transport[6:]))
			} else {
				mtu = int(binary.BigEndian.Uint32(in.Transport[4:]))
			}
			if mtu != c.wantMTU {
				t.Fatalf("MTU %d, want %d", mtu, c.wantMTU)
			}
			q := in.Transport[packet.ICMPHeaderLen:]
			if !bytes.Equal(q, pkt[:len(q)]) || len(q) < 48 {
				t.Fatalf("quote of %d bytes is not the packet's start", len(q))
			}
			limit := 576
			if c.typ == 2 {
				limit = 1280
			}
			if len(r) > limit {
				t.Fatalf("reply of %d bytes, above %d", len(r), limit)
			}
		})
	}
}

// TestTooBigSilent: the cases a router answers with nothing.
func TestTooBigSilent(t *testing.T) {
	noDF := bigTCP(t, a4, b4, 1420)
	noDF[6] = 0
	frag := bigTCP(t, a4, b4, 1420)
	frag[7] = 10 // offset 80
	icmpErr, _ := packet.ICMPEcho(a4.Addr(), b4.Addr(), false, 1, 1, make([]byte, 1400))
	icmpErr[20] = 3
	icmp6Err, _ := packet.ICMPEcho(a6.Addr(), b6.Addr(), false, 1, 1, make([]byte, 1400))
	icmp6Err[40] = 1
	mcast := bigTCP(t, a6, netip.AddrPortFrom(netip.MustParseAddr("ff02::1"), 1), 1420)
	for name, pkt := range map[string][]byte{
		"no DF": noDF, "fragment": frag, "ICMP error": icmpErr, "ICMPv6 error": icmp6Err,
		"multicast": mcast, "short": {0x45, 0, 0}, "garbage": bytes.Repeat([]byte{0x4f}, 1400),
	} {
		if r, ok := TooBig(nil, pkt, 1200); ok || len(r) != 0 {
			t.Errorf("%s: answered", name)
		}
	}
	ping, _ := packet.ICMPEcho(a4.Addr(), b4.Addr(), false, 1, 1, make([]byte, 1400))
	ping[6] = 0x40
	if _, ok := TooBig(nil, ping, 1200); !ok {
		t.Error("a ping with DF was not answered")
	}
}

func TestBucket(t *testing.T) {
	b := NewBucket(10, 3)
	now := time.Unix(1000, 0)
	n := 0
	for range 10 {
		if b.Allow(now) {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("burst let %d through, want 3", n)
	}
	now = now.Add(250 * time.Millisecond) // 2.5 tokens
	n = 0
	for range 10 {
		if b.Allow(now) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("after 250ms %d through, want 2", n)
	}
	if b.Allow(now.Add(-time.Second)) {
		t.Fatal("a clock going back made tokens")
	}
}
