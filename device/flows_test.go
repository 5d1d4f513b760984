package device

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/internal/aqm"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/memtun"
)

func TestFlowBucketFollowsTheFiveTuple(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	p1 := memtun.BuildUDPv4(netip.AddrPortFrom(a, 1000), netip.AddrPortFrom(b, 53), []byte("one"))
	p2 := memtun.BuildUDPv4(netip.AddrPortFrom(a, 1000), netip.AddrPortFrom(b, 53), []byte("a longer payload"))
	if flowBucket(p1) != flowBucket(p2) {
		t.Fatal("two packets of one flow in different buckets")
	}
	// Ports count: over 64 source ports, more than one bucket is used.
	seen := map[uint8]bool{}
	for port := uint16(2000); port < 2064; port++ {
		seen[flowBucket(memtun.BuildUDPv4(netip.AddrPortFrom(a, port), netip.AddrPortFrom(b, 53), nil))] = true
	}
	if len(seen) < 16 {
		t.Fatalf("64 flows fell in %d buckets", len(seen))
	}
	// A later fragment has no ports: it must fall with its flow's other
	// port-less packets, whatever its payload bytes say.
	f1, f2 := bytes.Clone(p1), bytes.Clone(p2)
	for _, f := range [][]byte{f1, f2} {
		binary.BigEndian.PutUint16(f[6:8], 100) // fragment offset 100
		f[20], f[21] = byte(len(f)), 7          // differing "ports"
	}
	if flowBucket(f1) != flowBucket(f2) {
		t.Fatal("fragments of one flow in different buckets")
	}
	v6a, v6b := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	q1 := memtun.BuildUDPv6(netip.AddrPortFrom(v6a, 1), netip.AddrPortFrom(v6b, 2), []byte("x"))
	q2 := memtun.BuildUDPv6(netip.AddrPortFrom(v6a, 1), netip.AddrPortFrom(v6b, 2), []byte("yy"))
	if flowBucket(q1) != flowBucket(q2) {
		t.Fatal("IPv6 flow split")
	}
	for _, g := range [][]byte{nil, {0x45}, make([]byte, 19), {0x60, 0, 0}} {
		if flowBucket(g) != 0 {
			t.Fatalf("garbage %x not in bucket 0", g)
		}
	}
}

func FuzzFlowBucket(f *testing.F) {
	f.Add(memtun.BuildUDPv4(netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:2"), nil))
	f.Fuzz(func(t *testing.T, p []byte) {
		if flowBucket(p) >= flowBuckets {
			t.Fatal("bucket out of range")
		}
	})
}

// gatedBind holds every datagram larger than small in Send until open is
// closed, so that a test can make a bulk backlog stand as long as it likes.
type gatedBind struct {
	conn.Bind
	small int
	open  chan struct{}
	once  sync.Once
}

func (g *gatedBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	for _, b := range bufs {
		if len(b) > g.small {
			<-g.open
			break
		}
	}
	return g.Bind.Send(bufs, ep)
}

func (g *gatedBind) release() { g.once.Do(func() { close(g.open) }) }

// scriptTUN reads the batches a test queues, one per Read, so that what
// the device reads together is the test's choice; the rest is memtun's.
type scriptTUN struct {
	*memtun.Device
	reads  chan [][]byte
	closed chan struct{}
	once   sync.Once
}

var _ tun.Device = (*scriptTUN)(nil)

func (s *scriptTUN) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.Device.Close()
}

func (s *scriptTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case pkts := <-s.reads:
		for i, p := range pkts {
			sizes[i] = copy(bufs[i][offset:], p)
		}
		return len(pkts), nil
	case <-s.closed:
		return 0, tun.ErrGone
	}
}

// A sparse flow's packet is sent ahead of a bulk flow's backlog, and every
// packet of the bulk flow still arrives in order.
func TestSparseFlowOvertakesBulkBacklog(t *testing.T) {
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{QueueLen: 8192})
	hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	gate := &gatedBind{Bind: netw.NewBind(hostA), small: 200, open: make(chan struct{})}
	ta := &scriptTUN{Device: memtun.New("a", 1420, 64), reads: make(chan [][]byte, 16), closed: make(chan struct{})}
	// No queue management: the held backlog would have it drop bulk packets.
	a := newNode(t, ta, gate, addrA, hostA, Options{aqmParams: aqm.Params{Target: -1}})
	b := newNode(t, memtun.New("b", 1420, 8192), netw.NewBind(hostB), addrB, hostB, Options{})
	// Registered after the nodes, so it runs before their Close: a held
	// Send would keep Close waiting.
	t.Cleanup(gate.release)
	link(t, a, b)
	tb := b.tun.(*memtun.Device)
	// A session first, with a small packet the gate lets through.
	ta.reads <- [][]byte{udpPacket(addrA, addrB, 1<<31, 20)}
	next(t, tb, 5*time.Second)

	bulkPkt := func(seq uint32) []byte {
		return memtun.BuildUDPv4(netip.AddrPortFrom(addrA, 7000), netip.AddrPortFrom(addrB, 7001), binary.BigEndian.AppendUint32(make([]byte, 0, 1000), seq)[:1000])
	}
	// A ping session whose flow bucket is not the bulk flow's (buckets
	// are keyed per process; a collision only forgoes the overtaking).
	var ping []byte
	for id := uint16(1); ; id++ {
		ping = memtun.BuildICMPv4Echo(addrA, addrB, false, id, 1, []byte("ping"))
		if flowBucket(ping) != flowBucket(bulkPkt(0)) {
			break
		}
	}
	// Four reads: bulk, bulk, bulk with the ping among it, the ping alone
	// (a second echo); the held backlog is in front of both pings.
	var seq uint32
	read := func(n int) [][]byte {
		var r [][]byte
		for range n {
			r = append(r, bulkPkt(seq))
			seq++
		}
		return r
	}
	ta.reads <- read(100)
	ta.reads <- read(100)
	mixed := read(50)
	mixed = append(mixed[:25], append([][]byte{ping}, mixed[25:]...)...)
	ta.reads <- mixed
	for _, want := range [][]byte{ping} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := tb.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("the ping did not get past the held backlog: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("first packet out is not the ping: %d bytes", len(got))
		}
	}
	ping2 := bytes.Clone(ping)
	ta.reads <- [][]byte{ping2}
	if got := next(t, tb, 5*time.Second); !bytes.Equal(got, ping2) {
		t.Fatalf("second packet out is not the second ping: %d bytes", len(got))
	}
	gate.release()
	for i := range seq {
		pkt := next(t, tb, 5*time.Second)
		if got := binary.BigEndian.Uint32(pkt[28:]); got != i {
			t.Fatalf("bulk packet %d arrived in place of %d", got, i)
		}
	}
}

// Packets of a read that goes to several peers are counted as unroutable
// only when no peer's allowed IPs hold them: moving the others into their
// peers' batches must not count them too.
func TestMixedReadCountsOnlyUnroutable(t *testing.T) {
	leakcheck.Check(t)
	netw := membind.NewNetwork(membind.NetOptions{QueueLen: 1024})
	hostA, hostB, hostC := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	addrC := netip.MustParseAddr("10.0.0.3")
	ta := &scriptTUN{Device: memtun.New("a", 1420, 64), reads: make(chan [][]byte, 4), closed: make(chan struct{})}
	a := newNode(t, ta, netw.NewBind(hostA), addrA, hostA, Options{})
	b := newNode(t, memtun.New("b", 1420, 64), netw.NewBind(hostB), addrB, hostB, Options{})
	c := newNode(t, memtun.New("c", 1420, 64), netw.NewBind(hostC), addrC, hostC, Options{})
	link(t, a, b)
	link(t, a, c)
	unroutable := netip.MustParseAddr("10.0.9.9")
	var read [][]byte
	for i := range uint32(6) {
		read = append(read, udpPacket(addrA, addrB, i, 100), udpPacket(addrA, addrC, i, 100), udpPacket(addrA, unroutable, i, 100))
	}
	ta.reads <- read
	for range 6 {
		next(t, b.tun, 5*time.Second)
		next(t, c.tun, 5*time.Second)
	}
	if got := counter(a.dev.Status(), "tx_drop_no_route"); got != 6 {
		t.Fatalf("tx_drop_no_route = %d, want 6", got)
	}
}

// flowMemo and the run-length counting in countFlows give every packet the
// bucket flowBucket gives it, whatever the mix: runs of one flow (a
// super-packet's segments), alternating flows, IPv6, fragments, garbage;
// and uncountFlows takes exactly what countFlows added.
func TestFlowMemoMatchesFlowBucket(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	v6a, v6b := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	frag := memtun.BuildUDPv4(netip.AddrPortFrom(a, 9), netip.AddrPortFrom(b, 9), []byte("fragment"))
	binary.BigEndian.PutUint16(frag[6:8], 100)
	kinds := [][]byte{
		memtun.BuildUDPv4(netip.AddrPortFrom(a, 1000), netip.AddrPortFrom(b, 53), []byte("one")),
		memtun.BuildUDPv4(netip.AddrPortFrom(a, 1001), netip.AddrPortFrom(b, 53), []byte("two")),
		memtun.BuildUDPv6(netip.AddrPortFrom(v6a, 1), netip.AddrPortFrom(v6b, 2), []byte("six")),
		frag,
		{0x45},    // garbage: bucket 0
		{0x60, 0}, // garbage too
	}
	p := &Peer{d: &Device{}} // enough for the flow counts
	bt := &batch{flows: make([]uint8, 64)}
	rng := uint32(1)
	for round := 0; round < 200; round++ {
		bt.n = 0
		bt.bufs, bt.sizes = bt.bufs[:0], bt.sizes[:0]
		for bt.n < 64 {
			rng = rng*1664525 + 1013904223
			pkt := kinds[rng>>24%uint32(len(kinds))]
			for run := int(rng>>8%8) + 1; run > 0 && bt.n < 64; run-- {
				buf := make([]byte, stagedFrom+len(pkt))
				copy(buf[stagedFrom:], pkt)
				bt.bufs, bt.sizes = append(bt.bufs, buf), append(bt.sizes, len(pkt))
				bt.n++
			}
		}
		var want [flowBuckets]int32
		var m flowMemo
		for i := 0; i < bt.n; i++ {
			pkt := bt.bufs[i][stagedFrom : stagedFrom+bt.sizes[i]]
			h := flowBucket(pkt)
			if got := m.bucket(pkt); got != h {
				t.Fatalf("round %d packet %d: memo bucket %d, flowBucket %d", round, i, got, h)
			}
			want[h]++
		}
		p.countFlows(bt)
		for h := range want {
			if got := p.carry().flowq[h].Load(); got != want[h] {
				t.Fatalf("round %d: bucket %d counts %d, want %d", round, h, got, want[h])
			}
		}
		p.uncountFlows(bt)
		for h := range p.carry().flowq {
			if got := p.carry().flowq[h].Load(); got != 0 {
				t.Fatalf("round %d: bucket %d left at %d after uncount", round, h, got)
			}
		}
		if p.carry().queued.Load() != 0 {
			t.Fatalf("round %d: %d left queued", round, p.carry().queued.Load())
		}
	}
}

// BenchmarkCountFlows: a bulk batch, one super-packet's 46 segments.
func BenchmarkCountFlows(b *testing.B) {
	pkt := memtun.BuildUDPv4(netip.MustParseAddrPort("10.0.0.1:1000"), netip.MustParseAddrPort("10.0.0.2:5201"), make([]byte, 1368))
	bt := &batch{flows: make([]uint8, 46)}
	for range 46 {
		buf := make([]byte, stagedFrom+len(pkt))
		copy(buf[stagedFrom:], pkt)
		bt.bufs, bt.sizes = append(bt.bufs, buf), append(bt.sizes, len(pkt))
	}
	bt.n = 46
	var p Peer
	b.ReportAllocs()
	for b.Loop() {
		p.countFlows(bt)
		p.uncountFlows(bt)
	}
}
