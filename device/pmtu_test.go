package device

import (
	"bytes"
	"encoding/binary"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun/memtun"
)

// pinPMTU gives n's peer other a kernel path MTU of path, as a connected
// socket would report it, and keeps refreshes from overwriting it (the
// in-memory bind has no connected sockets).
func pinPMTU(t *testing.T, n, other *node, path int) {
	t.Helper()
	p := n.dev.lookupPeer(other.key.PublicKey())
	if p == nil {
		t.Fatal("no such peer")
	}
	p.pathState().next.Store(math.MaxInt64)
	p.pathState().kernel.Store(int32(path))
	p.setPathMTU(other.ep)
}

func tcpPacket(t *testing.T, src, dst netip.Addr, flags uint8, opts []byte, size int) []byte {
	t.Helper()
	pl := size - packet.IPv4HeaderLen - packet.TCPHeaderLen - len(opts)
	p, err := packet.TCP(packet.TCPSegment{Src: netip.AddrPortFrom(src, 40000), Dst: netip.AddrPortFrom(dst, 5201),
		Flags: flags, Window: 1000, Options: opts, Payload: make([]byte, max(pl, 0))})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mssOption(pkt []byte) int {
	in, err := packet.Parse(pkt)
	if err != nil || in.Proto != packet.ProtoTCP || len(in.Transport) < 24 || in.Transport[20] != 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(in.Transport[22:]))
}

// TestPMTUTooBigAnswered: with a 1280-byte path to b (IPv4 underlay: 1216
// bytes inside, 1220 rounded down to WireGuard's 16-byte padding), a
// full-size packet with DF read from a's TUN is answered on a's TUN with
// fragmentation-needed for 1216 and not sent; a packet
// that fits is.
func TestPMTUTooBigAnswered(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{})
	pinPMTU(t, a, b, 1280)
	if ps := a.dev.Stats(10).PeerStats; len(ps) != 1 || ps[0].PathMTU != 1280 || ps[0].PathMTUSource != "kernel" {
		t.Fatalf("peer stats %+v: want path MTU 1280 from the kernel", ps)
	}
	big := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420)
	if err := a.tun.(*memtun.Device).Inject(big); err != nil {
		t.Fatal(err)
	}
	r := next(t, a.tun, 5*time.Second)
	if err := packet.Verify(r); err != nil {
		t.Fatalf("ICMP error does not verify: %v", err)
	}
	in, _ := packet.Parse(r)
	if in.Proto != packet.ProtoICMPv4 || in.ICMPType != 3 || in.ICMPCode != 4 || in.Src != addrB || in.Dst != addrA {
		t.Fatalf("got %+v, want fragmentation-needed from %v to %v", in, addrB, addrA)
	}
	if mtu := binary.BigEndian.Uint16(in.Transport[6:]); mtu != 1216 {
		t.Fatalf("next-hop MTU %d, want 1216", mtu)
	}
	fits := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1216)
	if err := a.tun.(*memtun.Device).Inject(fits); err != nil {
		t.Fatal(err)
	}
	if got := next(t, b.tun, 5*time.Second); !bytes.Equal(got, fits) {
		t.Fatalf("b got %d bytes, want the %d-byte packet that fits (the big one was sent?)", len(got), len(fits))
	}
	if c := counter(a.dev.Status(), "tx_pmtu_icmp_sent"); c != 1 {
		t.Fatalf("tx_pmtu_icmp_sent %d, want 1", c)
	}
}

// TestPMTUClampsSYN: a SYN crossing the tunnel has its MSS clamped by the
// end that knows the path, whichever way it goes.
func TestPMTUClampsSYN(t *testing.T) {
	for _, c := range []struct {
		name      string
		pinAtA    bool
		wantCount string
		from, to  func(a, b *node) *node
	}{
		{"sender knows", true, "tx_mss_clamped", nil, nil},
		{"receiver knows", false, "rx_mss_clamped", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := memPair(t, membind.NetOptions{})
			knower := b
			if c.pinAtA {
				pinPMTU(t, a, b, 1280)
				knower = a
			} else {
				// b learns a's endpoint from the handshake: bring it up first.
				if err := a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1, 10)); err != nil {
					t.Fatal(err)
				}
				next(t, b.tun, 5*time.Second)
				pinPMTU(t, b, a, 1280)
			}
			syn := tcpPacket(t, addrA, addrB, packet.TCPSyn, []byte{2, 4, 0x05, 0x64}, 0) // MSS 1380
			if err := a.tun.(*memtun.Device).Inject(syn); err != nil {
				t.Fatal(err)
			}
			got := next(t, b.tun, 5*time.Second)
			if err := packet.Verify(got); err != nil {
				t.Fatalf("clamped SYN does not verify: %v", err)
			}
			if m := mssOption(got); m != 1176 {
				t.Fatalf("MSS %d, want 1176", m)
			}
			if n := counter(knower.dev.Status(), c.wantCount); n != 1 {
				t.Fatalf("%s = %d, want 1", c.wantCount, n)
			}
		})
	}
}

// TestPMTUUnknownLeavesPackets: with no path MTU known (the in-memory
// bind has no connected socket to ask), full-size packets and SYNs pass
// unchanged, as before.
func TestPMTUUnknownLeavesPackets(t *testing.T) {
	a, b := memPair(t, membind.NetOptions{})
	for _, pkt := range [][]byte{
		tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420),
		tcpPacket(t, addrA, addrB, packet.TCPSyn, []byte{2, 4, 0x05, 0x64}, 0),
	} {
		if err := a.tun.(*memtun.Device).Inject(pkt); err != nil {
			t.Fatal(err)
		}
		if got := next(t, b.tun, 5*time.Second); !bytes.Equal(got, pkt) {
			t.Fatalf("packet of %d bytes changed or lost (%d bytes came)", len(pkt), len(got))
		}
	}
}
