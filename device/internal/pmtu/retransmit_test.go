package pmtu

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
)

func segment(t testing.TB, src string, sport uint16, seq uint32, size int) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src), netip.MustParseAddr("10.0.0.2")
	hdr := packet.IPv4HeaderLen + packet.TCPHeaderLen
	if s.Is6() {
		d = netip.MustParseAddr("fd00::2")
		hdr = packet.IPv6HeaderLen + packet.TCPHeaderLen
	}
	p, err := packet.TCP(packet.TCPSegment{Src: netip.AddrPortFrom(s, sport), Dst: netip.AddrPortFrom(d, 5201),
		Seq: seq, Flags: packet.TCPAck, Window: 1000, Payload: make([]byte, size-hdr)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRetransmitsBlackHole: the third transmission of one full-size
// segment, each an RTO apart, is a black hole; for IPv6 too.
func TestRetransmitsBlackHole(t *testing.T) {
	for _, src := range []string{"10.0.0.1", "fd00::1"} {
		var r Retransmits
		now := time.Unix(1e6, 0)
		seg := segment(t, src, 40000, 1000, 1420)
		for i, gap := range []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond} {
			now = now.Add(gap)
			// Other segments of the flow and other flows in between.
			r.Sent(segment(t, src, 40000, 1000+uint32(i+1)*1380, 1420), now)
			r.Sent(segment(t, src, 40001, 7, 1420), now)
			if got := r.Sent(seg, now); got != (i == 2) {
				t.Fatalf("%s: transmission %d reported %v", src, i+1, got)
			}
		}
	}
}

// TestRetransmitsNotBlackHole: what ordinary traffic does is not one: a
// fast retransmit right after the first send, segments that differ in
// length (the sender already cut them), small segments, non-TCP, garbage.
func TestRetransmitsNotBlackHole(t *testing.T) {
	var r Retransmits
	now := time.Unix(1e6, 0)
	// A burst of resends within the minimum gap: not an RTO pattern.
	seg := segment(t, "10.0.0.1", 40000, 1, 1420)
	for range 5 {
		now = now.Add(10 * time.Millisecond)
		if r.Sent(seg, now) {
			t.Fatal("resends 10 ms apart reported")
		}
	}
	// Same sequence number, different lengths.
	for i, size := range []int{1420, 1400, 1300} {
		now = now.Add(time.Second)
		if r.Sent(segment(t, "10.0.0.1", 40002, 5, size), now) {
			t.Fatalf("length %d (%d) reported", size, i)
		}
	}
	// A segment sent again only after a long while is a new episode.
	late := segment(t, "10.0.0.1", 40003, 9, 1420)
	for range 3 {
		now = now.Add(time.Minute)
		if r.Sent(late, now) {
			t.Fatal("sends a minute apart reported")
		}
	}
	for _, bad := range [][]byte{nil, {0x45}, make([]byte, 1420), packetUDP(t)} {
		for range 3 {
			now = now.Add(time.Second)
			if r.Sent(bad, now) {
				t.Fatalf("%d-byte non-TCP packet reported", len(bad))
			}
		}
	}
}

// TestRetransmitsBounded: the watch keeps RetransmitSlots flows; with
// fewer busy flows than that it catches the one resent among them, and
// a flood of flows costs no memory (it only hides the resends).
func TestRetransmitsBounded(t *testing.T) {
	for _, c := range []struct {
		flows int
		want  bool
	}{{RetransmitSlots - 1, true}, {1000, false}} {
		var r Retransmits
		now := time.Unix(1e6, 0)
		seg := segment(t, "10.0.0.1", 1, 1, 1420)
		got := false
		for i := range 3 {
			now = now.Add(400 * time.Millisecond)
			for f := range c.flows {
				r.Sent(segment(t, "10.0.0.1", uint16(100+f), uint32(i*1380), 1420), now)
			}
			got = r.Sent(seg, now)
		}
		if got != c.want {
			t.Fatalf("%d other flows: third sending reported %v", c.flows, got)
		}
	}
}

func packetUDP(t *testing.T) []byte {
	t.Helper()
	p, err := packet.UDP(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), make([]byte, 1392))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRetransmitsAllocatesNothing: the watch sits on the data path.
func TestRetransmitsAllocatesNothing(t *testing.T) {
	var r Retransmits
	now := time.Unix(1e6, 0)
	segs := [][]byte{segment(t, "10.0.0.1", 1, 1, 1420), segment(t, "fd00::1", 2, 1, 1420)}
	if n := testing.AllocsPerRun(100, func() {
		now = now.Add(200 * time.Millisecond)
		for _, s := range segs {
			r.Sent(s, now)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
