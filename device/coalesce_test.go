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
