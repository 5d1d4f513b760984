package conn

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fips-go/fips-go/internal/hist"
)

var lo4b = netip.MustParseAddr("127.0.0.2")

// peerSock is a plain UDP socket standing in for a remote peer.
func peerSock(t *testing.T) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// connect opens a connected socket, closed at cleanup.
func connect(t *testing.T, e *end, ep Endpoint) PeerConn {
	t.Helper()
	pc, err := e.b.Connect(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// connFn is the bind's one reader of its connected sockets.
func (e *end) connFn(t testing.TB) ReceiveFunc {
	t.Helper()
	fns := e.b.ConnectedReceiveFuncs()
	if len(fns) != 1 {
		t.Fatalf("%d connected-socket readers, want 1", len(fns))
	}
	return fns[0]
}

// recvConn reads exactly n datagrams from e's connected sockets.
func recvConn(t *testing.T, e *end, n int, bufs [][]byte) ([][]byte, []Endpoint) {
	t.Helper()
	return recvN(t, e, e.connFn(t), n, bufs)
}

func sendAll(t *testing.T, c *net.UDPConn, to netip.AddrPort, dgrams [][]byte) {
	t.Helper()
	for _, d := range dgrams {
		if _, err := c.WriteToUDPAddrPort(d, to); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConnectedSocketTakesThePeersTraffic: datagrams from the connected
// endpoint to the connected socket's address land on it and not on the
// shared socket; another source's datagrams still reach the shared one;
// Send to the endpoint leaves through the connected socket (its bound
// source, 127.0.0.2, where the shared socket would use 127.0.0.1).
func TestConnectedSocketTakesThePeersTraffic(t *testing.T) {
	us := openEnd(t, Options{})
	a, aAddr := peerSock(t)
	b, _ := peerSock(t)
	pc := connect(t, us, Endpoint{Dst: aAddr, Src: lo4b})
	if got := pc.Endpoint(); got.Dst != aAddr || got.Src != lo4b {
		t.Fatalf("Endpoint() = %+v", got)
	}
	if s := us.b.Stats(); s.ConnOpened-s.ConnClosed != 1 {
		t.Fatalf("stats %+v, want 1 open", s)
	}
	want := burst(20, 300)
	sendAll(t, a, us.at(lo4b), want)
	marker := []byte("from b")
	sendAll(t, b, us.at(lo4b), [][]byte{marker})

	bufs, _, _ := rxBufs(8, 1500)
	got, eps := recvConn(t, us, 20, bufs)
	checkBurst(t, got, eps, want, aAddr, lo4b)

	// The shared socket's first datagram is b's: none of a's went there.
	gotB, _ := recvN(t, us, us.fns[0], 1, bufs[:1])
	if !bytes.Equal(gotB[0], marker) {
		t.Fatalf("shared socket got %q first, want b's marker", gotB[0])
	}

	reply := burst(3, 100)
	if err := us.b.Send(reply, Endpoint{Dst: aAddr}); err != nil {
		t.Fatal(err)
	}
	for i := range reply {
		buf := make([]byte, 200)
		a.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := a.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from != us.at(lo4b) || !bytes.Equal(buf[:n], reply[i]) {
			t.Fatalf("reply %d from %v, want from the connected socket %v", i, from, us.at(lo4b))
		}
	}
	if s := us.b.Stats(); s.ConnFallbacks != 0 {
		t.Fatalf("ConnFallbacks = %d", s.ConnFallbacks)
	}
}

// TestConnectedSocketFallbacks: the cap, a second socket for one endpoint,
// connected sockets turned off, and after Close of the connected socket
// traffic in both directions is back on the shared socket.
func TestConnectedSocketFallbacks(t *testing.T) {
	off := openEnd(t, Options{MaxConnected: -1})
	_, aAddr := peerSock(t)
	if _, err := off.b.Connect(Endpoint{Dst: aAddr}); !errors.Is(err, ErrConnectOff) {
		t.Fatalf("Connect with MaxConnected -1: %v, want ErrConnectOff", err)
	}

	us := openEnd(t, Options{MaxConnected: 1})
	a, aAddr := peerSock(t)
	_, bAddr := peerSock(t)
	pc := connect(t, us, Endpoint{Dst: aAddr, Src: lo4b})
	if _, err := us.b.Connect(Endpoint{Dst: aAddr}); !errors.Is(err, ErrConnected) {
		t.Fatalf("second Connect for one endpoint: %v, want ErrConnected", err)
	}
	if _, err := us.b.Connect(Endpoint{Dst: bAddr}); !errors.Is(err, ErrConnectLimit) {
		t.Fatalf("Connect past the cap: %v, want ErrConnectLimit", err)
	}
	if _, err := us.b.Connect(Endpoint{Dst: netip.AddrPortFrom(lo4, 0)}); err == nil {
		t.Fatal("Connect to port 0 succeeded")
	}
	if s := us.b.Stats(); s.ConnFailures != 2 || s.ConnOpened-s.ConnClosed != 1 {
		t.Fatalf("stats %+v, want 2 failures, 1 open", s)
	}

	// A send whose sticky source is not the connected socket's goes out
	// on the shared socket (source 127.0.0.1).
	checkFrom := func(ep Endpoint, want netip.AddrPort) {
		t.Helper()
		if err := us.b.Send([][]byte{[]byte("x")}, ep); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 10)
		a.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, from, err := a.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from != want {
			t.Fatalf("send with %+v left from %v, want %v", ep, from, want)
		}
	}
	checkFrom(Endpoint{Dst: aAddr, Src: lo4}, us.at(lo4))
	checkFrom(Endpoint{Dst: aAddr}, us.at(lo4b))

	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if cs := pc.(*connSocket); !cs.gone || us.b.state.Load().connected.reader.slots[cs.slot] != nil {
		t.Fatal("a closed socket is still registered with the reader")
	}
	checkFrom(Endpoint{Dst: aAddr}, us.at(lo4))
	sendAll(t, a, us.at(lo4b), [][]byte{[]byte("back on shared")})
	bufs, _, _ := rxBufs(1, 100)
	got, eps := recvN(t, us, us.fns[0], 1, bufs)
	if string(got[0]) != "back on shared" || eps[0].Dst != aAddr || eps[0].Src != lo4b {
		t.Fatalf("shared socket got %q from %+v", got[0], eps[0])
	}
	if s := us.b.Stats(); s.ConnOpened-s.ConnClosed != 0 {
		t.Fatalf("stats %+v, want none open after Close", s)
	}
	// The slot is free again.
	connect(t, us, Endpoint{Dst: bAddr})
}

// TestConnectedSocketOffloads: a GSO burst from another bind arrives on
// the connected socket as one coalesced read split into its datagrams, and
// a burst sent on the connected socket goes out as one UDP_SEGMENT message.
func TestConnectedSocketOffloads(t *testing.T) {
	peer, us := openEnd(t, Options{}), openEnd(t, Options{})
	if !peer.sock(false).gso.Load() || !us.sock(false).gro {
		t.Skip("kernel without UDP_SEGMENT/UDP_GRO")
	}
	pc := connect(t, us, Endpoint{Dst: peer.at(lo4), Src: lo4b})
	cs := pc.(*connSocket)
	if !cs.sock.gro || !cs.sock.gso.Load() || !cs.sock.pktinfo {
		t.Fatalf("connected socket without offloads: gro %v gso %v pktinfo %v", cs.sock.gro, cs.sock.gso.Load(), cs.sock.pktinfo)
	}
	want := burst(40, 1000)
	if err := peer.b.Send(want, Endpoint{Dst: us.at(lo4b)}); err != nil {
		t.Fatal(err)
	}
	bufs, _, _ := rxBufs(16, 1500) // fewer than sent: leftovers across calls
	got, eps := recvConn(t, us, 40, bufs)
	checkBurst(t, got, eps, want, peer.at(lo4), lo4b)
	if s := us.b.Stats(); s.RxMessages != 1 || s.RxPackets != 40 {
		t.Fatalf("receiver stats %+v, want 40 packets in 1 message", s)
	}
	if s := hist.Snapshot(us.b.Stats().RxSojourn); s.Total() != 40 {
		t.Fatalf("no receive timestamps on the connected socket: %+v", s)
	}

	if err := pc.Send(want); err != nil {
		t.Fatal(err)
	}
	if s := us.b.Stats(); s.TxMessages != 1 || s.TxPackets != 40 {
		t.Fatalf("sender stats %+v, want 40 packets in 1 message", s)
	}
	got, eps = recvN(t, peer, peer.fns[0], 40, bufs)
	checkBurst(t, got, eps, want, us.at(lo4b), lo4)
}

// TestConnectedSocketsCloseWithTheBind: Close and reopen (another port)
// close every connected socket, and Connect works on the new port.
func TestConnectedSocketsCloseWithTheBind(t *testing.T) {
	us := openEnd(t, Options{})
	a, aAddr := peerSock(t)
	pc, err := us.b.Connect(Endpoint{Dst: aAddr})
	if err != nil {
		t.Fatal(err)
	}
	fn := us.connFn(t)
	waitErr := make(chan error, 1)
	go func() {
		bufs, sizes, eps := rxBufs(4, 100)
		_, err := fn(bufs, sizes, eps)
		waitErr <- err
	}()
	if err := us.b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the connected sockets' reader after the bind closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connected sockets' reader still blocked after the bind closed")
	}
	bufs, sizes, eps := rxBufs(4, 100)
	if _, err := fn(bufs, sizes, eps); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("reading a closed bind's connected sockets: %v", err)
	}
	if fns := us.b.ConnectedReceiveFuncs(); fns != nil {
		t.Fatalf("a closed bind has %d connected-socket readers", len(fns))
	}
	if _, err := us.b.Connect(Endpoint{Dst: aAddr}); !errors.Is(err, ErrBindClosed) {
		t.Fatalf("Connect on a closed bind: %v", err)
	}
	if s := us.b.Stats(); s.ConnOpened-s.ConnClosed != 0 {
		t.Fatalf("stats %+v, want none open after Close", s)
	}
	pc.Close() // already closed: no effect, no error

	fns, port, err := us.b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	us.fns, us.port = fns, port
	pc2 := connect(t, us, Endpoint{Dst: aAddr})
	if pc2.Endpoint().Src != lo4 {
		t.Fatalf("wildcard connected socket bound to %v, want the route's choice 127.0.0.1", pc2.Endpoint().Src)
	}
	sendAll(t, a, us.at(lo4), [][]byte{[]byte("new port")})
	got, _ := recvConn(t, us, 1, bufs)
	if string(got[0]) != "new port" {
		t.Fatalf("got %q", got[0])
	}
}

// TestConnectedSocketICMPError: a connected socket whose peer's port is
// closed gets ECONNREFUSED from the kernel in place of a datagram; the
// reader of all connected sockets takes it as that socket's (reading it
// clears it) and returns no error, and the other sockets' datagrams
// still arrive.
func TestConnectedSocketICMPError(t *testing.T) {
	us := openEnd(t, Options{})
	a, aAddr := peerSock(t)
	gone, goneAddr := peerSock(t)
	gone.Close()
	pcGone := connect(t, us, Endpoint{Dst: goneAddr})
	connect(t, us, Endpoint{Dst: aAddr})
	if err := pcGone.Send([][]byte{[]byte("to nobody")}); err != nil {
		t.Fatal(err)
	}
	fn := us.connFn(t)
	bufs, sizes, eps := rxBufs(4, 100)
	done := make(chan struct{})
	var n int
	var err error
	go func() { n, err = fn(bufs, sizes, eps); close(done) }()
	// The reader is woken by the error, reads it and waits again.
	sendAll(t, a, us.at(lo4), [][]byte{[]byte("still here")})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		us.b.Close()
		<-done
		t.Fatal("no datagram from the healthy socket")
	}
	if err != nil || n != 1 || string(bufs[0][:sizes[0]]) != "still here" || eps[0].Dst != aAddr {
		t.Fatalf("read %d (%q from %v), %v; want the healthy socket's datagram", n, bufs[0][:sizes[0]], eps[0].Dst, err)
	}
	var soErr int
	sockoptControl(pcGone.(*connSocket).sock.conn, func(fd int) (e error) {
		soErr, e = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		return e
	})
	if soErr != 0 {
		t.Fatalf("the ICMP error (%v) was left on the socket, unread", unix.Errno(soErr))
	}
	sendAll(t, a, us.at(lo4), [][]byte{[]byte("and again")})
	if got, _ := recvConn(t, us, 1, bufs); string(got[0]) != "and again" {
		t.Fatalf("got %q", got[0])
	}
}

func TestConnectedSocketMark(t *testing.T) {
	b := NewLinux(Options{})
	openMarked(t, b)
	defer b.Close()
	a, aAddr := peerSock(t)
	pc, err := b.Connect(Endpoint{Dst: aAddr})
	if err != nil {
		t.Fatal(err)
	}
	mark := func() int {
		var m int
		sockoptControl(pc.(*connSocket).sock.conn, func(fd int) (err error) {
			m, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK)
			return err
		})
		return m
	}
	if m := mark(); m != 0x51820 {
		t.Fatalf("connected socket mark %#x, want the bind's", m)
	}
	if err := b.SetMark(7); err != nil {
		t.Fatal(err)
	}
	if m := mark(); m != 7 {
		t.Fatalf("SetMark left the connected socket at %#x", m)
	}
	// Connected again for the new mark's route: still to the same peer,
	// from the same address.
	if err := pc.Send([][]byte{[]byte("after")}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := a.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "after" || from.Addr() != pc.Endpoint().Src {
		t.Fatalf("after SetMark: %q from %v (%v)", buf[:n], from, err)
	}
}

// TestWildcardConnectedSocketTakesOnlyItsPeer: a connected socket bound to
// the wildcard address joins the shared socket's SO_REUSEPORT group; the
// kernel must still never hash another source's datagram to it.
func TestWildcardConnectedSocketTakesOnlyItsPeer(t *testing.T) {
	us := openEnd(t, Options{})
	a, aAddr := peerSock(t)
	connect(t, us, Endpoint{Dst: aAddr})
	const others = 32
	for i := range others {
		c, _ := peerSock(t) // a new source port each: a new hash
		sendAll(t, c, us.at(lo4), [][]byte{{byte(i)}})
	}
	sendAll(t, a, us.at(lo4), [][]byte{[]byte("from a")})
	bufs, _, _ := rxBufs(others, 100)
	got, eps := recvN(t, us, us.fns[0], others, bufs)
	for i := range got {
		if eps[i].Dst == aAddr || len(got[i]) != 1 {
			t.Fatalf("shared socket datagram %d: %q from %v", i, got[i], eps[i].Dst)
		}
	}
	got, _ = recvConn(t, us, 1, bufs)
	if string(got[0]) != "from a" {
		t.Fatalf("connected socket got %q, want a's datagram only", got[0])
	}
}

// in6Ifreq is struct in6_ifreq for SIOCSIFADDR/SIOCDIFADDR on IPv6.
type in6Ifreq struct {
	addr      [16]byte
	prefixlen uint32
	ifindex   int32
}

// loAddr6 adds (add) or deletes an IPv6 /128 on lo, from the calling
// thread's namespace.
func loAddr6(a netip.Addr, add bool) error {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return err
	}
	req := in6Ifreq{addr: a.As16(), prefixlen: 128, ifindex: int32(lo.Index)}
	op := uintptr(unix.SIOCDIFADDR)
	if add {
		op = unix.SIOCSIFADDR
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), op, uintptr(unsafe.Pointer(&req))); e != 0 {
		return fmt.Errorf("ioctl %#x %v: %w", op, a, e)
	}
	return nil
}

// TestConnectedSocketLosesItsAddress: an IPv6 connected socket whose local
// address is deleted would go on sending from it (IPv6 does not revalidate
// a connected socket's source); the send must notice, fall back to the
// shared socket, which picks a live source, and stop using the stale one.
func TestConnectedSocketLosesItsAddress(t *testing.T) {
	inNetns(t, 65536, func() error {
		mine, peerAddr := netip.MustParseAddr("fd00::a"), netip.MustParseAddr("fd00::b")
		for _, a := range []netip.Addr{mine, peerAddr} {
			if err := loAddr6(a, true); err != nil {
				return err
			}
		}
		// A new address is tentative until the kernel's address work has
		// run (even on lo, which skips duplicate detection): retry.
		var peer *net.UDPConn
		var err error
		for try := 0; try < 200; try++ {
			if peer, err = net.ListenUDP("udp6", &net.UDPAddr{IP: peerAddr.AsSlice()}); !errors.Is(err, unix.EADDRNOTAVAIL) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		defer peer.Close()
		peerAP := peer.LocalAddr().(*net.UDPAddr).AddrPort()
		b := NewLinux(Options{})
		_, port, err := b.Open(0)
		if err != nil {
			return err
		}
		defer b.Close()
		if _, err := b.Connect(Endpoint{Dst: peerAP, Src: mine}); err != nil {
			return err
		}
		from := func() (netip.AddrPort, error) {
			if err := b.Send([][]byte{[]byte("x")}, Endpoint{Dst: peerAP}); err != nil {
				return netip.AddrPort{}, err
			}
			buf := make([]byte, 10)
			peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, ap, err := peer.ReadFromUDPAddrPort(buf)
			return ap, err
		}
		if ap, err := from(); err != nil || ap != netip.AddrPortFrom(mine, port) {
			return fmt.Errorf("before: from %v (%v), want the connected socket's %v", ap, err, mine)
		}
		if err := loAddr6(mine, false); err != nil {
			return err
		}
		for i := range 2 {
			ap, err := from()
			if err != nil || ap.Addr() == mine || ap.Port() != port {
				return fmt.Errorf("send %d after the address went: from %v (%v)", i, ap, err)
			}
		}
		if s := b.Stats(); s.ConnFallbacks != 1 || s.SendErrors != 0 {
			return fmt.Errorf("stats %+v: want 1 fallback, then the stale socket skipped", s)
		}
		return nil
	})
}
