package conntest

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
)

func testOpenPortZero(t *testing.T, a, _ conn.Bind) {
	fns, port, err := a.Open(0)
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	if port == 0 {
		t.Fatal("Open(0) returned port 0, want the port it picked")
	}
	if len(fns) == 0 {
		t.Fatal("Open returned no receive functions")
	}
	if a.BatchSize() < 1 {
		t.Fatalf("BatchSize() = %d", a.BatchSize())
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testOpenTwice(t *testing.T, a, b conn.Bind) {
	pa := open(t, a)
	if _, _, err := a.Open(0); !errors.Is(err, conn.ErrBindOpen) {
		t.Fatalf("second Open: err %v, want ErrBindOpen", err)
	}
	// The failed Open must leave the first one working.
	pb := open(t, b)
	want := [][]byte{[]byte("still open")}
	send(t, b, want, conn.Endpoint{Dst: pa.v4()})
	checkSame(t, pa.expect(1), want, pb.v4())
}

func testCloseTwice(t *testing.T, a, b conn.Bind) {
	if err := b.Close(); err != nil {
		t.Fatalf("Close of a never opened bind: %v", err)
	}
	if _, _, err := a.Open(0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := a.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
}

func testReopen(t *testing.T, a, b conn.Bind) {
	if _, _, err := a.Open(0); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	pa, pb := open(t, a), open(t, b)
	want := payloads([]int{100, 100})
	send(t, a, want, conn.Endpoint{Dst: pb.v4()})
	checkSame(t, pb.expect(2), want, pa.v4())
}

func testPortInUse(t *testing.T, a, b conn.Bind) {
	pa := open(t, a)
	if _, _, err := b.Open(pa.port); err == nil {
		t.Fatalf("Open(%d) on a port in use succeeded", pa.port)
	}
	if _, _, err := b.Open(0); err != nil {
		t.Fatalf("Open(0) after a failed Open: %v", err)
	}
}

func testFixedPort(t *testing.T, a, b conn.Bind) {
	_, port, err := a.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, got, err := b.Open(port)
	if err != nil {
		// Something else may grab a just-freed port; that is not the
		// bind's fault.
		t.Skipf("reopening freed port %d: %v", port, err)
	}
	if got != port {
		t.Fatalf("Open(%d) returned port %d", port, got)
	}
}

func testRoundTrip(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	want := [][]byte{[]byte("hello, wireguard")}
	send(t, a, want, conn.Endpoint{Dst: pb.v4()})
	got := pb.expect(1)
	checkSame(t, got, want, pa.v4())
	ep := got[0].ep
	if ep.Dst.Addr().BitLen() != 32 {
		t.Fatalf("IPv4 peer endpoint %v is not a 4-byte address", ep.Dst)
	}
	if ep.Src.IsValid() && ep.Src != pb.v4().Addr() {
		t.Fatalf("sticky source %v, want %v (the address the peer wrote to)", ep.Src, pb.v4().Addr())
	}
	// Replying to the received endpoint, sticky source and all, arrives.
	reply := [][]byte{[]byte("hello back")}
	send(t, b, reply, ep)
	checkSame(t, pa.expect(1), reply, pb.v4())
	// An IPv4-mapped IPv6 destination is an IPv4 peer.
	mapped := netip.AddrPortFrom(netip.AddrFrom16(pb.v4().Addr().As16()), pb.port)
	send(t, a, want, conn.Endpoint{Dst: mapped})
	checkSame(t, pb.expect(1), want, pa.v4())
}

func testBatch(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	n := a.BatchSize()
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 1420
	}
	sizes[n-1] = 700
	want := payloads(sizes)
	send(t, a, want, conn.Endpoint{Dst: pb.v4()})
	checkSame(t, pb.expect(n), want, pa.v4())
}

func testMixedSizes(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	var sizes []int
	add := func(n, size int) {
		for range n {
			sizes = append(sizes, size)
		}
	}
	add(3, 1420)
	add(1, 100)  // a shorter tail ends a run
	add(1, 0)    // zero-length in the middle of a batch
	add(2, 1)    // tiny
	add(2, 1500) // larger than the run before it
	add(70, 64)  // more than one GSO message can carry
	add(50, 1400)
	add(1, 1401) // longer than the run: cannot join it
	add(1, 2000)
	add(5, 37)
	want := payloads(sizes)
	send(t, a, want, conn.Endpoint{Dst: pb.v4()})
	checkSame(t, pb.expect(len(want)), want, pa.v4())
}

func testZeroLength(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	for _, empty := range [][][]byte{nil, {}} {
		if err := a.Send(empty, conn.Endpoint{Dst: pb.v4()}); err != nil {
			t.Fatalf("Send of no datagrams: %v", err)
		}
	}
	send(t, a, [][]byte{{}}, conn.Endpoint{Dst: pb.v4()})
	got := pb.expect(1)
	if len(got[0].data) != 0 || got[0].ep.Dst != pa.v4() {
		t.Fatalf("got %d bytes from %v, want an empty datagram from %v", len(got[0].data), got[0].ep.Dst, pa.v4())
	}
}

func testLargerThanBatch(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	sizes := make([]int, 3*a.BatchSize()+5)
	for i := range sizes {
		sizes[i] = 200
	}
	want := payloads(sizes)
	send(t, a, want, conn.Endpoint{Dst: pb.v4()})
	checkSame(t, pb.expect(len(want)), want, pa.v4())
}

func testOversize(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	// Separate sends: a datagram too large for the receive buffer is
	// dropped, not truncated, and the next one still arrives.
	send(t, a, [][]byte{payload(1, rxBufSize+1000)}, conn.Endpoint{Dst: pb.v4()})
	// Alone in its read, it makes the receive function return ErrOversize
	// rather than wait on with buffers too small.
	for deadline := time.Now().Add(5 * time.Second); pb.oversize.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the receive function never returned ErrOversize for a read of only an oversize datagram")
		}
		time.Sleep(time.Millisecond)
	}
	want := [][]byte{payload(2, 10)}
	send(t, a, want, conn.Endpoint{Dst: pb.v4()})
	checkSame(t, pb.expect(1), want, pa.v4())
	if sb, ok := b.(conn.StatsBind); ok {
		if s := sb.Stats(); s.RxOversize == 0 {
			t.Fatalf("Stats().RxOversize = 0 after dropping an oversize datagram: %+v", s)
		}
	}
}

// ipv6Loopback reports whether this host can use ::1.
func ipv6Loopback() bool {
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func skipUnlessIPv6(t *testing.T, peers ...*peer) {
	t.Helper()
	for _, p := range peers {
		if p.fns < 2 {
			t.Skip("bind opened a single socket; no IPv6 receive function")
		}
	}
	if !ipv6Loopback() {
		t.Skip("no IPv6 loopback on this host")
	}
}

func testIPv6(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	skipUnlessIPv6(t, pa, pb)
	sizes := make([]int, a.BatchSize())
	for i := range sizes {
		sizes[i] = 1280
	}
	want := payloads(sizes)
	send(t, a, want, conn.Endpoint{Dst: pb.v6()})
	got := pb.expect(len(want))
	checkSame(t, got, want, pa.v6())
	if src := got[0].ep.Src; src.IsValid() && src != netip.IPv6Loopback() {
		t.Fatalf("sticky source %v, want ::1", src)
	}
	reply := [][]byte{[]byte("v6 reply")}
	send(t, b, reply, got[0].ep)
	checkSame(t, pa.expect(1), reply, pb.v6())
}

// testFamilySwitch replies to one peer alternately over IPv4 and IPv6, and
// once with a source of the wrong family, which must be ignored rather
// than reused.
func testFamilySwitch(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	skipUnlessIPv6(t, pa, pb)
	send(t, a, [][]byte{[]byte("via v4")}, conn.Endpoint{Dst: pb.v4()})
	ep4 := pb.expect(1)[0].ep
	send(t, a, [][]byte{[]byte("via v6")}, conn.Endpoint{Dst: pb.v6()})
	ep6 := pb.expect(1)[0].ep
	for i := range 6 {
		ep, from := ep4, pb.v4()
		if i%2 == 1 {
			ep, from = ep6, pb.v6()
		}
		want := payloads([]int{300, 300, 300})
		send(t, b, want, ep)
		checkSame(t, pa.expect(3), want, from)
	}
	mixed := conn.Endpoint{Dst: ep4.Dst, Src: netip.IPv6Loopback()}
	want := [][]byte{[]byte("v4 with a v6 source")}
	send(t, b, want, mixed)
	checkSame(t, pa.expect(1), want, pb.v4())
}

func testCloseUnblocksReceive(t *testing.T, _, b conn.Bind) {
	fns, _, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		go func() {
			bufs, sizes, eps := [][]byte{make([]byte, rxBufSize)}, []int{0}, []conn.Endpoint{{}}
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil || n == 0 {
					errs <- err
					return
				}
			}
		}()
	}
	// Give the receivers a moment to block; if they have not yet, they
	// must still see the close on their first call.
	time.Sleep(20 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(patience)
	for range fns {
		select {
		case err := <-errs:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("receive after Close returned %v, want an error wrapping net.ErrClosed", err)
			}
		case <-timeout:
			t.Fatal("Close did not unblock a receive function")
		}
	}
	// And a call after Close fails at once the same way.
	if _, err := fns[0]([][]byte{make([]byte, 10)}, []int{0}, []conn.Endpoint{{}}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("receive on a closed bind: %v", err)
	}
}

func testSendAfterClose(t *testing.T, a, b conn.Bind) {
	pb := open(t, b)
	if _, _, err := a.Open(0); err != nil {
		t.Fatal(err)
	}
	a.Close()
	err := a.Send([][]byte{[]byte("x")}, conn.Endpoint{Dst: pb.v4()})
	if !errors.Is(err, conn.ErrBindClosed) {
		t.Fatalf("Send after Close: %v, want ErrBindClosed", err)
	}
}

func testBadEndpoint(t *testing.T, a, _ conn.Bind) {
	open(t, a)
	for _, ep := range []conn.Endpoint{
		{},
		{Dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)},
	} {
		if err := a.Send([][]byte{[]byte("x")}, ep); err == nil {
			t.Errorf("Send to %v succeeded, want an error", ep.Dst)
		}
	}
}

func testConcurrentSend(t *testing.T, a, b conn.Bind) {
	pa, pb := open(t, a), open(t, b)
	const senders, rounds, per = 4, 16, 32
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				bufs := make([][]byte, per)
				for i := range bufs {
					bufs[i] = payload(uint32(s<<24|r*per+i), 200)
				}
				if err := a.Send(bufs, conn.Endpoint{Dst: pb.v4()}); err != nil {
					t.Errorf("sender %d: %v", s, err)
					return
				}
			}
		}()
	}
	got := pb.expect(senders * rounds * per)
	wg.Wait()
	next := make([]uint32, senders)
	for i, d := range got {
		if len(d.data) != 200 || d.ep.Dst != pa.v4() {
			t.Fatalf("datagram %d: %d bytes from %v", i, len(d.data), d.ep.Dst)
		}
		idx := uint32(d.data[0])<<24 | uint32(d.data[1])<<16 | uint32(d.data[2])<<8 | uint32(d.data[3])
		s, seq := idx>>24, idx&0xffffff
		if s >= senders || seq != next[s] || string(d.data) != string(payload(idx, 200)) {
			t.Fatalf("datagram %d: sender %d seq %d, want seq %d, intact", i, s, seq, next[s])
		}
		next[s]++
	}
}
