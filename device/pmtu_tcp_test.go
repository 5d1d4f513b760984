package device

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// narrowBind is a bind whose path silently drops datagrams bigger than
// carries bytes (outer IPv4 header included), as a path whose ICMP is
// filtered does, for everything it sends: data, not only probes.
type narrowBind struct {
	conn.Bind
	carries atomic.Int64
	out     [][]byte
}

func (b *narrowBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	b.out = b.out[:0]
	for _, dg := range bufs {
		if int64(len(dg)+28) <= b.carries.Load() {
			b.out = append(b.out, dg)
		}
	}
	if len(b.out) == 0 {
		return nil
	}
	return b.Bind.Send(b.out, ep)
}

// stockPair is a pair of devices without probes (as with a stock peer at
// b), a's datagrams to b crossing a path that carries up to carries.
func stockPair(t *testing.T, carries int) (a, b *node) {
	t.Helper()
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{})
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	nb := &narrowBind{Bind: netw.NewBind(hostA)}
	nb.carries.Store(int64(carries))
	a = newNode(t, memtun.New("a", 1420, 4096), nb, addrA, hostA, Options{Logf: t.Logf})
	b = newNode(t, memtun.New("b", 1420, 4096), netw.NewBind(hostB), addrB, hostB, Options{Logf: t.Logf})
	link(t, a, b)
	return a, b
}

// resend injects seg into a's TUN at each of the gaps, as an inner TCP
// resends a segment at its retransmission timeouts, with small packets
// answered both ways in between (the path carries those).
func resend(t *testing.T, a, b *node, seg []byte, gaps ...time.Duration) {
	t.Helper()
	for i, gap := range gaps {
		time.Sleep(gap)
		exchange(t, a, b, uint32(i))
		if err := a.tun.(*memtun.Device).Inject(seg); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
	}
}

// TestPMTUTCPBlackHole: with no probes (a stock peer) and no ICMP, a
// full-size TCP segment a sends again and again at its timeouts, while
// small packets are answered, makes a lower b's path MTU to 1280, learned
// from TCP; the third sending itself is answered with
// fragmentation-needed (not left to the next timeout), and the inner
// stack can go on.
func TestPMTUTCPBlackHole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := stockPair(t, 1300)
		seg := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420)
		resend(t, a, b, seg, 0, 300*time.Millisecond, 600*time.Millisecond)
		ps := peerStats(t, a)
		if ps.PathMTU != 1280 || ps.PathMTUSource != "tcp" {
			t.Fatalf("path MTU %d (%s), want 1280 learned from TCP", ps.PathMTU, ps.PathMTUSource)
		}
		if c := counter(a.dev.Status(), "tx_pmtu_tcp_black_holes"); c != 1 {
			t.Fatalf("tx_pmtu_tcp_black_holes %d, want 1", c)
		}
		in, err := packet.Parse(next(t, a.tun, time.Minute))
		if err != nil || in.Proto != packet.ProtoICMPv4 || in.ICMPType != 3 || in.ICMPCode != 4 {
			t.Fatalf("got %+v (%v), want fragmentation-needed", in, err)
		}
		// 1280 less IPv4 and UDP and WireGuard's 32 bytes, rounded down to
		// the 16 bytes WireGuard pads to: 1216.
		if mtu := binary.BigEndian.Uint16(in.Transport[6:]); mtu != 1216 {
			t.Fatalf("next-hop MTU %d, want 1216", mtu)
		}
		// The floor holds for ten minutes, then the watch starts over.
		time.Sleep(11 * time.Minute)
		exchange(t, a, b, 100)
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("after the hold: path MTU %d (%s), want unknown again", ps.PathMTU, ps.PathMTUSource)
		}
	})
}

// TestPMTUTCPNotBlackHole: what is not a black hole's pattern changes
// nothing: resends in a quick burst, and a segment resent while the peer
// has been silent for long (the path is down, not narrow).
func TestPMTUTCPNotBlackHole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := stockPair(t, 1300)
		seg := tcpPacket(t, addrA, addrB, packet.TCPAck, nil, 1420)
		resend(t, a, b, seg, 0, 20*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond)
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("a burst of resends: path MTU %d (%s)", ps.PathMTU, ps.PathMTUSource)
		}
		time.Sleep(time.Minute) // b silent since
		for range 3 {
			if err := a.tun.(*memtun.Device).Inject(seg); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		if ps := peerStats(t, a); ps.PathMTU != 0 {
			t.Fatalf("resends to a silent peer: path MTU %d (%s)", ps.PathMTU, ps.PathMTUSource)
		}
	})
}

// TestPMTUTCPProbesKnowBetter: a floor learned from TCP yields to what
// answered probes found: a path confirmed by probes stays as they say.
func TestPMTUTCPProbesKnowBetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := probePair(t, 1500)
		exchange(t, a, b, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		p := a.dev.lookupPeer(b.key.PublicKey())
		p.pathState().tcp.until.Store(time.Now().Add(pmtuTCPHold).UnixNano())
		kernelRefresh(t, a, b)
		if ps := peerStats(t, a); ps.PathMTU != 1480 || ps.PathMTUSource != "probe" {
			t.Fatalf("path MTU %d (%s), want 1480 from the probes", ps.PathMTU, ps.PathMTUSource)
		}
	})
}
