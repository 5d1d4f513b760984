package conn_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/internal/streamframe"
)

// The tests here play a hostile or broken peer against a Stream's
// listener, over loopback TCP. The Stream times connections with real
// timers on real sockets (testing/synctest cannot see through a socket),
// so the deadlines under test are short and the waits for them generous.

// frames returns ps framed back to back.
func frames(ps ...[]byte) []byte {
	var b []byte
	for _, p := range ps {
		b, _ = streamframe.Append(b, p)
	}
	return b
}

// rawDial opens a plain TCP connection to addr and waits until the Stream
// holds it, so the caller knows it was accepted.
func rawDial(t *testing.T, srv *conn.Stream, addr netip.AddrPort, want int) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitFor(t, "the stream to hold the connection", func() bool { return srv.OpenConns() >= want })
	return c.(*net.TCPConn)
}

// spokenDial is rawDial for a peer that sends one frame (text) first, as
// any client does before a server sends it anything: an accepted
// connection is framed on once its first bytes say plain or TLS.
func spokenDial(t *testing.T, srv *conn.Stream, addr netip.AddrPort, want int, text string) *net.TCPConn {
	t.Helper()
	c := rawDial(t, srv, addr, want)
	if _, err := c.Write(append([]byte{0, byte(len(text))}, text...)); err != nil {
		t.Fatal(err)
	}
	recvText(t, srv, text)
	return c
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitGone reads c until the Stream closes it: an end of stream, or a
// reset when the Stream closed with bytes of ours still unread.
func waitGone(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection not closed by the stream: %v", err)
	}
}

// closedBy is which counter should account for a closed connection.
type closedBy int

const (
	byBadFrame closedBy = iota
	byTimeout
	byExcess
	byAny // one of the three, whichever the bytes lead to
)

func (w closedBy) count(st conn.StreamStats) uint64 {
	switch w {
	case byBadFrame:
		return st.BadFrames
	case byTimeout:
		return st.UnprovenTimeouts
	case byExcess:
		return st.UnprovenExcess
	}
	return st.BadFrames + st.UnprovenTimeouts + st.UnprovenExcess
}

// Every kind of bad stream is closed by the listener and counted once,
// under the counter that names why; the listener then still serves a
// well-behaved peer.
func TestStreamAbuseBadStreamsClosed(t *testing.T) {
	garbage := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	many := make([][]byte, 161) // one past the default unproven budget
	for i := range many {
		many[i] = []byte{1, 0, 0, 0, byte(i)}
	}
	short := 300 * time.Millisecond
	cases := []struct {
		name      string
		send      []byte
		halfClose bool          // close our write side after send
		trickle   bool          // then keep sending one byte at a time
		prove     time.Duration // the unproven deadline (0: default)
		want      closedBy
	}{
		{name: "zero length first", send: []byte{0, 0}, want: byBadFrame},
		{name: "zero length after a valid frame", send: append(frames([]byte("hello")), 0, 0), want: byBadFrame},
		{name: "ends inside the length", send: []byte{0x01}, halfClose: true, want: byBadFrame},
		{name: "ends inside the datagram", send: []byte{0x00, 0x10, 'a', 'b'}, halfClose: true, want: byBadFrame},
		{name: "nothing at all", prove: short, want: byTimeout},
		{name: "an HTTP request", send: []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), prove: short, want: byTimeout},
		{name: "a TLS ClientHello's start", send: []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}, prove: short, want: byTimeout},
		{name: "random bytes", send: garbage, prove: short, want: byAny},
		// A slowloris: bytes keep coming, a frame never completes. Only
		// the deadline, which activity does not extend, can close it.
		{name: "the longest frame, a byte at a time", send: []byte{0xff, 0xff}, trickle: true, prove: short, want: byTimeout},
		{name: "more frames than an unproven stream may send", send: frames(many...), want: byExcess},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := listenStream(t, conn.TunedStream(conn.StreamTuning{ProveTimeout: tc.prove}))
			c := rawDial(t, srv, addr, 1)
			if len(tc.send) > 0 {
				if _, err := c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			if tc.halfClose {
				c.CloseWrite()
			}
			stop := make(chan struct{})
			if tc.trickle {
				go func() {
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := c.Write([]byte{'x'}); err != nil {
								return
							}
						}
					}
				}()
			}
			waitGone(t, c)
			close(stop)
			waitFor(t, "the close to be counted", func() bool { return srv.Stats().ConnsClosed == 1 && srv.OpenConns() == 0 })
			st := srv.Stats()
			if got := tc.want.count(st); got != 1 {
				t.Errorf("closed, but counted %d times under the expected reason: %+v", got, st)
			}
			if n := st.BadFrames + st.UnprovenTimeouts + st.UnprovenExcess; n != 1 {
				t.Errorf("one bad stream counted %d times: %+v", n, st)
			}
			if st.ConnsAccepted != 1 || srv.OpenConns() != 0 {
				t.Errorf("accepted %d, still open %d: %+v", st.ConnsAccepted, srv.OpenConns(), st)
			}
			checkServes(t, srv, addr)
		})
	}
}

// checkServes checks that a well-behaved client still reaches srv and
// gets an answer on its connection.
func checkServes(t *testing.T, srv *conn.Stream, addr netip.AddrPort) {
	t.Helper()
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	if err := cli.Send([][]byte{[]byte("still there?")}, ep); err != nil {
		t.Fatal(err)
	}
	if err := srv.Send([][]byte{[]byte("yes")}, recvText(t, srv, "still there?")); err != nil {
		t.Fatal(err)
	}
	if back, _ := recvN(t, cli, 1); string(back[0]) != "yes" {
		t.Fatalf("well-behaved client got %q", back[0])
	}
}

// recvText reads from s until want arrives, skipping what a bad stream
// left behind (too large for the buffers included), and returns where it
// came from.
func recvText(t *testing.T, s *conn.Stream, want string) conn.Endpoint {
	t.Helper()
	fn := s.ReceiveFunc()
	bufs, sizes, eps := [][]byte{make([]byte, 2048)}, []int{0}, []conn.Endpoint{{}}
	for {
		n, err := fn(bufs, sizes, eps)
		if err != nil && !errors.Is(err, conn.ErrOversize) {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		if n == 1 && string(bufs[0][:sizes[0]]) == want {
			return eps[0]
		}
	}
}

// The length is 16 bits, so no frame can claim more than 65,535 bytes:
// that largest frame goes through whole, a longer datagram is refused on
// the sending side, and a frame larger than the receiver's buffers (the
// device's, sized for the MTU) is dropped and counted while the
// connection carries on.
func TestStreamAbuseLongestFrame(t *testing.T) {
	if streamframe.MaxPayload != 65535 {
		t.Fatalf("MaxPayload = %d, want 65535 (16-bit length)", streamframe.MaxPayload)
	}
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	longest := bytes.Repeat([]byte{0xa5}, streamframe.MaxPayload)
	cli.Send([][]byte{make([]byte, streamframe.MaxPayload+1), longest}, ep)
	if st := cli.Stats(); st.TxBad != 1 || st.TxFrames != 1 {
		t.Fatalf("sending 65,536 and 65,535 bytes: %+v, want one refused and one queued", st)
	}
	fn := srv.ReceiveFunc()
	big := [][]byte{make([]byte, 1<<16)}
	sizes, eps := []int{0}, []conn.Endpoint{{}}
	if n, err := fn(big, sizes, eps); n != 1 || err != nil || !bytes.Equal(big[0][:sizes[0]], longest) {
		t.Fatalf("the longest frame: n=%d err=%v size=%d", n, err, sizes[0])
	}

	// From a raw peer: a frame of the largest length, to MTU-sized buffers.
	c := rawDial(t, srv, addr, 2)
	c.Write(append(frames(longest), frames([]byte("after"))...))
	// The receive function returns ErrOversize only when the oversize
	// frame is all it found; with "after" beside it, it skips to that.
	mtu := [][]byte{make([]byte, 2048)}
	for {
		n, err := fn(mtu, sizes, eps)
		if err != nil && !errors.Is(err, conn.ErrOversize) {
			t.Fatal(err)
		}
		if n == 1 {
			if got := string(mtu[0][:sizes[0]]); got != "after" {
				t.Fatalf("after the oversize frame: got %q", got)
			}
			break
		}
	}
	if st := srv.Stats(); st.RxOversize != 1 || st.ConnsClosed != 0 {
		t.Fatalf("stats %+v: want one oversize frame counted, no connection closed", st)
	}
}

// With the default cap of 32 unproven connections: the 33rd and 34th are
// refused and counted, a proven peer is neither counted nor disturbed,
// and a slot freed by one of the 32 is taken again.
func TestStreamAbuseUnprovenCapDefault(t *testing.T) {
	// The deadline outlasts the test, so only the cap closes anything.
	srv, addr := listenStream(t, conn.TunedStream(conn.StreamTuning{ProveTimeout: time.Hour}))
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	cli.Send([][]byte{[]byte("hello")}, ep)
	_, from := recvN(t, srv, 1)
	srv.Send([][]byte{[]byte("proven")}, from[0])
	recvN(t, cli, 1)

	const unprovenCap = 32
	var held []*net.TCPConn
	for i := range unprovenCap {
		held = append(held, rawDial(t, srv, addr, 2+i))
	}
	for i := range 2 {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waitClosed(t, c)
		if st := srv.Stats(); st.ConnsRejected != uint64(i+1) {
			t.Fatalf("connection %d past the cap: %+v", unprovenCap+1+i, st)
		}
	}
	if st := srv.Stats(); st.ConnsAccepted != unprovenCap+1 {
		t.Fatalf("accepted %d, want the proven one and %d unproven", st.ConnsAccepted, unprovenCap)
	}
	// The proven peer still talks both ways.
	cli.Send([][]byte{[]byte("ping")}, ep)
	if got, _ := recvN(t, srv, 1); string(got[0]) != "ping" {
		t.Fatalf("proven peer sent %q", got[0])
	}
	srv.Send([][]byte{[]byte("pong")}, from[0])
	if got, _ := recvN(t, cli, 1); string(got[0]) != "pong" {
		t.Fatalf("proven peer got %q", got[0])
	}
	// One unproven peer leaves: its slot is free again.
	held[0].Close()
	waitFor(t, "the slot to be freed", func() bool { return srv.OpenConns() == unprovenCap })
	rawDial(t, srv, addr, unprovenCap+1)
	if st := srv.Stats(); st.ConnsAccepted != unprovenCap+2 || st.ConnsRejected != 2 {
		t.Fatalf("after a slot was freed: %+v", st)
	}
}

// Connections that open and close, more of them than the connection cap,
// leave no slot taken: the table prunes what they leave behind and a
// well-behaved peer is still accepted.
func TestStreamAbuseChurn(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	const n = 300 // past the cap of 256 connections
	for i := range n {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		waitFor(t, "the closed connection to be let go", func() bool {
			st := srv.Stats()
			return st.ConnsAccepted+st.ConnsRejected == uint64(i+1) && st.ConnsClosed == st.ConnsAccepted && srv.OpenConns() == 0
		})
	}
	if st := srv.Stats(); st.ConnsRejected != 0 {
		t.Fatalf("%d connections opened and closed one at a time: %+v", n, st)
	}
	checkServes(t, srv, addr)
}

// Peers that connect and then never read: whatever the device sends them
// costs at most each connection's queue (the rest is dropped and
// counted), Send never waits on them, another peer still gets all it is
// sent, and once a write has been blocked for the write timeout the
// stalled connections are closed and counted.
func TestStreamAbuseStalledReaders(t *testing.T) {
	const (
		stalled   = 8
		queue     = 1 << 20 // the documented per-connection send queue
		writeWait = 2 * time.Second
	)
	srv, addr := listenStream(t, conn.WithWriteTimeout(conn.StreamOptions{}, writeWait))
	// The reading peer, and the receive chunks of both Streams (allocated
	// on first use), are in the baseline: only the stalled connections
	// are measured.
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	cli.Send([][]byte{[]byte("hello")}, conn.Endpoint{Dst: addr, Transport: conn.TransportTCP})
	from := recvText(t, srv, "hello")
	srv.Send([][]byte{[]byte("welcome")}, from)
	recvN(t, cli, 1)
	base := heapLive()

	var eps []conn.Endpoint
	for i := range stalled {
		c := spokenDial(t, srv, addr, 1+i, fmt.Sprintf("stalled %d", i))
		c.SetReadBuffer(4 << 10) // the kernel holds less for the peer
		eps = append(eps, conn.Endpoint{Dst: c.LocalAddr().(*net.TCPAddr).AddrPort(), Transport: conn.TransportTCP})
	}
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte{byte(i)}, 1400)
	}
	// Keep sending until the kernel's buffers are full and the writes
	// block; measure the heap while they are.
	var slowest time.Duration
	sent := 0
	sendAll := func() {
		for _, ep := range eps {
			start := time.Now()
			if err := srv.Send(batch, ep); err != nil {
				t.Fatal(err)
			}
			slowest = max(slowest, time.Since(start))
		}
		sent += len(batch) * len(batch[0])
	}
	for range 100 {
		sendAll()
		time.Sleep(time.Millisecond)
	}
	st := srv.Stats()
	if st.TxQueueDrops == 0 {
		t.Fatalf("no frame dropped for peers that never read: %+v", st)
	}
	// Each connection: its queue and the writer's buffer (two queues)
	// and a read buffer; 1 MiB of slack for everything else.
	limit := uint64(stalled*(2*queue+streamframe.ReaderSize) + 1<<20)
	grew := heapLive() - min(base, heapLive())
	t.Logf("%d stalled peers, %d MB sent to each: heap grew %d KiB (limit %d KiB), %d frames dropped, slowest Send %v",
		stalled, sent/1000000, grew>>10, limit>>10, st.TxQueueDrops, slowest)
	if grew > limit {
		t.Errorf("heap grew by %d KiB with %d stalled peers, more than their queues (%d KiB)", grew>>10, stalled, limit>>10)
	}
	if slowest > time.Second {
		t.Errorf("a Send to a stalled peer took %v: Send must not wait for the network", slowest)
	}

	// The reading peer gets everything while the others are stuck.
	dropsBefore := srv.Stats().TxQueueDrops
	if err := srv.Send(batch[:50], from); err != nil {
		t.Fatal(err)
	}
	got, _ := recvN(t, cli, 50)
	for i := range got {
		if !bytes.Equal(got[i], batch[i]) {
			t.Fatalf("reading peer: datagram %d differs", i)
		}
	}
	if d := srv.Stats().TxQueueDrops - dropsBefore; d != 0 {
		t.Errorf("%d frames to the reading peer dropped", d)
	}

	// The stalled writes time out: the connections close, counted.
	waitFor(t, "the stalled connections to be closed", func() bool { return srv.Stats().WriteTimeouts == stalled })
	waitFor(t, "only the reading peer to remain", func() bool { return srv.OpenConns() == 1 })
	after := heapLive()
	t.Logf("after the stalled peers were closed: heap %d KiB above the baseline", int64(after-base)>>10)
	if after > base+stalled*queue/2 {
		t.Errorf("heap %d KiB above the baseline after the stalled peers were closed: closed connections still hold buffers", (after-base)>>10)
	}
}

// heapLive is the live heap after a collection.
func heapLive() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A connection closed by its peer is kept as a marker (not to be dialed
// back) until the table needs room; the marker holds none of the
// connection's buffers.
func TestStreamAbuseClosedHoldNoBuffers(t *testing.T) {
	const peers = 8
	srv, addr := listenStream(t, conn.StreamOptions{})
	checkServes(t, srv, addr) // the receive chunks, allocated on first use
	base := heapLive()
	for i := range peers {
		c := spokenDial(t, srv, addr, 1, "hi")
		ep := conn.Endpoint{Dst: c.LocalAddr().(*net.TCPAddr).AddrPort(), Transport: conn.TransportTCP}
		srv.Send([][]byte{[]byte("hi")}, ep)
		b := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		c.Close()
		waitFor(t, "the connection to be closed", func() bool {
			return srv.Stats().ConnsClosed == uint64(i+2) && srv.OpenConns() == 0
		})
	}
	after := heapLive()
	t.Logf("%d closed connections: heap %d KiB above the baseline", peers, int64(after-base)>>10)
	if after > base+peers*(64<<10) {
		t.Errorf("heap %d KiB above the baseline after %d connections closed: closed connections hold buffers", (after-base)>>10, peers)
	}
}
