package device

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/tun/memtun"
)

// exchange sends one packet each way and checks both arrive.
func exchange(t *testing.T, a, b *node, seq uint32) {
	t.Helper()
	for _, dir := range [...]struct{ from, to *node }{{a, b}, {b, a}} {
		pkt := udpPacket(dir.from.addr, dir.to.addr, seq, 200)
		if err := dir.from.tun.(*memtun.Device).Inject(pkt); err != nil {
			t.Fatal(err)
		}
		if got := next(t, dir.to.tun, 10*time.Second); string(got) != string(pkt) {
			t.Fatalf("packet %d from %v changed in transit", seq, dir.from.addr)
		}
	}
}

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

// TestConnectedSocketsFallback: with an in-memory bind, which has no
// connected sockets, or a Linux bind with them turned off, nothing is
// tracked and traffic flows over the shared socket as before.
func TestConnectedSocketsFallback(t *testing.T) {
	t.Run("membind", func(t *testing.T) {
		a, b := memPair(t, membind.NetOptions{})
		for i := range 5 {
			exchange(t, a, b, uint32(i))
		}
		wantOpen := func(n *node) {
			if open, eps := n.dev.socks.count(); open != 0 || eps != 0 {
				t.Fatalf("%v: %d sockets for %d endpoints on an in-memory bind", n.addr, open, eps)
			}
		}
		wantOpen(a)
		wantOpen(b)
	})
	t.Run("off", func(t *testing.T) {
		a, b := linuxPair(t, conn.Options{MaxConnected: -1})
		for i := range 5 {
			exchange(t, a, b, uint32(i))
		}
		wantSockets(t, a, 0, 1)
		wantSockets(t, b, 0, 1)
		if s := bindStats(t, a); s.ConnOpened != 0 {
			t.Fatalf("a: connected sockets opened while off: %+v", s)
		}
	})
}
