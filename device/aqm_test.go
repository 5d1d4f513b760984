package device

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// steppingClock advances by step on every reading, so that every packet
// seems to wait in the device at least step: a standing queue on demand.
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func ipv4Sum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// withTOS sets an IPv4 packet's TOS and recomputes its header checksum.
func withTOS(pkt []byte, tos byte) []byte {
	pkt[1] = tos
	pkt[10], pkt[11] = 0, 0
	binary.BigEndian.PutUint16(pkt[10:], ipv4Sum(pkt[:20]))
	return pkt
}

// With a standing queue on the receiving side, its queue manager gives
// congestion signals: ECN-capable packets arrive marked CE with a valid
// header checksum, others are dropped, never marked; both are counted, and
// nothing else is lost. Small packets are never signalled.
func TestAQMMarksECTAndDropsTheRest(t *testing.T) {
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{})
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	clock := &steppingClock{now: time.Now(), step: 2 * time.Millisecond}
	a := newNode(t, memtun.New("a", 1420, 4096), netw.NewBind(hostA), addrA, hostA, Options{})
	b := newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(hostB), addrB, hostB, Options{Now: clock.Now})
	link(t, a, b)

	// A session first: packets sent before it would be staged, and the
	// staging cap drops some.
	a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1<<31, 200))
	next(t, b.tun, 5*time.Second)

	const n = 3000
	sent := map[uint32]byte{}
	small := 0
	for i := range uint32(n) {
		tos := byte(0x02) // ECT(0)
		if i%2 == 1 {
			tos = 0 // Not-ECT
		}
		sent[i] = tos
		a.tun.(*memtun.Device).Inject(withTOS(udpPacket(addrA, addrB, i, 600), tos))
		if i%100 == 0 {
			// A small packet between the big ones: never signalled.
			a.tun.(*memtun.Device).Inject(udpPacket(addrA, addrB, 1<<30+i, 40))
			small++
		}
		if i%64 == 63 {
			time.Sleep(time.Millisecond) // several batches, so the queue stands across them
		}
	}
	got, marked, gotSmall := 0, 0, 0
	for {
		drops := counter(b.dev.Status(), "rx_aqm_drops") + counter(a.dev.Status(), "tx_aqm_drops")
		if uint64(got)+drops >= n+uint64(small) {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pkt, err := b.tun.(*memtun.Device).Next(ctx)
		cancel()
		if err != nil {
			for _, d := range []*Device{a.dev, b.dev} {
				for _, c := range d.Status().Counters {
					if c.Value != 0 && !strings.HasPrefix(c.Name, "sojourn") {
						t.Logf("%s %d", c.Name, c.Value)
					}
				}
			}
			t.Fatalf("received %d of %d: %v", got, n, err)
		}
		got++
		seq := binary.BigEndian.Uint32(pkt[28:])
		if seq&(1<<30) != 0 {
			if pkt[1]&3 != 0 {
				t.Fatalf("small packet %d marked", seq)
			}
			gotSmall++
			continue
		}
		if ipv4Sum(pkt[:20]) != 0 {
			t.Fatalf("packet %d arrived with a bad header checksum", seq)
		}
		switch pkt[1] & 3 {
		case 3:
			if sent[seq] == 0 {
				t.Fatalf("packet %d was Not-ECT and arrived marked CE", seq)
			}
			marked++
		case sent[seq]:
		default:
			t.Fatalf("packet %d: ECN bits %d, sent %d", seq, pkt[1]&3, sent[seq])
		}
	}
	// The sender's own queue manager may signal too.
	sa, sb := a.dev.Status(), b.dev.Status()
	drops := counter(sb, "rx_aqm_drops") + counter(sa, "tx_aqm_drops")
	marks := counter(sb, "rx_aqm_ecn_marks") + counter(sa, "tx_aqm_ecn_marks")
	if gotSmall != small {
		t.Fatalf("%d of %d small packets arrived", gotSmall, small)
	}
	if drops == 0 || marks == 0 {
		t.Fatalf("no signals: %d drops, %d marks", drops, marks)
	}
	// A packet marked by the sender may be marked again (counted again)
	// by the receiver, so marks counted can exceed marks seen.
	if uint64(marked) > marks || uint64(got)+drops != n+uint64(small) {
		t.Fatalf("received %d (%d marked) with %d drops and %d marks counted, of %d sent", got, marked, drops, marks, n)
	}
}
