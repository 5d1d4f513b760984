package device

import (
	"crypto/rand"
	"github.com/fips-go/fips-go/device/noise"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun"
	"net/netip"
)

// feedTUN is a TUN for allocation and memory tests: each value sent on feed
// makes Read return that many copies of pkt, and Write only counts. Neither
// allocates, so whatever the measurement sees is the device's own.
type feedTUN struct {
	pkt     []byte
	feed    chan int
	wrote   chan int
	written atomic.Uint64
	events  chan tun.Event
	closed  chan struct{}
}

func newFeedTUN(pkt []byte) *feedTUN {
	return &feedTUN{pkt: pkt, feed: make(chan int), wrote: make(chan int, 1024), events: make(chan tun.Event), closed: make(chan struct{})}
}

func (f *feedTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	select {
	case n := <-f.feed:
		n = min(n, len(bufs))
		for i := 0; i < n; i++ {
			sizes[i] = copy(bufs[i][offset:], f.pkt)
		}
		return n, nil
	case <-f.closed:
		return 0, tun.ErrGone
	}
}

func (f *feedTUN) Write(bufs [][]byte, offset int) (int, error) {
	f.written.Add(uint64(len(bufs)))
	select {
	case f.wrote <- len(bufs):
	default:
	}
	return len(bufs), nil
}

func (f *feedTUN) MTU() (int, error)        { return 1420, nil }
func (f *feedTUN) Name() (string, error)    { return "feed", nil }
func (f *feedTUN) Events() <-chan tun.Event { return f.events }
func (f *feedTUN) BatchSize() int           { return 128 }
func (f *feedTUN) File() *os.File           { return nil }
func (f *feedTUN) Close() error {
	select {
	case <-f.closed:
	default:
		close(f.closed)
	}
	return nil
}

var _ tun.Device = (*feedTUN)(nil)

// A steady stream of batches through an established session allocates
// nothing: TUN read, routing, sealing, sequencing and sending on one device,
// receiving, opening, replay and source checks and the TUN write on the other.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	leakcheck.Check(t)
	lo := netip.MustParseAddr("127.0.0.1")
	ta := newFeedTUN(udpPacket(addrA, addrB, 1, 1000))
	tb := newFeedTUN(udpPacket(addrB, addrA, 1, 1000))
	a := newNode(t, ta, conn.NewDefault(conn.Options{}), addrA, lo, Options{Workers: 2})
	b := newNode(t, tb, conn.NewDefault(conn.Options{}), addrB, lo, Options{Workers: 2})
	link(t, a, b)

	const batch = 64
	roundTrip := func() {
		want := tb.written.Load() + batch
		ta.feed <- batch
		// No timeout here: a timer would allocate. go test -timeout catches a hang.
		for tb.written.Load() < want {
			<-tb.wrote
		}
	}
	// First batch: handshake, staging, lazily allocated pool buffers.
	ta.feed <- 1
	deadline := time.Now().Add(5 * time.Second)
	for tb.written.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for range 50 {
		roundTrip()
	}
	runtime.GC()
	allocs := testing.AllocsPerRun(200, roundTrip)
	if allocs != 0 {
		t.Fatalf("%.2f allocations per %d-packet batch through two devices, want 0", allocs, batch)
	}
}

// Traffic at a peer that never answers must not grow the heap: packets wait
// in a bounded staging queue and the oldest are dropped.
func TestUnreachablePeerHeapStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 10 seconds")
	}
	leakcheck.Check(t)
	lo := netip.MustParseAddr("127.0.0.1")
	ta := newFeedTUN(udpPacket(addrA, addrB, 1, 1400))
	a := newNode(t, ta, conn.NewDefault(conn.Options{}), addrA, lo, Options{})
	// A port nobody listens on: every initiation vanishes.
	dead := netip.AddrPortFrom(lo, 9)
	priv, err := noise.GeneratePrivateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey()
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{
		PublicKey:  pub,
		Endpoint:   &dead,
		AllowedIPs: []AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/24")}},
	}}}); err != nil {
		t.Fatal(err)
	}
	// Ceiling: the batch pool plus the staging queue, with slack for the
	// runtime and the test itself.
	opts := a.dev.opts
	ceiling := uint64(opts.batches*opts.batchSize*bufSizeFor(1420)) + uint64(opts.stagedPackets*1500) + 16<<20
	// Earlier tests' garbage is not ours to count.
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	end := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		ta.feed <- 128
		if i%256 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc-min(base, ms.HeapAlloc))
		}
	}
	st := a.dev.Status()
	dropped := counter(st, "tx_drop_staged_overflow")
	t.Logf("peak heap growth %.1f MiB (ceiling %.1f MiB); %d packets dropped from staging", float64(peak)/(1<<20), float64(ceiling)/(1<<20), dropped)
	if peak > ceiling {
		t.Fatalf("heap peaked at %d bytes, over the %d-byte ceiling", peak, ceiling)
	}
	if dropped == 0 {
		t.Fatal("nothing was dropped: the staging queue is not bounded")
	}
}

// BenchmarkPipeline pushes 64-packet batches of 1420-byte packets through
// two devices joined by real loopback UDP: TUN read, routing, sealing,
// sequencing, GSO send, GRO receive, opening, replay and source checks and
// the TUN write, everything but a real TUN.
func BenchmarkPipeline(b *testing.B) {
	lo := netip.MustParseAddr("127.0.0.1")
	ta := newFeedTUN(udpPacket(addrA, addrB, 1, 1392))
	tb := newFeedTUN(udpPacket(addrB, addrA, 1, 1392))
	x := newNode(b, ta, conn.NewDefault(conn.Options{}), addrA, lo, Options{})
	y := newNode(b, tb, conn.NewDefault(conn.Options{}), addrB, lo, Options{})
	link(b, x, y)
	ta.feed <- 1
	for tb.written.Load() == 0 {
		<-tb.wrote
	}
	const batch = 64
	b.SetBytes(batch * 1420)
	b.ReportAllocs()
	b.ResetTimer()
	want := tb.written.Load()
	for range b.N {
		want += batch
		ta.feed <- batch
		// Keep up to 8 batches in flight (want is unsigned: compare by adding).
		for tb.written.Load()+batch*8 < want {
			<-tb.wrote
		}
	}
	for tb.written.Load() < want {
		<-tb.wrote
	}
}
