package netstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
	"github.com/fips-go/fips-go/tun"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// verifier returns a pump check that fails the test on any packet that is
// larger than mtu or has a bad header or checksum, and counts packets.
func verifier(t testing.TB, mtu int, count *atomic.Int64) func([]byte) bool {
	return func(p []byte) bool {
		count.Add(1)
		if len(p) > mtu {
			t.Errorf("packet of %d bytes exceeds MTU %d", len(p), mtu)
		}
		if err := packet.Verify(p); err != nil {
			t.Errorf("invalid packet from the stack: %v", err)
		}
		return true
	}
}

// transfer sends size pseudo-random bytes from a client on `from` to a
// server on `to` and checks they arrive intact, by SHA-256.
func transfer(t *testing.T, from, to *Net, server netip.AddrPort, size int) {
	t.Helper()
	l, err := to.ListenTCPAddrPort(server)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		sum [32]byte
		n   int64
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		h := sha256.New()
		n, err := io.Copy(h, c)
		var r result
		copy(r.sum[:], h.Sum(nil))
		r.n, r.err = n, err
		got <- r
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := from.DialTCPAddrPort(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{1})
	h := sha256.New()
	for sent := 0; sent < size; {
		chunk := data[:min(len(data), size-sent)]
		_, _ = rng.Read(chunk)
		h.Write(chunk)
		if _, err := c.Write(chunk); err != nil {
			t.Fatalf("write after %d bytes: %v", sent, err)
		}
		sent += len(chunk)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(2 * time.Minute):
		t.Fatal("receiver did not finish")
	}
	if r.err != nil || r.n != int64(size) {
		t.Fatalf("received %d of %d bytes: %v", r.n, size, r.err)
	}
	if !bytes.Equal(r.sum[:], h.Sum(nil)) {
		t.Fatal("received data differs from sent data")
	}
}

func TestTCPTransfer(t *testing.T) {
	leakcheck.Check(t)
	var packets atomic.Int64
	p := newPair(t, Options{}, verifier(t, DefaultMTU, &packets))
	size := 64 << 20
	if testing.Short() {
		size = 8 << 20
	}
	transfer(t, p.a, p.b, netip.AddrPortFrom(addrB4, 5001), size)
	sa, sb := p.a.Stats(), p.b.Stats()
	t.Logf("A: %+v", sa)
	t.Logf("B: %+v", sb)
	if sa.GSOPackets == 0 || sa.GSOSegments <= sa.GSOPackets {
		t.Errorf("sender did not use GSO: %d super-packets, %d segments", sa.GSOPackets, sa.GSOSegments)
	}
	if sb.TCPSegmentsReceived >= sb.PacketsIn {
		t.Errorf("receiver GRO did not coalesce: %d TCP segments from %d packets", sb.TCPSegmentsReceived, sb.PacketsIn)
	}
	if sa.GSOErrors+sa.Oversize+sb.GSOErrors+sb.Oversize+sa.InvalidIn+sb.InvalidIn != 0 {
		t.Errorf("unexpected drops: A %+v B %+v", sa, sb)
	}
	if sa.QueueHighWater > defaultQueueLen {
		t.Errorf("queue high water %d exceeds the bound", sa.QueueHighWater)
	}
	if packets.Load() == 0 {
		t.Error("verifier saw no packets")
	}
}

func TestTCPTransferIPv6BothWays(t *testing.T) {
	leakcheck.Check(t)
	var packets atomic.Int64
	p := newPair(t, Options{MTU: 1280}, verifier(t, 1280, &packets))
	transfer(t, p.a, p.b, netip.AddrPortFrom(addrB6, 5002), 8<<20)
	transfer(t, p.b, p.a, netip.AddrPortFrom(addrA6, 5003), 8<<20)
	if s := p.b.Stats(); s.GSOSegments == 0 {
		t.Errorf("IPv6 sender did not use GSO: %+v", s)
	}
}

func TestTCPTransferWithoutGSO(t *testing.T) {
	leakcheck.Check(t)
	var packets atomic.Int64
	p := newPair(t, Options{disableGSO: true, congestionControl: "cubic"}, verifier(t, DefaultMTU, &packets))
	transfer(t, p.a, p.b, netip.AddrPortFrom(addrB4, 5004), 4<<20)
	if s := p.a.Stats(); s.GSOPackets != 0 {
		t.Errorf("GSO used although disabled: %+v", s)
	}
}

func TestUDPRoundTrip(t *testing.T) {
	leakcheck.Check(t)
	var packets atomic.Int64
	p := newPair(t, Options{}, verifier(t, DefaultMTU, &packets))
	for _, srv := range []netip.AddrPort{netip.AddrPortFrom(addrB4, 53), netip.AddrPortFrom(addrB6, 53)} {
		t.Run(srv.Addr().String(), func(t *testing.T) {
			pc, err := p.b.ListenUDPAddrPort(srv)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			go func() { // echo server
				buf := make([]byte, 2000)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo(bytes.ToUpper(buf[:n]), from)
				}
			}()
			c, err := p.a.DialContext(context.Background(), "udp", srv.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := bytes.Repeat([]byte("hello "), 200) // 1200 bytes: fits the MTU over IPv6 too
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2000)
			n, err := c.Read(buf)
			if err != nil || !bytes.Equal(buf[:n], bytes.ToUpper(msg)) {
				t.Fatalf("echo: %q, %v", buf[:n], err)
			}
		})
	}
}

// readPacket reads one packet from n (with a bounded wait).
func readPacket(t *testing.T, n *Net) []byte {
	t.Helper()
	type res struct {
		p   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		bufs := [][]byte{make([]byte, tun.Headroom+DefaultMTU)}
		sizes := make([]int, 1)
		k, err := n.Read(bufs, sizes, tun.Headroom)
		if k == 0 && err == nil {
			err = errors.New("read no packet")
		}
		ch <- res{bufs[0][tun.Headroom : tun.Headroom+sizes[0]], err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.p
	case <-time.After(10 * time.Second):
		t.Fatal("no packet within 10s")
	}
	return nil
}

func TestPing(t *testing.T) {
	leakcheck.Check(t)
	n, err := New(Options{Addresses: []netip.Addr{addrA4, addrA6}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, tc := range []struct{ peer, local netip.Addr }{
		{netip.MustParseAddr("10.0.0.9"), addrA4},
		{netip.MustParseAddr("fd00::9"), addrA6},
	} {
		payload := []byte("are you there?")
		req, err := packet.ICMPEcho(tc.peer, tc.local, false, 0x1234, 7, payload)
		if err != nil {
			t.Fatal(err)
		}
		buf := append(make([]byte, tun.Headroom), req...)
		if _, err := n.Write([][]byte{buf}, tun.Headroom); err != nil {
			t.Fatal(err)
		}
		reply := readPacket(t, n)
		if err := packet.Verify(reply); err != nil {
			t.Fatalf("reply: %v", err)
		}
		in, _ := packet.Parse(reply)
		wantType := uint8(0)
		if tc.peer.Is6() {
			wantType = 129
		}
		if in.Src != tc.local || in.Dst != tc.peer || in.ICMPType != wantType || in.EchoID != 0x1234 || in.EchoSeq != 7 || !bytes.Equal(in.Payload, payload) {
			t.Fatalf("reply %+v", in)
		}
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	leakcheck.Check(t)
	n, err := New(Options{Addresses: []netip.Addr{addrA4}})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		bufs := [][]byte{make([]byte, DefaultMTU)}
		_, err := n.Read(bufs, make([]int, 1), 0)
		errc <- err
	}()
	if ev := <-n.Events(); ev != tun.EventUp {
		t.Fatalf("first event %v", ev)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if _, ok := <-n.Events(); ok {
		t.Fatal("Events not closed")
	}
	if _, err := n.Write([][]byte{make([]byte, 40)}, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, err := n.DialTCPAddrPort(context.Background(), netip.AddrPortFrom(addrB4, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Dial after Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestBackpressure stops reading from the sender while its application
// keeps writing: the TCP sender must stall with the queue at its bound
// (not drop), and Close must release everything.
func TestBackpressure(t *testing.T) {
	leakcheck.Check(t)
	const queueLen = 64
	a, err := New(Options{Addresses: []netip.Addr{addrA4}, queueLen: queueLen})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Addresses: []netip.Addr{addrB4}})
	if err != nil {
		t.Fatal(err)
	}
	stopAB := make(chan struct{})
	var pumps sync.WaitGroup
	t.Cleanup(func() { a.Close(); b.Close(); pumps.Wait() })
	pumps.Add(2)
	go func() { defer pumps.Done(); pumpUntil(a, b, stopAB) }()
	go func() { defer pumps.Done(); pump(t, b, a, nil) }()

	l, err := b.ListenTCPAddrPort(netip.AddrPortFrom(addrB4, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var received atomic.Int64
	go func() {
		if c, err := l.Accept(); err == nil {
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				received.Add(int64(n))
				if err != nil {
					return
				}
			}
		}
	}()
	c, err := a.DialTCPAddrPort(context.Background(), netip.AddrPortFrom(addrB4, 80))
	if err != nil {
		t.Fatal(err)
	}
	writerDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				writerDone <- err
				return
			}
		}
	}()
	// Let the congestion window grow past the queue, then stop reading.
	waitFor(t, "16 MiB to arrive", func() bool { return received.Load() > 16<<20 })
	close(stopAB)
	waitFor(t, "a stack sender to wait for queue room", func() bool { return a.Stats().QueueWaits > 0 })
	s := a.Stats()
	// A super-packet costs at most gsoMaxSize/1000 slots (MSS > 1000), so
	// with queueLen above that the queue never exceeds queueLen.
	if bound := max(queueLen, gsoMaxSize/1000+1); s.QueueLen > bound || s.QueueHighWater > bound {
		t.Fatalf("queue exceeded its bound %d: %+v", bound, s)
	}
	if s.QueueDrops != 0 || s.TCPSendErrors != 0 {
		t.Fatalf("TCP segments were dropped instead of waiting: %+v", s)
	}
	a.Close()
	if err := <-writerDone; err == nil {
		t.Fatal("writer finished without error after Close")
	}
}

// pumpUntil moves packets one at a time from one Net to another until stop
// is closed (after at most one more packet) or Read fails.
func pumpUntil(from, to *Net, stop <-chan struct{}) {
	bufs := [][]byte{make([]byte, DefaultMTU)}
	sizes := []int{0}
	for {
		select {
		case <-stop:
			return
		default:
		}
		if _, err := from.Read(bufs, sizes, 0); err != nil {
			return
		}
		_, _ = to.Write([][]byte{bufs[0][:sizes[0]]}, 0)
	}
}

// waitFor polls cond until it holds; it fails the test after 30 seconds.
// It asserts progress, not timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWriteInvalid(t *testing.T) {
	n, err := New(Options{Addresses: []netip.Addr{addrA4}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	good, _ := packet.UDP(netip.AddrPortFrom(addrB4, 1), netip.AddrPortFrom(addrA4, 9), []byte("x"))
	bad := [][]byte{{}, {0x45, 0, 0}, {0x60}, bytes.Repeat([]byte{0x45}, 40), good[:len(good)-1]}
	_, err = n.Write(append(bad, good), 0)
	if !errors.Is(err, ErrInvalidPacket) {
		t.Fatalf("Write of garbage: %v, want ErrInvalidPacket", err)
	}
	if s := n.Stats(); s.InvalidIn != uint64(len(bad)) || s.PacketsIn != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := n.Write([][]byte{good}, -1); err == nil {
		t.Fatal("negative offset accepted")
	}
	// verifyChecksums drops a corrupted packet.
	v, err := New(Options{Addresses: []netip.Addr{addrA4}, verifyChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	if _, err := v.Write([][]byte{corrupt, good}, 0); !errors.Is(err, ErrInvalidPacket) {
		t.Fatalf("corrupt packet with verifyChecksums: %v", err)
	}
}

func TestReadBufferValidation(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Read([][]byte{make([]byte, 100)}, []int{0}, 0); err == nil {
		t.Fatal("buffer smaller than the MTU accepted")
	}
	if _, err := n.Read([][]byte{make([]byte, 2000)}, nil, 0); err == nil {
		t.Fatal("missing sizes accepted")
	}
	if k, err := n.Read(nil, nil, 0); k != 0 || err != nil {
		t.Fatalf("empty Read = %d, %v", k, err)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{MTU: 100},
		{MTU: 1000, Addresses: []netip.Addr{addrA6}},
		{queueLen: -1},
		{tcpSendBuffer: 10},
		{tcpReceiveBufferMax: -5},
		{congestionControl: "bbr"},
		{TCPTimeWait: -time.Second},
		{ACKHold: -time.Millisecond},
		{ACKHold: maxACKHold + 1},
		{TimerSlack: -time.Millisecond},
		{TimerSlack: maxTimerSlack + 1},
		{Addresses: []netip.Addr{{}}},
		{Addresses: []netip.Addr{addrA4, addrA4}},
		{Addresses: []netip.Addr{netip.IPv4Unspecified()}},
	} {
		if n, err := New(o); err == nil {
			n.Close()
			t.Errorf("New(%+v) accepted", o)
		}
	}
	n, err := New(Options{})
	if err != nil {
		t.Fatalf("zero Options: %v", err)
	}
	defer n.Close()
	if mtu, _ := n.MTU(); mtu != DefaultMTU || n.BatchSize() != defaultBatchSize || n.File() != nil {
		t.Fatalf("defaults: MTU %d, BatchSize %d", mtu, n.BatchSize())
	}
	if name, _ := n.Name(); name != DefaultName {
		t.Fatalf("Name = %q", name)
	}
	if n.ack.on() {
		t.Error("ACK thinning on by default")
	}
	if _, ok := n.stack.Clock().(slackClock); ok {
		t.Error("timer slack on by default")
	}
	var tw tcpip.TCPTimeWaitTimeoutOption
	if err := n.stack.TransportProtocolOption(tcp.ProtocolNumber, &tw); err != nil || time.Duration(tw) != DefaultTCPTimeWait {
		t.Fatalf("TIME-WAIT %v (%v), want %v", time.Duration(tw), err, DefaultTCPTimeWait)
	}
}

func TestDialLocalAndErrors(t *testing.T) {
	leakcheck.Check(t)
	n, err := New(Options{Addresses: []netip.Addr{addrA4}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// A connection to the stack's own address stays inside the stack.
	l, err := n.ListenTCPAddrPort(netip.MustParseAddrPort("0.0.0.0:7"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := n.DialContext(context.Background(), "tcp4", "10.0.0.1:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("loop"), 50000)
	go func() { _, _ = c.Write(msg) }()
	got := make([]byte, len(msg))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("local echo: %v", err)
	}
	for _, tc := range [][2]string{
		{"tcp", "example.com:80"},
		{"sctp", "10.0.0.2:1"},
		{"tcp6", "10.0.0.2:1"},
		{"udp4", "[fd00::2]:1"},
		{"tcp", "10.0.0.2"},
		{"tcp", "10.0.0.2:0"},
	} {
		if c, err := n.DialContext(context.Background(), tc[0], tc[1]); err == nil {
			c.Close()
			t.Errorf("DialContext(%q, %q) accepted", tc[0], tc[1])
		}
	}
	if _, err := n.ListenUDPAddrPort(netip.AddrPort{}); err == nil {
		t.Error("ListenUDPAddrPort(zero) accepted")
	}
	if _, err := n.DialUDPAddrPort(netip.MustParseAddrPort("10.0.0.1:5"), netip.MustParseAddrPort("[fd00::2]:5")); err == nil {
		t.Error("mixed-family UDP dial accepted")
	}
}
