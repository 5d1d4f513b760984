package netstack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
)

const (
	flagFIN = 0x01
	flagRST = 0x04
	flagPSH = 0x08
	flagACK = 0x10
)

// ackPacket builds a peer's TCP packet of flow port (its source port).
func ackPacket(t testing.TB, v6 bool, port uint16, ack uint32, flags uint8, opts, payload []byte) []byte {
	t.Helper()
	src, dst := netip.MustParseAddr("10.7.0.1"), netip.MustParseAddr("10.86.0.2")
	if v6 {
		src, dst = netip.MustParseAddr("fd00::7:1"), netip.MustParseAddr("fd00::86:2")
	}
	p, err := packet.TCP(packet.TCPSegment{
		Src: netip.AddrPortFrom(src, port), Dst: netip.AddrPortFrom(dst, 443),
		Seq: 1000, Ack: ack, Flags: flags, Window: 512, Options: opts, Payload: payload,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// offerAll runs h on p and returns what is delivered now, in order.
func offerAll(t testing.TB, h *ackHolder, p []byte, now int64) [][]byte {
	t.Helper()
	info, ok := parseTCP(p)
	if !ok {
		return [][]byte{p}
	}
	before, deliver := h.offer(p, info, now)
	var out [][]byte
	if before != nil {
		out = append(out, bytes.Clone(before))
	}
	if deliver {
		out = append(out, p)
	}
	return out
}

func ackOf(p []byte) uint32 {
	info, _ := parseTCP(p)
	return info.ack
}

// Two interleaved flows: each flow's first ACK is held and dropped when
// its next one supersedes it, so the stack takes every other ACK.
func TestACKHolderThinsInterleavedFlows(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			h := newACKHolder(1e6, 16, 0)
			offerAll(t, h, ackPacket(t, v6, 3999, 5, flagACK, nil, nil), 0) // the first ACK is never held
			var got []string
			for i := range uint32(6) {
				for _, port := range []uint16{4000, 4001} {
					for _, p := range offerAll(t, h, ackPacket(t, v6, port, 1000+i*20000, flagACK, nil, nil), int64(i)) {
						info, _ := parseTCP(p)
						got = append(got, fmt.Sprintf("%d:%d", info.key.sport, ackOf(p)))
					}
				}
			}
			want := "[4000:21000 4001:21000 4000:61000 4001:61000 4000:101000 4001:101000]"
			if fmt.Sprint(got) != want {
				t.Errorf("delivered %v, want %s", got, want)
			}
			if h.holds != 6 || h.superseded != 6 || h.released != 0 || len(h.held) != 0 {
				t.Errorf("holds %d superseded %d released %d held %d; want 6 6 0 0", h.holds, h.superseded, h.released, len(h.held))
			}
		})
	}
}

// A flow whose ACKs follow each other (no other flow between) is never
// held: its sender may have nothing else in flight.
func TestACKHolderLoneFlowPasses(t *testing.T) {
	h := newACKHolder(1e6, 16, 0)
	for i := range uint32(10) {
		p := ackPacket(t, false, 4000, 1000+i*1448, flagACK, nil, nil)
		if out := offerAll(t, h, p, 0); len(out) != 1 || !bytes.Equal(out[0], p) {
			t.Fatalf("ACK %d: delivered %d packets, want it alone at once", i, len(out))
		}
	}
	if h.holds != 0 {
		t.Errorf("held %d ACKs of a lone flow", h.holds)
	}
}

// Anything of a flow that is not a newer pure ACK releases its held ACK
// first, so the stack sees the flow's packets in their order.
func TestACKHolderReleasesBeforeOtherPackets(t *testing.T) {
	sackOpt := []byte{1, 1, 5, 10, 0, 0, 0x10, 0, 0, 0, 0x20, 0}
	cases := []struct {
		name string
		p    func(t *testing.T) []byte
	}{
		{"data", func(t *testing.T) []byte {
			return ackPacket(t, false, 4000, 50000, flagACK|flagPSH, nil, []byte("hello"))
		}},
		{"FIN", func(t *testing.T) []byte { return ackPacket(t, false, 4000, 50000, flagACK|flagFIN, nil, nil) }},
		{"RST", func(t *testing.T) []byte { return ackPacket(t, false, 4000, 50000, flagRST|flagACK, nil, nil) }},
		{"duplicate ACK", func(t *testing.T) []byte { return ackPacket(t, false, 4000, 20000, flagACK, nil, nil) }},
		{"older ACK", func(t *testing.T) []byte { return ackPacket(t, false, 4000, 10000, flagACK, nil, nil) }},
		{"SACK", func(t *testing.T) []byte { return ackPacket(t, false, 4000, 50000, flagACK, sackOpt, nil) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newACKHolder(1e6, 16, 0)
			offerAll(t, h, ackPacket(t, false, 3999, 5, flagACK, nil, nil), 0) // another flow first
			held := ackPacket(t, false, 4000, 20000, flagACK, nil, nil)
			if out := offerAll(t, h, held, 0); len(out) != 0 {
				t.Fatalf("first ACK of an interleaved flow delivered at once")
			}
			p := c.p(t)
			out := offerAll(t, h, p, 1)
			if len(out) != 2 || !bytes.Equal(out[0], held) || !bytes.Equal(out[1], p) {
				t.Fatalf("delivered %d packets, want the held ACK then the new packet", len(out))
			}
			if h.released != 1 || len(h.held) != 0 {
				t.Errorf("released %d, held %d; want 1, 0", h.released, len(h.held))
			}
		})
	}
}

func TestACKHolderDeadline(t *testing.T) {
	const hold = 2e6
	h := newACKHolder(hold, 16, 0)
	offerAll(t, h, ackPacket(t, false, 3999, 5, flagACK, nil, nil), 0)
	a := ackPacket(t, false, 4000, 20000, flagACK, nil, nil)
	b := ackPacket(t, true, 4000, 20000, flagACK, nil, nil) // same ports, other family: another flow
	offerAll(t, h, a, 100)
	offerAll(t, h, b, 500)
	var got [][]byte
	collect := func(p []byte) { got = append(got, bytes.Clone(p)) }
	if next := h.expire(hold+99, collect); len(got) != 0 || next != 100+hold {
		t.Fatalf("before the deadline: delivered %d, next %d; want 0, %d", len(got), next, int64(100+hold))
	}
	if next := h.expire(hold+100, collect); len(got) != 1 || !bytes.Equal(got[0], a) || next != 500+hold {
		t.Fatalf("at the first deadline: delivered %d, next %d", len(got), next)
	}
	if next := h.expire(math.MaxInt64, collect); len(got) != 2 || !bytes.Equal(got[1], b) || next != 0 {
		t.Fatalf("at the end: delivered %d, next %d", len(got), next)
	}
	if h.holds != 2 || h.released != 2 {
		t.Errorf("holds %d released %d, want 2 2", h.holds, h.released)
	}
}

func TestACKHolderCap(t *testing.T) {
	h := newACKHolder(1e6, 2, 0)
	offerAll(t, h, ackPacket(t, false, 3999, 5, flagACK, nil, nil), 0)
	for port := uint16(4000); port < 4003; port++ {
		out := offerAll(t, h, ackPacket(t, false, port, 20000, flagACK, nil, nil), 0)
		if held := len(out) == 0; held != (port < 4002) {
			t.Errorf("flow %d: held %v with %d held before", port, held, len(h.held))
		}
	}
	if len(h.held) != 2 {
		t.Errorf("%d held, cap is 2", len(h.held))
	}
}

// What parseTCP refuses or will not hold.
func TestParseTCP(t *testing.T) {
	ack := ackPacket(t, false, 4000, 7, flagACK, nil, nil)
	frag := bytes.Clone(ack)
	binary.BigEndian.PutUint16(frag[6:], 0x2000) // more fragments
	udp := bytes.Clone(ack)
	udp[9] = 17
	v6ext := ackPacket(t, true, 4000, 7, flagACK, nil, nil)
	v6ext[6] = 0 // hop-by-hop options first
	badOff := bytes.Clone(ack)
	badOff[20+12] = 0x40 // data offset 16 bytes
	badOpts := ackPacket(t, false, 4000, 7, flagACK, []byte{8, 40, 0, 0}, nil)
	withTS := ackPacket(t, false, 4000, 7, flagACK, []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, nil)
	for _, c := range []struct {
		name         string
		p            []byte
		ok, holdable bool
	}{
		{"pure ACK", ack, true, true},
		{"pure ACK with timestamps", withTS, true, true},
		{"fragment", frag, false, false},
		{"UDP", udp, false, false},
		{"IPv6 extension header", v6ext, false, false},
		{"bad data offset", badOff, false, false},
		{"malformed options", badOpts, true, false},
		{"truncated", ack[:30], false, false},
		{"empty", nil, false, false},
	} {
		info, ok := parseTCP(c.p)
		if ok != c.ok || info.holdable != c.holdable {
			t.Errorf("%s: ok %v holdable %v, want %v %v", c.name, ok, info.holdable, c.ok, c.holdable)
		}
	}
}

// Whatever the packets, the holder never panics, never delivers a packet
// twice or one it was not given, and accounts for each: delivered at
// once, released later, or superseded.
func FuzzACKHolder(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 3, 0, 4, 2, 0})
	f.Add(bytes.Repeat([]byte{1, 9}, 20))
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newACKHolder(5, 4, 0)
		offered, now := 0, int64(0)
		delivered := map[string]int{}
		count := func(p []byte) {
			delivered[string(p)]++
			if delivered[string(p)] > 1 {
				t.Fatalf("packet delivered twice")
			}
		}
		for i := 0; i+1 < len(script); i += 2 {
			op, arg := script[i]%4, script[i+1]
			now += int64(arg % 3)
			var p []byte
			switch op {
			case 0: // a pure ACK of one of 3 flows; seq unique so packets differ
				p = ackPacket(t, arg&1 == 0, 4000+uint16(arg%3), uint32(i)*100-uint32(arg&8)*1000, flagACK, nil, nil)
			case 1: // data
				p = ackPacket(t, false, 4000+uint16(arg%3), uint32(i)*100, flagACK|flagPSH, nil, []byte{byte(i)})
			case 2: // garbage built from the script
				p = append([]byte{0x45}, script[i:]...)
				p = append(p, byte(i), byte(i>>8))
			case 3:
				h.expire(now, count)
				continue
			}
			if op != 2 {
				// Make every packet unique: the TCP sequence number is i.
				l4 := 20
				if p[0]>>4 == 6 {
					l4 = 40
				}
				binary.BigEndian.PutUint32(p[l4+4:], uint32(i))
			}
			offered++
			info, ok := parseTCP(p)
			if !ok {
				count(p)
				continue
			}
			before, deliver := h.offer(p, info, now)
			if before != nil {
				count(before)
			}
			if deliver {
				count(p)
			}
		}
		h.expire(math.MaxInt64, count)
		if len(h.held) != 0 {
			t.Fatalf("%d still held after the last deadline", len(h.held))
		}
		if got := len(delivered) + int(h.superseded); got != offered {
			t.Fatalf("offered %d, delivered %d + superseded %d", offered, len(delivered), h.superseded)
		}
	})
}

// Through the stack: with a few flows nothing is held; with ACKs held,
// concurrent flows arrive intact and none is left held once they end.
func TestTCPTransferWithACKHold(t *testing.T) {
	leakcheck.Check(t)
	var packets atomic.Int64
	p := newPair(t, Options{ACKHold: 2 * time.Millisecond}, verifier(t, DefaultMTU, &packets))
	run := func(t *testing.T, flows, size int, port uint16) {
		for i := range flows {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				server := netip.AddrPortFrom(addrB4, port+uint16(i))
				if i%2 == 1 {
					server = netip.AddrPortFrom(addrB6, port+uint16(i))
				}
				transfer(t, p.a, p.b, server, size)
			})
		}
	}
	t.Run("few", func(t *testing.T) { run(t, 8, 4<<20, 5100) })
	if s := p.a.Stats(); s.ACKsHeld != 0 {
		t.Errorf("8 flows: %d ACKs held; want none below %d flows", s.ACKsHeld, defaultMinFlows)
	}
	// In memory the flows' ACKs do not interleave as widely as on a real
	// link; let any two interleaved flows count as many, so the flows
	// below run with ACKs held.
	p.a.ack.mu.Lock()
	p.a.ack.h.minFlows = 1
	p.a.ack.mu.Unlock()
	t.Run("many", func(t *testing.T) { run(t, 16, 4<<20, 5200) })
	var s Stats
	waitFor(t, "held ACKs to be released", func() bool {
		s = p.a.Stats()
		return s.ACKsHeld == s.ACKsSuperseded+s.ACKsReleased
	})
	t.Logf("sender: %d ACKs held, %d superseded, %d released, %d retransmits", s.ACKsHeld, s.ACKsSuperseded, s.ACKsReleased, s.TCPRetransmits)
	if s.ACKsHeld == 0 {
		t.Errorf("16 concurrent flows: no ACK held")
	}
	if s.InvalidIn+s.GSOErrors+s.Oversize != 0 {
		t.Errorf("unexpected drops: %+v", s)
	}
}

// ACKs are held only while many flows interleave: 10 flows round-robin
// never, 100 flows once an epoch has counted them.
func TestACKHolderHoldsOnlyAmongManyFlows(t *testing.T) {
	h := newACKHolder(1e6, 1024, defaultMinFlows)
	ack := uint32(1000)
	offerRound := func(flows int) {
		for port := range uint16(flows) {
			ack += 1000
			offerAll(t, h, ackPacket(t, false, 4000+port, ack, flagACK, nil, nil), 0)
		}
	}
	for range 2 * epochACKs / 10 {
		offerRound(10)
	}
	if h.holds != 0 {
		t.Fatalf("10 flows: %d ACKs held (active %d)", h.holds, h.active)
	}
	offerRound(100) // the epoch that counts them
	before := h.holds
	offerRound(100)
	if h.holds == before || h.active < defaultMinFlows {
		t.Fatalf("100 flows: %d ACKs held in a round, active %d", h.holds-before, h.active)
	}
	offerRound(10)
	offerRound(10)
	offerRound(10)
	offerRound(10)
	offerRound(10)
	offerRound(10)
	offerRound(10)
	before = h.holds
	offerRound(10)
	if h.holds != before {
		t.Errorf("back to 10 flows: still holding (active %d)", h.active)
	}
}
