package device

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/membind"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
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
	leakcheck.Check(t)
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
// one, and what each socket costs (heap and goroutine stacks, measured
// against the same peers with connected sockets off) stays small: no
// socket has a goroutine of its own (about 6 KiB each when they did).
// Removing the peers closes every socket and ends every reader.
func TestConnectedSocketCapAndCost(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a thousand sockets")
	}
	leakcheck.Check(t)
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
	if perSocket > 4<<10 {
		t.Fatalf("a connected socket costs %.1f KiB, want under 4 KiB", perSocket/1024)
	}
	if err := n.dev.Apply(&Config{ReplacePeers: true}); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, n, 0, 0)
}

// TestConnectedSocketsShareOneReader: 500 peers with endpoints get 500
// connected sockets and not one goroutine more than none (the bind's one
// reader serves them all); the traffic of a peer among them flows; a
// listen-port change reconnects them all with the goroutines as they
// were, and removing the peers closes them (leakcheck then finds every
// goroutine of the device gone after Close).
func TestConnectedSocketsShareOneReader(t *testing.T) {
	a, b := linuxPair(t, conn.Options{})
	exchange(t, a, b, 1)
	wantSockets(t, a, 1, 1)
	before := runtime.NumGoroutine()
	const peers = 500
	lo := netip.MustParseAddr("127.0.0.1")
	cfg := &Config{}
	for i := range peers {
		key, _ := noise.GeneratePrivateKey(rand.Reader)
		ep := netip.AddrPortFrom(lo, uint16(20000+i))
		cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: key.PublicKey(), Endpoint: &ep})
	}
	if err := a.dev.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, a, 1+peers, 1+peers)
	if g := runtime.NumGoroutine(); g > before+2 {
		t.Fatalf("%d goroutines with %d more connected sockets, %d before", g, peers, before)
	}
	exchange(t, a, b, 2)

	newPort := uint16(0)
	if err := a.dev.Apply(&Config{ListenPort: &newPort}); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, a, 1+peers, 1+peers)
	exchange(t, a, b, 3)
	if g := runtime.NumGoroutine(); g > before+2 {
		t.Fatalf("%d goroutines after a rebind with %d connected sockets, %d before", g, 1+peers, before)
	}
	for i := range cfg.Peers {
		cfg.Peers[i] = PeerConfig{PublicKey: cfg.Peers[i].PublicKey, Remove: true}
	}
	if err := a.dev.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	wantSockets(t, a, 1, 1)
	exchange(t, a, b, 4)
}

// TestConnectedReceiveBuffersFollowMTURaise is
// TestReceiveBuffersFollowMTURaise over connected sockets: their reader
// returns conn.ErrOversize for a datagram its batch is too small for, the
// device looks at the MTU and comes back with larger buffers, and the
// datagram kept for it gets through.
func TestConnectedReceiveBuffersFollowMTURaise(t *testing.T) {
	a, b := linuxPair(t, conn.Options{})
	buffersFollowMTURaise(t, a, b)
	wantSockets(t, a, 1, 1)
	wantSockets(t, b, 1, 1)
	if s := bindStats(t, b); s.ConnFallbacks != 0 {
		t.Fatalf("b: %d sends fell back to the shared socket", s.ConnFallbacks)
	}
}

// heapAndStacks is live heap plus goroutine stacks after a GC.
func heapAndStacks() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// TestConnectedSocketDatagramsAreAuthenticated: datagrams that arrive on
// a's connected socket for b, but were not sent by b (a socket of the same
// user can share the port with SO_REUSEPORT and write from b's address),
// are checked like any other: garbage, an unknown receiver index and a
// forged ciphertext under b's real index are dropped and counted, a's
// endpoint for b stays, and the tunnel keeps working.
func TestConnectedSocketDatagramsAreAuthenticated(t *testing.T) {
	a, b := linuxPair(t, conn.Options{})
	exchange(t, a, b, 1)
	wantSockets(t, a, 1, 1)
	bAddr := netip.AddrPortFrom(b.ep.Addr(), b.dev.Status().ListenPort)
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", bAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()

	pa := a.dev.peers[b.key.PublicKey()]
	pa.mu.Lock()
	idx := pa.kps.Current.LocalIndex
	pa.mu.Unlock()
	forged := make([]byte, noise.TransportOverhead+64)
	binary.LittleEndian.PutUint32(forged, uint32(noise.TypeTransport))
	binary.LittleEndian.PutUint32(forged[4:], idx)
	rand.Read(forged[16:])
	unknown := append([]byte{}, forged...)
	binary.LittleEndian.PutUint32(unknown[4:], idx+1)
	garbage := make([]byte, 37)
	rand.Read(garbage)
	garbage[0] = 9 // no such message type
	before := map[counterID]uint64{}
	ids := []counterID{cRxGarbage, cRxUnknownIndex, cRxDecryptFailed}
	for _, id := range ids {
		before[id] = a.dev.ctr[id].Load()
	}
	aAddr := &net.UDPAddr{IP: a.ep.Addr().AsSlice(), Port: int(a.dev.Status().ListenPort)}
	for _, d := range [][]byte{garbage, unknown, forged} {
		if _, err := pc.WriteTo(d, aAddr); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, id := range ids {
		for a.dev.ctr[id].Load() == before[id] {
			if time.Now().After(deadline) {
				t.Fatalf("%s not counted", counterNames[id])
			}
			time.Sleep(time.Millisecond)
		}
	}
	pc.Close()
	if ep, _ := pa.endpoint(); ep.Dst != bAddr {
		t.Fatalf("a's endpoint for b moved to %v", ep.Dst)
	}
	exchange(t, a, b, 2)
}

// TestOnTrafficFromEveryReader: the TUN reader and both kinds of UDP
// reader (the shared socket's, and the connected sockets' that carry a
// configured peer's traffic) report the reads that return packets, which
// is what wakes the daemon's parked GOMAXPROCS controller. Each of the 20
// exchanges has each node read once from its TUN and once from a socket.
func TestOnTrafficFromEveryReader(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	linux := func(o conn.Options) func(netip.Addr) conn.Bind {
		return func(netip.Addr) conn.Bind { return conn.NewLinux(o) }
	}
	mem := membind.NewNetwork(membind.NetOptions{})
	for _, tc := range []struct {
		name         string
		bind         func(netip.Addr) conn.Bind
		hostA, hostB netip.Addr
	}{
		{"connected sockets", linux(conn.Options{}), lo, lo},
		{"shared socket", linux(conn.Options{MaxConnected: -1}), lo, lo},
		{"in-memory bind", func(h netip.Addr) conn.Bind { return mem.NewBind(h) },
			netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			var ca, cb atomic.Int64
			a := newNode(t, memtun.New("a", 1420, 4096), tc.bind(tc.hostA), addrA, tc.hostA, Options{OnTraffic: func() { ca.Add(1) }})
			b := newNode(t, memtun.New("b", 1420, 4096), tc.bind(tc.hostB), addrB, tc.hostB, Options{OnTraffic: func() { cb.Add(1) }})
			link(t, a, b)
			exchange(t, a, b, 0) // the handshake
			a0, b0 := ca.Load(), cb.Load()
			const n = 20
			for i := range n {
				exchange(t, a, b, uint32(1+i))
			}
			if da, db := ca.Load()-a0, cb.Load()-b0; da < 2*n || db < 2*n {
				t.Fatalf("OnTraffic called %d and %d times for %d exchanges, want at least %d each", da, db, n, 2*n)
			}
		})
	}
}
