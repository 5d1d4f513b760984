package exit

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/tun"
	"github.com/fips-go/fips-go/tun/netstack"
)

var peerBAddr = netip.MustParseAddr("10.0.0.3")

// silentTCP is a listener on 127.0.0.1 that answers no SYN: its accept
// queue (backlog 0) is full once one connection waits in it, and Linux
// drops SYNs to a full queue.
func silentTCP(t *testing.T) netip.AddrPort {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := syscall.Getsockname(fd)
	ap := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue.
	c, err := net.DialTimeout("tcp", ap.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ap
}

// twoPeers wires two client stacks, peers "a" (clientAddr) and "b"
// (peerBAddr), to one exit stack: packets from the exit go to the stack
// that owns their destination.
func twoPeers(t *testing.T, edit func(*Options)) (a, b *netstack.Net, e *Exit) {
	t.Helper()
	newNet := func(addr netip.Addr) *netstack.Net {
		n, err := netstack.New(netstack.Options{Addresses: []netip.Addr{addr}, Promiscuous: true})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b, x := newNet(clientAddr), newNet(peerBAddr), newNet(exitAddr)
	var wmu sync.Mutex
	toExit := func(from *netstack.Net) {
		mtu, _ := from.MTU()
		buf := [][]byte{make([]byte, tun.Headroom+mtu)}
		sizes := []int{0}
		for {
			if _, err := from.Read(buf, sizes, tun.Headroom); err != nil {
				return
			}
			wmu.Lock()
			_, err := x.Write([][]byte{buf[0][:tun.Headroom+sizes[0]]}, tun.Headroom)
			wmu.Unlock()
			if err != nil {
				return
			}
		}
	}
	fromExit := func() {
		mtu, _ := x.MTU()
		buf := [][]byte{make([]byte, tun.Headroom+mtu)}
		sizes := []int{0}
		for {
			if _, err := x.Read(buf, sizes, tun.Headroom); err != nil {
				return
			}
			pkt := buf[0][tun.Headroom : tun.Headroom+sizes[0]]
			to := a
			if len(pkt) >= 20 && pkt[0]>>4 == 4 && netip.AddrFrom4([4]byte(pkt[16:20])) == peerBAddr {
				to = b
			}
			if _, err := to.Write([][]byte{buf[0][:tun.Headroom+sizes[0]]}, tun.Headroom); err != nil {
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { toExit(a) })
	wg.Go(func() { toExit(b) })
	wg.Go(fromExit)
	o := Options{
		Policy: NewPolicy(PolicyOptions{Allow: pfx("127.0.0.1/32"), Tunnel: []netip.Addr{exitAddr}}),
		Tunnel: []netip.Addr{exitAddr},
		PeerOf: func(s netip.Addr) (string, bool) {
			switch s {
			case clientAddr:
				return "a", true
			case peerBAddr:
				return "b", true
			}
			return "", false
		},
	}
	if edit != nil {
		edit(&o)
	}
	e, err := Start(x, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		a.Close()
		b.Close()
		x.Close()
		wg.Wait()
	})
	return a, b, e
}

// TestExitSYNFloodOnePeer: peer a sends 300 SYNs toward a host that
// never answers; peer b's connect to a live server still succeeds, well
// before a's connects give up.
func TestExitSYNFloodOnePeer(t *testing.T) {
	silent := silentTCP(t)
	echo := listenTCP(t, func(c net.Conn) { c.Write([]byte("hi")) })
	a, b, e := twoPeers(t, func(o *Options) { o.ConnectTimeout = time.Minute })
	floodCtx, stopFlood := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	for range 300 {
		flood.Go(func() {
			if c, err := a.DialTCPAddrPort(floodCtx, silent); err == nil {
				c.Close()
			}
		})
	}
	defer func() { stopFlood(); flood.Wait() }()
	// Let a's SYNs reach the exit first: its share full, and past it
	// dropped (under the race detector the 300 dials take a while).
	for i := 0; (counter(e, "exit_tcp_handshakes_pending") < 32 || e.Refused(ReasonPeerPending) == 0) && i < 20000; i++ {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := b.DialTCPAddrPort(ctx, echo)
	if err != nil {
		t.Fatalf("peer b's connect during peer a's flood: %v", err)
	}
	c.Close()
	if n := e.Refused(ReasonPeerPending); n == 0 {
		t.Error("no SYN of peer a's flood was dropped as peer_pending_cap")
	}
	// The gauge counts every peer's: peer b's own SYN may hold its slot
	// a moment after b's dial returned.
	if n := counter(e, "exit_tcp_handshakes_pending"); n > DefaultMaxPendingPerPeer+1 {
		t.Errorf("%d SYNs pending, more than one peer's share %d and b's one", n, DefaultMaxPendingPerPeer)
	}
}
