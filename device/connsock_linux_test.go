package device

import (
	"crypto/rand"
	"net/netip"
	"runtime"
	"testing"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun/memtun"
)

func bindStats(t *testing.T, n *node) conn.Stats {
	t.Helper()
	return n.bind.(conn.StatsBind).Stats()
}

// wantSockets checks the device's connected sockets: open of them carry
// traffic, for endpoints endpoints, and the bind agrees.
func wantSockets(t *testing.T, n *node, open, endpoints int) {
	t.Helper()
	gotOpen, gotEps := n.dev.socks.count()
	if gotOpen != open || gotEps != endpoints {
		t.Fatalf("%v: %d connected sockets for %d endpoints, want %d for %d", n.addr, gotOpen, gotEps, open, endpoints)
	}
	if s := bindStats(t, n); s.ConnOpened-s.ConnClosed != uint64(open) {
		t.Fatalf("%v: bind has %d connected sockets open, want %d (%+v)", n.addr, s.ConnOpened-s.ConnClosed, open, s)
	}
}

func linuxPair(t *testing.T, o conn.Options) (a, b *node) {
	t.Helper()
	checkGoroutines(t)
	lo := netip.MustParseAddr("127.0.0.1")
	a = newNode(t, memtun.New("a", 1420, 4096), conn.NewLinux(o), addrA, lo, Options{})
	b = newNode(t, memtun.New("b", 1420, 4096), conn.NewLinux(o), addrB, lo, Options{})
	link(t, a, b)
	return a, b
}

// TestConnectedSocketsCarryPeerTraffic: a configured endpoint gets a
// connected socket at once, a learned one after the handshake, and the
// traffic, which the kernel now queues on those sockets, flows both ways.
// Roaming (a new source port after a's port change) moves b's socket to
// the new address; a's port change reconnects a's socket on the new port;
// removing the peer closes it; closing the device stops every reader.
func TestConnectedSocketsCarryPeerTraffic(t *testing.T) {
	a, b := linuxPair(t, conn.Options{})
	wantSockets(t, a, 1, 1)
	wantSockets(t, b, 0, 0)
	exchange(t, a, b, 1)
	wantSockets(t, b, 1, 1)
	for i := range 20 {
		exchange(t, a, b, uint32(2+i))
	}
	if s := bindStats(t, a); s.ConnFallbacks != 0 {
		t.Fatalf("a: %d sends fell back to the shared socket", s.ConnFallbacks)
	}

	newPort := uint16(0)
	if err := a.dev.Apply(&Config{ListenPort: &newPort}); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, a, 1, 1)
	exchange(t, a, b, 100)
	aNow := netip.AddrPortFrom(a.ep.Addr(), a.dev.Status().ListenPort)
	b.dev.socks.mu.Lock()
	_, moved := b.dev.socks.m[aNow]
	b.dev.socks.mu.Unlock()
	if !moved {
		t.Fatalf("b's connected socket did not follow a to %v", aNow)
	}
	wantSockets(t, b, 1, 1)
	exchange(t, a, b, 101)

	if err := b.dev.Apply(&Config{Peers: []PeerConfig{{PublicKey: a.key.PublicKey(), Remove: true}}}); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, b, 0, 0)
}

// TestConnectedSocketsOff: a Linux bind with connected sockets turned off
// tracks the endpoints but opens nothing, and traffic flows as before.
func TestConnectedSocketsOff(t *testing.T) {
	a, b := linuxPair(t, conn.Options{MaxConnected: -1})
	for i := range 5 {
		exchange(t, a, b, uint32(i))
	}
	wantSockets(t, a, 0, 1)
	wantSockets(t, b, 0, 1)
	if s := bindStats(t, a); s.ConnOpened != 0 {
		t.Fatalf("a: connected sockets opened while off: %+v", s)
	}
}

// TestConnectedSocketCapAndCost configures more peers with endpoints than
// the cap allows: the first 1,024 get a socket, the rest use the shared
// one, and what each socket costs (heap and reader stack, measured
// against the same peers with connected sockets off) stays small.
// Removing the peers closes every socket and ends every reader.
func TestConnectedSocketCapAndCost(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a thousand sockets")
	}
	checkGoroutines(t)
	const peers = 1100
	cost := func(o conn.Options) (perPeer float64, n *node) {
		lo := netip.MustParseAddr("127.0.0.1")
		n = newNode(t, memtun.New("c", 1420, 16), conn.NewLinux(o), addrA, lo, Options{})
		cfg := &Config{}
		for i := range peers {
			key, _ := noise.GeneratePrivateKey(rand.Reader)
			ep := netip.AddrPortFrom(lo, uint16(20000+i))
			cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: key.PublicKey(), Endpoint: &ep})
		}
		before := heapAndStacks()
		if err := n.dev.Apply(cfg); err != nil {
			t.Fatal(err)
		}
		return float64(heapAndStacks()-before) / peers, n
	}
	off, _ := cost(conn.Options{MaxConnected: -1})
	on, n := cost(conn.Options{})
	wantSockets(t, n, 1024, peers)
	perSocket := (on - off) * peers / 1024
	t.Logf("per peer: %.0f B without connected sockets, %.0f B with; per connected socket %.1f KiB", off, on, perSocket/1024)
	if perSocket > 16<<10 {
		t.Fatalf("a connected socket costs %.1f KiB, want under 16 KiB", perSocket/1024)
	}
	if err := n.dev.Apply(&Config{ReplacePeers: true}); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, n, 0, 0)
}

// heapAndStacks is live heap plus goroutine stacks after a GC.
func heapAndStacks() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}
