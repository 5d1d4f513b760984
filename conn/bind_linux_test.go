package conn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fips-go/fips-go/internal/hist"
)

var (
	lo4 = netip.MustParseAddr("127.0.0.1")
	lo6 = netip.IPv6Loopback()
)

// end is a bind opened for a test, closed at cleanup.
type end struct {
	b    *LinuxBind
	fns  []ReceiveFunc
	port uint16
}

func openEnd(t testing.TB, o Options) *end {
	t.Helper()
	b := NewLinux(o)
	fns, port, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &end{b: b, fns: fns, port: port}
}

func (e *end) at(a netip.Addr) netip.AddrPort { return netip.AddrPortFrom(a, e.port) }

func (e *end) sock(v6 bool) *udpSocket {
	st := e.b.state.Load()
	if v6 {
		return st.v6
	}
	return st.v4
}

// rxBufs makes n receive buffers of size bytes.
func rxBufs(n, size int) ([][]byte, []int, []Endpoint) {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs, make([]int, n), make([]Endpoint, n)
}

// recvN reads exactly n datagrams from fn in this goroutine, len(bufs) at
// most per call. A hang guard closes the bind rather than hang the test.
func recvN(t testing.TB, e *end, fn ReceiveFunc, n int, bufs [][]byte) ([][]byte, []Endpoint) {
	t.Helper()
	guard := time.AfterFunc(10*time.Second, func() { e.b.Close() })
	defer guard.Stop()
	sizes, eps := make([]int, len(bufs)), make([]Endpoint, len(bufs))
	var data [][]byte
	var from []Endpoint
	for len(data) < n {
		got, err := fn(bufs[:min(len(bufs), n-len(data))], sizes, eps)
		if errors.Is(err, ErrOversize) {
			continue // the caller may come back with the same buffers
		}
		if err != nil {
			t.Fatalf("after %d of %d datagrams: %v", len(data), n, err)
		}
		for i := range got {
			data = append(data, append([]byte{}, bufs[i][:sizes[i]]...))
			from = append(from, eps[i])
		}
	}
	return data, from
}

// burst is n datagrams of size bytes, each distinct.
func burst(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte(i)}, size)
		if size >= 4 {
			binary.BigEndian.PutUint32(out[i], uint32(i))
		}
	}
	return out
}

func checkBurst(t *testing.T, got [][]byte, eps []Endpoint, want [][]byte, from netip.AddrPort, src netip.Addr) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d datagrams, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("datagram %d: %d bytes %x…, want %d bytes %x…", i, len(got[i]), got[i][:min(8, len(got[i]))], len(want[i]), want[i][:min(8, len(want[i]))])
		}
		if eps[i].Dst != from || eps[i].Src != src {
			t.Fatalf("datagram %d: endpoint %+v, want from %v to %v", i, eps[i], from, src)
		}
	}
}

func TestGROCoalescesOnLoopback(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{})
	if !a.sock(false).gso.Load() || !b.sock(false).gro {
		t.Skip("kernel without UDP_SEGMENT/UDP_GRO")
	}
	want := burst(128, 1000)
	if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
		t.Fatal(err)
	}
	// 128 x 1000 bytes plan as two messages of 64 segments.
	if s := a.b.Stats(); s.TxMessages != 2 || s.TxPackets != 128 {
		t.Fatalf("sender stats %+v, want 2 messages for 128 packets", s)
	}
	bufs, _, _ := rxBufs(128, 1500)
	got, eps := recvN(t, b, b.fns[0], 128, bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for i, ep := range eps {
		if ep.SrcIfIndex != int32(lo.Index) {
			t.Fatalf("datagram %d arrived on interface %d, want lo (%d)", i, ep.SrcIfIndex, lo.Index)
		}
	}
	if s := b.b.Stats(); s.RxMessages >= s.RxPackets || s.RxPackets != 128 {
		t.Fatalf("receiver stats %+v: GRO did not coalesce", s)
	}
}

// TestGROLeftoversAcrossCalls reads a coalesced burst a few datagrams per
// call: the rest must wait in order for the next calls, and no call may
// start a new read while datagrams are left.
func TestGROLeftoversAcrossCalls(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{})
	want := burst(100, 700)
	want = append(want, burst(3, 50)...) // a run with a short tail too
	if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
		t.Fatal(err)
	}
	bufs, _, _ := rxBufs(5, 1500)
	got, eps := recvN(t, b, b.fns[0], len(want), bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
}

func TestDisableGRO(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{DisableGRO: true})
	if b.sock(false).gro {
		t.Fatal("DisableGRO left UDP_GRO on")
	}
	want := burst(128, 1200)
	if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
		t.Fatal(err)
	}
	bufs, _, _ := rxBufs(128, 1500)
	got, eps := recvN(t, b, b.fns[0], 128, bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
	if s := b.b.Stats(); s.RxMessages != s.RxPackets {
		t.Fatalf("without GRO every message is one datagram: %+v", s)
	}
}

func TestDisableGSO(t *testing.T) {
	a, b := openEnd(t, Options{DisableGSO: true}), openEnd(t, Options{})
	if a.sock(false).gso.Load() {
		t.Fatal("DisableGSO left UDP_SEGMENT on")
	}
	want := burst(128, 1200)
	if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
		t.Fatal(err)
	}
	if s := a.b.Stats(); s.TxMessages != 128 || s.TxPackets != 128 {
		t.Fatalf("without GSO every datagram is a message: %+v", s)
	}
	bufs, _, _ := rxBufs(128, 1500)
	got, eps := recvN(t, b, b.fns[0], 128, bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
}

// TestGSOFallback makes the kernel refuse UDP_SEGMENT for real: with
// SO_NO_CHECK set, a segmented send fails with EINVAL. The burst must
// still arrive, GSO must be off for that socket only, and it is counted.
func TestGSOFallback(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{})
	s4 := a.sock(false)
	if !s4.gso.Load() {
		t.Skip("kernel without UDP_SEGMENT")
	}
	if err := sockoptControl(s4.conn, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
	}); err != nil {
		t.Skipf("SO_NO_CHECK: %v", err)
	}
	want := burst(40, 1000)
	if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
		t.Fatal(err)
	}
	bufs, _, _ := rxBufs(64, 1500)
	got, eps := recvN(t, b, b.fns[0], len(want), bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
	s := a.b.Stats()
	if s.GSOFallbacks != 1 || s.TxMessages != 40 || s.SendErrors != 0 {
		t.Fatalf("stats %+v: want one fallback and 40 single sends", s)
	}
	if s4.gso.Load() {
		t.Fatal("GSO still on after the kernel refused it")
	}
	if v6 := a.sock(true); v6 != nil && !v6.gso.Load() {
		t.Fatal("fallback on the IPv4 socket turned GSO off for IPv6 too")
	}
	// Later sends go straight out without GSO, with no more fallbacks.
	if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
		t.Fatal(err)
	}
	got, eps = recvN(t, b, b.fns[0], len(want), bufs)
	checkBurst(t, got, eps, want, a.at(lo4), lo4)
	if s := a.b.Stats(); s.GSOFallbacks != 1 || s.TxMessages != 80 {
		t.Fatalf("stats %+v after a second send", s)
	}
}

// TestStickySource: the address a peer wrote to is reported per datagram
// and replies leave from it.
func TestStickySource(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{})
	other := netip.MustParseAddr("127.0.0.3") // all of 127/8 is local
	want := burst(20, 900)
	if err := b.b.Send(want, Endpoint{Dst: a.at(other)}); err != nil {
		t.Fatal(err)
	}
	bufs, _, _ := rxBufs(64, 1500)
	_, eps := recvN(t, a, a.fns[0], len(want), bufs)
	for i, ep := range eps {
		if ep.Src != other || ep.SrcIfIndex == 0 {
			t.Fatalf("datagram %d: endpoint %+v, want Src %v on an interface", i, ep, other)
		}
	}
	if err := a.b.Send(want, eps[0]); err != nil {
		t.Fatal(err)
	}
	got, back := recvN(t, b, b.fns[0], len(want), bufs)
	checkBurst(t, got, back, want, a.at(other), lo4)

	// An explicit source that is local is used as is.
	if err := a.b.Send(want[:1], Endpoint{Dst: b.at(lo4), Src: netip.MustParseAddr("127.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	_, back = recvN(t, b, b.fns[0], 1, bufs)
	if back[0].Dst != a.at(netip.MustParseAddr("127.0.0.2")) {
		t.Fatalf("reply from %v, want 127.0.0.2", back[0].Dst)
	}
	if s := a.b.Stats(); s.StickyFallback != 0 {
		t.Fatalf("unexpected sticky fallback: %+v", s)
	}
}

// TestStickyFallback sends from a source the host does not have (as after
// the address was removed): the kernel rejects it, the bind retries with
// its own choice, counts it, and GSO stays on.
func TestStickyFallback(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{})
	bufs, _, _ := rxBufs(64, 1500)
	cases := []struct {
		gone, lo netip.Addr
		v6       bool
	}{
		{netip.MustParseAddr("192.0.2.1"), lo4, false}, // documentation range, never local here
		{netip.MustParseAddr("2001:db8::1"), lo6, true},
	}
	for i, tc := range cases {
		fn := b.fns[0]
		if tc.v6 {
			if len(b.fns) < 2 {
				t.Skip("no IPv6")
			}
			fn = b.fns[1]
		}
		gsoBefore := a.sock(tc.v6).gso.Load()
		want := burst(10, 1000)
		if err := a.b.Send(want, Endpoint{Dst: b.at(tc.lo), Src: tc.gone}); err != nil {
			t.Fatalf("send from vanished %v: %v", tc.gone, err)
		}
		got, eps := recvN(t, b, fn, len(want), bufs)
		checkBurst(t, got, eps, want, a.at(tc.lo), tc.lo)
		s := a.b.Stats()
		if s.StickyFallback != uint64(i+1) || s.GSOFallbacks != 0 || s.SendErrors != 0 {
			t.Fatalf("%v: stats %+v", tc.gone, s)
		}
		if a.sock(tc.v6).gso.Load() != gsoBefore {
			t.Fatal("a sticky fallback turned GSO off")
		}
	}
}

// TestSendEachStickyFallback: SendEach (cookie replies) retries a
// datagram whose sticky source the host no longer has without it, as
// Send does, instead of counting it lost; the others in the batch go as
// they are.
func TestSendEachStickyFallback(t *testing.T) {
	a, b := openEnd(t, Options{}), openEnd(t, Options{})
	bufs, _, _ := rxBufs(64, 1500)
	want := burst(3, 100)
	gone := netip.MustParseAddr("192.0.2.1") // documentation range, never local here
	eps := []Endpoint{{Dst: b.at(lo4)}, {Dst: b.at(lo4), Src: gone}, {Dst: b.at(lo4)}}
	n, err := a.b.SendEach(want, eps)
	if err != nil || n != len(want) {
		t.Fatalf("SendEach: %d sent, %v", n, err)
	}
	got, back := recvN(t, b, b.fns[0], len(want), bufs)
	checkBurst(t, got, back, want, a.at(lo4), lo4)
	if s := a.b.Stats(); s.StickyFallback != 1 || s.SendErrors != 0 {
		t.Fatalf("stats %+v, want one sticky fallback and no send error", s)
	}
}

func TestPortsAndSocketOptions(t *testing.T) {
	e := openEnd(t, Options{})
	if len(e.fns) != 2 {
		t.Skip("no IPv6 socket")
	}
	for _, v6 := range []bool{false, true} {
		s := e.sock(v6)
		if p := localPort(s.conn); p != e.port {
			t.Fatalf("v6=%v socket on port %d, bind says %d", v6, p, e.port)
		}
		if !s.pktinfo {
			t.Fatalf("v6=%v: no PKTINFO", v6)
		}
		var rcv int
		sockoptControl(s.conn, func(fd int) (err error) {
			rcv, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
			return err
		})
		if os.Geteuid() == 0 && rcv < defaultSocketBuffer {
			t.Fatalf("v6=%v: SO_RCVBUF %d < %d as root", v6, rcv, defaultSocketBuffer)
		}
	}
}

func TestSetMark(t *testing.T) {
	b := NewLinux(Options{})
	if err := b.SetMark(0); err != nil {
		t.Fatalf("SetMark(0) on a closed bind: %v", err)
	}
	openMarked(t, b)
	defer b.Close()
	mark := func() []int {
		var out []int
		for _, s := range []*udpSocket{b.state.Load().v4, b.state.Load().v6} {
			if s == nil {
				continue
			}
			var m int
			sockoptControl(s.conn, func(fd int) (err error) {
				m, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK)
				return err
			})
			out = append(out, m)
		}
		return out
	}
	for _, m := range mark() {
		if m != 0x51820 {
			t.Fatalf("mark set before Open not applied: %#x", m)
		}
	}
	if err := b.SetMark(7); err != nil {
		t.Fatal(err)
	}
	for _, m := range mark() {
		if m != 7 {
			t.Fatalf("SetMark on an open bind: %#x", m)
		}
	}
}

func TestSendNoSuchFamily(t *testing.T) {
	e := openEnd(t, Options{})
	st := e.b.state.Load()
	v6 := st.v6
	st.v6 = nil // as on a host without IPv6
	defer func() { st.v6 = v6 }()
	err := e.b.Send([][]byte{{1}}, Endpoint{Dst: netip.MustParseAddrPort("[::1]:9")})
	if err == nil {
		t.Fatal("send to IPv6 without an IPv6 socket succeeded")
	}
}

// TestFixedPortTakenOnIPv6: an explicit port must be free in both
// families; the bind does not quietly fall back to IPv4 only.
func TestFixedPortTakenOnIPv6(t *testing.T) {
	c6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified})
	if err != nil {
		t.Skipf("no IPv6: %v", err)
	}
	defer c6.Close()
	port := localPort(c6)
	b := NewLinux(Options{})
	_, _, err = b.Open(port)
	if err == nil {
		b.Close()
		t.Fatalf("Open(%d) succeeded with the IPv6 port taken", port)
	}
	if !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("Open(%d): %v, want EADDRINUSE", port, err)
	}
	// The IPv4 socket opened first must have been closed again.
	c4, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
	if err != nil {
		t.Fatalf("IPv4 port %d still held after the failed Open: %v", port, err)
	}
	c4.Close()
}

// Every datagram received is timed in the socket's sojourn histogram, with
// and without GRO.
func TestRxSojournCounted(t *testing.T) {
	for _, gro := range []bool{true, false} {
		a, b := openEnd(t, Options{}), openEnd(t, Options{DisableGRO: !gro})
		want := burst(64, 1000)
		if err := a.b.Send(want, Endpoint{Dst: b.at(lo4)}); err != nil {
			t.Fatal(err)
		}
		bufs, _, _ := rxBufs(64, 1500)
		recvN(t, b, b.fns[0], len(want), bufs)
		s := hist.Snapshot(b.b.Stats().RxSojourn)
		if got := s.Total(); got != uint64(len(want)) {
			t.Fatalf("gro %v: %d datagrams timed, want %d", gro, got, len(want))
		}
	}
}

// TestGROBuffersWaitForTheFirstDatagram: a shared socket's receiver holds
// no 64 KiB GRO buffers until a datagram arrives, so the socket of an
// address family nobody uses costs nothing.
func TestGROBuffersWaitForTheFirstDatagram(t *testing.T) {
	b := NewLinux(Options{})
	if _, _, err := b.Open(0); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := b.state.Load()
	if st.v4 == nil || !st.v4.gro {
		t.Skip("no IPv4 socket with UDP_GRO here")
	}
	r := newReceiver(st.v4, b.opts, &b.stats)
	if r.gro != nil {
		t.Fatal("GRO buffers allocated before any read")
	}
	got := make(chan error, 1)
	go func() {
		bufs, sizes, eps := [][]byte{make([]byte, 2000)}, []int{0}, []Endpoint{{}}
		_, err := r.receive(bufs, sizes, eps)
		got <- err
	}()
	ep := Endpoint{Dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), st.port)}
	if err := b.Send([][]byte{[]byte("hello")}, ep); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if len(r.gro) != b.opts.groBuffers {
		t.Fatalf("%d GRO buffers after the first read, want %d", len(r.gro), b.opts.groBuffers)
	}
}

// A receiver whose socket closes before its first datagram (the bind
// closing, or a rebind replacing the socket) returns the closed error
// without allocating the GRO buffers it never got to use.
func TestGROBuffersNotAllocatedForAClosedSocket(t *testing.T) {
	b := NewLinux(Options{})
	if _, _, err := b.Open(0); err != nil {
		t.Fatal(err)
	}
	st := b.state.Load()
	if st.v4 == nil || !st.v4.gro {
		b.Close()
		t.Skip("no IPv4 socket with UDP_GRO here")
	}
	r := newReceiver(st.v4, b.opts, &b.stats)
	got := make(chan error, 1)
	go func() {
		bufs, sizes, eps := [][]byte{make([]byte, 2000)}, []int{0}, []Endpoint{{}}
		_, err := r.receive(bufs, sizes, eps)
		got <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it wait; closing first is fine too
	b.Close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("receive on a closed socket: %v, want net.ErrClosed", err)
	}
	if r.gro != nil {
		t.Fatalf("%d GRO buffers allocated for a socket that closed", len(r.gro))
	}
}

// openMarked sets fwmark 0x51820 on b and opens it, skipping the test where
// setting a mark is not permitted.
func openMarked(t *testing.T, b *LinuxBind) {
	t.Helper()
	if err := b.SetMark(0x51820); err != nil {
		t.Fatal(err)
	}
	_, _, err := b.Open(0)
	if errors.Is(err, unix.EPERM) {
		t.Skip("SO_MARK needs CAP_NET_ADMIN")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// SendEach delivers each datagram to its own endpoint, across address
// families and more datagrams than one sendmmsg holds, with its sticky
// source, and counts an invalid endpoint without losing the others.
func TestSendEachToManyEndpoints(t *testing.T) {
	s := openEnd(t, Options{batchSize: 8})
	r := []*end{openEnd(t, Options{}), openEnd(t, Options{}), openEnd(t, Options{})}
	want := burst(30, 64)
	var eps []Endpoint
	var bufs [][]byte
	perDst := map[int][][]byte{}
	for i, d := range want {
		k := i % len(r)
		ep := Endpoint{Dst: r[k].at(lo4)}
		if k == 2 {
			ep = Endpoint{Dst: r[k].at(lo6)}
		}
		if k == 1 {
			ep.Src = netip.MustParseAddr("127.0.0.2")
		}
		eps = append(eps, ep)
		bufs = append(bufs, d)
		perDst[k] = append(perDst[k], d)
	}
	bufs = append(bufs, want[0])
	eps = append(eps, Endpoint{}) // invalid: counted, the rest still sent
	before := s.b.Stats()
	if sent, err := s.b.SendEach(bufs, eps); err == nil || sent != len(want) {
		t.Fatalf("SendEach with one invalid endpoint: %d sent, error %v; want %d and an error", sent, err, len(want))
	}
	rb, _, _ := rxBufs(64, 1500)
	for k, e := range r {
		fn, src, from := e.fns[0], lo4, s.at(lo4)
		if k == 1 {
			from = s.at(netip.MustParseAddr("127.0.0.2"))
		}
		if k == 2 {
			fn, src, from = e.fns[1], lo6, s.at(lo6)
		}
		got, gotEps := recvN(t, e, fn, len(perDst[k]), rb)
		checkBurst(t, got, gotEps, perDst[k], from, src)
	}
	after := s.b.Stats()
	if d := after.SendErrors - before.SendErrors; d != 1 {
		t.Fatalf("sendErrors grew by %d, want 1 (the invalid endpoint)", d)
	}
	if d := after.TxMessages - before.TxMessages; d != uint64(len(want)) {
		t.Fatalf("txMessages grew by %d, want %d", d, len(want))
	}
}

// A datagram the kernel refuses in the middle of a SendEach (here: one
// over the largest UDP payload, EMSGSIZE) costs only itself: the ones
// after it in the same sendmmsg still go out, and it is counted once.
func TestSendEachSkipsARefusedDatagram(t *testing.T) {
	s, r := openEnd(t, Options{}), openEnd(t, Options{})
	want := burst(10, 64)
	want[3] = make([]byte, 66000) // IPv4 UDP carries at most 65,507
	eps := make([]Endpoint, len(want))
	for i := range eps {
		eps[i] = Endpoint{Dst: r.at(lo4)}
	}
	before := s.b.Stats()
	sent, err := s.b.SendEach(want, eps)
	if err == nil || sent != len(want)-1 {
		t.Fatalf("SendEach with one refused datagram: %d sent, error %v; want %d and an error", sent, err, len(want)-1)
	}
	rest := append(append([][]byte{}, want[:3]...), want[4:]...)
	bufs, _, _ := rxBufs(64, 1500)
	got, gotEps := recvN(t, r, r.fns[0], len(rest), bufs)
	checkBurst(t, got, gotEps, rest, s.at(lo4), lo4)
	if d := s.b.Stats().SendErrors - before.SendErrors; d != 1 {
		t.Fatalf("sendErrors grew by %d, want 1", d)
	}
}
