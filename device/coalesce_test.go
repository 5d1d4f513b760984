package device

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

func tcpOut(t *testing.T, src, dst string, payload int, flags uint8) []byte {
	t.Helper()
	pkt, err := memtun.BuildTCP(memtun.TCPSegment{
		Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst),
		Flags: flags, Payload: make([]byte, payload),
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(make([]byte, tun.Headroom), pkt...)
}

const ack, psh = 0x10, 0x08

// The large buffers go exactly where the TUN starts a new super-packet: a
// flow's first packet, the first after a shorter or PSH packet, and the
// first that would overflow 64 KiB. Pure ACKs and other protocols get none.
func TestLendHeadsPredictsRuns(t *testing.T) {
	var out [][]byte
	var want []int
	add := func(head bool, pkt []byte) {
		if head {
			want = append(want, len(out))
		}
		out = append(out, pkt)
	}
	a, b := "10.0.0.1:1000", "10.0.0.2:2000"
	add(true, tcpOut(t, a, b, 1368, ack))
	for range 10 {
		add(false, tcpOut(t, a, b, 1368, ack))
	}
	add(false, tcpOut(t, a, b, 500, ack|psh)) // ends the run
	add(true, tcpOut(t, a, b, 1368, ack))     // new run
	add(true, tcpOut(t, b, a, 1368, ack))     // other direction: another flow
	add(false, tcpOut(t, b, a, 0, ack))       // pure ACK: never merged
	for range 45 {                            // with the run head, 46 x 1408 B fit in 64 KiB; a 47th would not
		add(false, tcpOut(t, a, b, 1368, ack))
	}
	add(true, tcpOut(t, a, b, 1368, ack))

	orig := slices.Clone(out)
	g := newGROBufs(16)
	var lent [maxHeads][]byte
	n := g.lendHeads(out, &lent)
	var got []int
	for i := range out {
		if cap(out[i]) == groBufSize {
			got = append(got, i)
			if string(out[i]) != string(orig[i]) {
				t.Fatalf("packet %d changed when moved to a large buffer", i)
			}
		}
	}
	if !slices.Equal(got, want) || n != len(want) {
		t.Fatalf("large buffers at %v (lent %d), want %v", got, n, want)
	}
	g.returnHeads(&lent, n)
	if len(g.free) != 16 {
		t.Fatalf("%d of 16 buffers back in the pool", len(g.free))
	}
}

// Padding rounds up to 16 as the protocol asks but never past the MTU,
// where a full-size packet would no longer fit the path.
func TestPaddedSize(t *testing.T) {
	for _, c := range []struct{ size, mtu, want int }{
		{0, 1420, 0}, {1, 1420, 16}, {100, 1420, 112}, {1408, 1420, 1408},
		{1409, 1420, 1420}, {1419, 1420, 1420}, {1420, 1420, 1420}, {1280, 1280, 1280}, {1281, 1280, 1296},
	} {
		if got := paddedSize(c.size, c.mtu); got != c.want {
			t.Errorf("paddedSize(%d, mtu %d) = %d, want %d", c.size, c.mtu, got, c.want)
		}
	}
}

// flowOf reads packets a peer sent us (decrypted, on their way to the TUN).
// Headers that claim more than the packet holds, or less than the minimum,
// are not TCP or UDP we can merge: ok is false, never a panic or a negative
// payload. IPv4 fragments have no transport header past the first one.
func TestFlowOfBadHeaders(t *testing.T) {
	good4 := tcpOut(t, "10.0.0.1:1000", "10.0.0.2:2000", 100, ack)[tun.Headroom:]
	good6 := tcpOut(t, "[fd00::1]:1000", "[fd00::2]:2000", 100, ack)[tun.Headroom:]
	if _, payload, _, ok := flowOf(good4); !ok || payload != 100 {
		t.Fatalf("valid IPv4 TCP: payload %d ok %v", payload, ok)
	}
	if _, payload, _, ok := flowOf(good6); !ok || payload != 100 {
		t.Fatalf("valid IPv6 TCP: payload %d ok %v", payload, ok)
	}
	mod := func(pkt []byte, f func(p []byte)) []byte {
		p := slices.Clone(pkt)
		f(p)
		return p
	}
	bare4 := good4[:40] // IPv4 + TCP headers, no payload
	for _, c := range []struct {
		name string
		pkt  []byte
	}{
		{"empty", nil},
		{"IPv4 shorter than its fixed header", good4[:19]},
		{"IPv6 shorter than its fixed header", good6[:39]},
		{"IPv4 IHL below 5", mod(good4, func(p []byte) { p[0] = 0x44 })},
		{"IPv4 IHL past the end", mod(bare4, func(p []byte) { p[0] = 0x4f })},
		{"TCP data offset below 5", mod(good4, func(p []byte) { p[20+12] = 0x40 })},
		{"TCP data offset past the end", mod(bare4, func(p []byte) { p[20+12] = 0xf0 })},
		{"IPv6 TCP data offset past the end", mod(good6[:60], func(p []byte) { p[40+12] = 0xf0 })},
		{"IPv4 later fragment", mod(good4, func(p []byte) { p[6], p[7] = 0x00, 0x10 })},
		{"IPv4 first fragment", mod(good4, func(p []byte) { p[6] = 0x20 })},
	} {
		if _, payload, _, ok := flowOf(c.pkt); ok {
			t.Errorf("%s: ok with payload %d, want not ok", c.name, payload)
		}
	}
}

// FuzzFlowOf: no input panics, and an accepted packet's payload fits in it.
func FuzzFlowOf(f *testing.F) {
	mk := func(pkt []byte, err error) []byte {
		if err != nil {
			f.Fatal(err)
		}
		return pkt
	}
	for _, s := range []memtun.TCPSegment{
		{Src: netip.MustParseAddrPort("10.0.0.1:1000"), Dst: netip.MustParseAddrPort("10.0.0.2:2000"), Flags: ack, Payload: make([]byte, 100)},
		{Src: netip.MustParseAddrPort("10.0.0.1:1000"), Dst: netip.MustParseAddrPort("10.0.0.2:2000"), Flags: ack},
		{Src: netip.MustParseAddrPort("[fd00::1]:1000"), Dst: netip.MustParseAddrPort("[fd00::2]:2000"), Flags: ack | psh, Payload: make([]byte, 100)},
	} {
		f.Add(mk(memtun.BuildTCP(s)))
	}
	f.Add(memtun.BuildUDPv4(netip.MustParseAddrPort("10.0.0.1:53"), netip.MustParseAddrPort("10.0.0.2:5353"), make([]byte, 30)))
	f.Add(memtun.BuildUDPv6(netip.MustParseAddrPort("[fd00::1]:53"), netip.MustParseAddrPort("[fd00::2]:5353"), nil))
	f.Add([]byte{0x45})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		_, payload, _, ok := flowOf(pkt)
		if ok && (payload < 0 || payload > len(pkt)) {
			t.Fatalf("payload %d for a %d-byte packet", payload, len(pkt))
		}
	})
}
