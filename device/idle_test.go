package device

import (
	"net/netip"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun/memtun"
)

// An idle peer must give back the buffers it took while it carried
// traffic: with 10,000 peers, 11 KiB each would be 110 MiB for nothing.
//
// One device talks to n others, one packet each way per pair, so every
// peer (n on the hub, one on each spoke) has used both sequencers and its
// send scratch. A first round warms every device-wide pool, index table and
// staging buffer and is then unlinked, so the baseline holds configured
// peers that never carried traffic, and the growth after idling is what
// traffic leaves behind per peer.
func TestIdlePeersReleaseTheirBuffers(t *testing.T) {
	n := 1000
	if raceEnabled || testing.Short() {
		n = 100
	}
	synctest.Test(t, func(t *testing.T) {
		leakcheck.Check(t)
		// Small pools keep 1,001 devices cheap; per-peer sizes are the
		// defaults (PeerQueue 256, send scratch of the bind's 128).
		opts := Options{Workers: 1, batchSize: 8, batches: 4, smallBatches: 4, handshakeQueue: 8, stagingBuffers: 4}
		netw := membind.NewNetwork(membind.NetOptions{QueueLen: 64})
		hostA, hostB := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
		hub := newNode(t, memtun.New("hub", 1420, 64), netw.NewBind(hostA), addrA, hostA, opts)
		spokes := make([]*node, n)
		for i := range spokes {
			addr := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
			spokes[i] = newNode(t, memtun.New("spoke", 1420, 64), netw.NewBind(hostB), addr, hostB, opts)
		}
		exchange := func() {
			for _, s := range spokes {
				link(t, hub, s)
				hub.tun.(*memtun.Device).Inject(udpPacket(addrA, s.addr, 1, 100))
				next(t, s.tun, time.Minute)
				s.tun.(*memtun.Device).Inject(udpPacket(s.addr, addrA, 2, 100))
				next(t, hub.tun, time.Minute)
			}
		}
		exchange()
		for _, s := range spokes {
			unlink(t, hub, s)
		}
		time.Sleep(time.Minute)
		for _, s := range spokes {
			link(t, hub, s)
		}
		// The pools' buffers are the device's, allocated on first use by
		// whichever peer needs one (and which one that is depends on how
		// batches rotate through the pool): allocated from the start, they
		// stay out of the per-peer figures.
		for _, n := range append([]*node{hub}, spokes...) {
			warmPools(n.dev)
		}
		base := heapAfterGC()
		exchange()
		active := heapAfterGC()
		// Freed 20 to 30 s after the last packet (see releaseIfIdle).
		time.Sleep(time.Minute)
		synctest.Wait()
		idle := heapAfterGC()
		peers := float64(2 * n)
		perActive := (float64(active) - float64(base)) / peers
		perIdle := (float64(idle) - float64(base)) / peers
		t.Logf("%d peers: %.0f B each after carrying traffic, %.0f B each once idle (over never-used peers)", 2*n, perActive, perIdle)
		if perIdle > 2048 {
			t.Fatalf("an idle peer keeps %.0f B of buffers, want under 2 KiB", perIdle)
		}
		// Buffers come back on next use.
		s := spokes[0]
		hub.tun.(*memtun.Device).Inject(udpPacket(addrA, s.addr, 3, 100))
		next(t, s.tun, time.Minute)
		s.tun.(*memtun.Device).Inject(udpPacket(s.addr, addrA, 4, 100))
		next(t, hub.tun, time.Minute)
	})
}

func unlink(t testing.TB, a, b *node) {
	t.Helper()
	if err := a.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: b.key.PublicKey(), Remove: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: a.key.PublicKey(), Remove: true}}}); err != nil {
		t.Fatal(err)
	}
}

// warmPools allocates every batch of d's pools.
func warmPools(d *Device) {
	var held []*batch
	for _, p := range []*batchPool{d.pools.Load().full, d.pools.Load().small} {
		for b := p.tryGet(); b != nil; b = p.tryGet() {
			held = append(held, b)
		}
	}
	for _, b := range held {
		b.release()
	}
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestIdleMarkWaitsForTheCountToStandStill(t *testing.T) {
	t0 := time.Unix(1000, 0)
	after := 10 * time.Second
	var m idleMark
	steps := []struct {
		at     time.Duration
		pushes uint64
		idle   bool
		again  time.Duration // from t0; ignored when idle
	}{
		{0, 5, false, 10 * time.Second},                // first look: start counting
		{4 * time.Second, 5, false, 10 * time.Second},  // still, but not for long enough
		{9 * time.Second, 6, false, 19 * time.Second},  // moved: start over
		{19 * time.Second, 6, true, 0},                 // still for 10 s
		{20 * time.Second, 6, true, 0},                 // and stays idle
		{21 * time.Second, 7, false, 31 * time.Second}, // traffic again
	}
	for i, s := range steps {
		idle, again := m.observe(s.pushes, t0.Add(s.at), after)
		if idle != s.idle || (!idle && !again.Equal(t0.Add(s.again))) {
			t.Fatalf("step %d: idle %v, again %v; want %v, %v", i, idle, again.Sub(t0), s.idle, s.again)
		}
	}
}

func TestSequencerShrinksOnlyWhenEmpty(t *testing.T) {
	s := newSequencer(4)
	stop := make(chan struct{})
	if _, held := s.usage(); held {
		t.Fatal("a new sequencer holds a ring")
	}
	s.reserve(stop)
	if s.shrink(nil) {
		t.Fatal("shrank with a slot reserved")
	}
	b := &batch{}
	s.push(b)
	if s.shrink(nil) {
		t.Fatal("shrank with a batch queued")
	}
	var flushed int
	s.complete(b, func(bs []*batch) { flushed += len(bs) })
	freed := false
	if !s.shrink(func() { freed = true }) || !freed {
		t.Fatal("did not shrink when empty")
	}
	if pushes, held := s.usage(); held || pushes != 1 || s.ready != nil {
		t.Fatalf("after shrink: pushes %d, held %v, ready %v", pushes, held, s.ready != nil)
	}
	// Used again, it allocates again.
	s.reserve(stop)
	b2 := &batch{}
	s.push(b2)
	s.complete(b2, func(bs []*batch) { flushed += len(bs) })
	if flushed != 2 {
		t.Fatalf("flushed %d batches, want 2", flushed)
	}
	s.flushMu.Lock()
	if s.shrink(nil) {
		t.Fatal("shrink waited for or ignored a flush in progress")
	}
	s.flushMu.Unlock()
}
