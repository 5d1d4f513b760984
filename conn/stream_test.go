package conn_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/conn/internal/streamframe"
)

// listenStream starts a Stream listening on a loopback port.
func listenStream(t *testing.T, o conn.StreamOptions) (*conn.Stream, netip.AddrPort) {
	t.Helper()
	s := conn.NewStream(o)
	t.Cleanup(func() { s.Close() })
	port, err := s.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	return s, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

// recvN reads until n datagrams arrived (or the test's deadline).
func recvN(t *testing.T, s *conn.Stream, n int) ([][]byte, []conn.Endpoint) {
	t.Helper()
	fn := s.ReceiveFunc()
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	sizes, eps := make([]int, 32), make([]conn.Endpoint, 32)
	var got [][]byte
	var from []conn.Endpoint
	for len(got) < n {
		k, err := fn(bufs, sizes, eps)
		if err != nil {
			t.Fatalf("receive after %d: %v", len(got), err)
		}
		for i := range k {
			got = append(got, bytes.Clone(bufs[i][:sizes[i]]))
			from = append(from, eps[i])
		}
	}
	return got, from
}

func TestStreamRoundTrip(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	var out [][]byte
	for i := range 100 {
		out = append(out, bytes.Repeat([]byte{byte(i)}, 32+i))
	}
	if err := cli.Send(out, ep); err != nil {
		t.Fatal(err)
	}
	got, from := recvN(t, srv, len(out))
	for i := range out {
		if !bytes.Equal(got[i], out[i]) {
			t.Fatalf("datagram %d: got %d bytes, sent %d", i, len(got[i]), len(out[i]))
		}
		if from[i].Transport != conn.TransportTCP || from[i] != from[0] {
			t.Fatalf("datagram %d from %+v", i, from[i])
		}
	}
	// The server answers on the connection it accepted.
	if err := srv.Send([][]byte{[]byte("reply")}, from[0]); err != nil {
		t.Fatal(err)
	}
	back, bfrom := recvN(t, cli, 1)
	if string(back[0]) != "reply" || bfrom[0] != ep {
		t.Fatalf("reply %q from %+v, want from %+v", back[0], bfrom[0], ep)
	}
	st := cli.Stats()
	if st.ConnsDialed != 1 || st.TxFrames != 100 || st.TxWrites != 1 {
		t.Fatalf("client stats %+v: want one dial and the 100 frames in one write", st)
	}
	if s := srv.Stats(); s.ConnsAccepted != 1 || s.RxFrames != 100 || s.TxFrames != 1 {
		t.Fatalf("server stats %+v", s)
	}
}

func TestStreamSendWrongTransport(t *testing.T) {
	s := conn.NewStream(conn.StreamOptions{})
	defer s.Close()
	ep := conn.Endpoint{Dst: netip.MustParseAddrPort("127.0.0.1:1")}
	if err := s.Send([][]byte{{1}}, ep); !errors.Is(err, conn.ErrNotStream) {
		t.Fatalf("UDP endpoint: %v", err)
	}
}

// waitClosed reads c until the Stream closes it.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("connection not closed by the stream: %v", err)
	}
}

func TestStreamZeroLengthCloses(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0, 0})
	waitClosed(t, c)
	if st := srv.Stats(); st.BadFrames != 1 || st.ConnsClosed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStreamUnprovenTimeout(t *testing.T) {
	srv, addr := listenStream(t, conn.TunedStream(conn.StreamTuning{ProveTimeout: 50 * time.Millisecond}))
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClosed(t, c)
	if st := srv.Stats(); st.UnprovenTimeouts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStreamUnprovenFrames(t *testing.T) {
	srv, addr := listenStream(t, conn.TunedStream(conn.StreamTuning{UnprovenFrames: 3}))
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b []byte
	for range 4 {
		b, _ = streamframe.Append(b, []byte("junk"))
	}
	c.Write(b)
	// The receive function is not read here: the first three frames wait
	// in the chunks, the fourth closes the connection.
	waitClosed(t, c)
	if st := srv.Stats(); st.UnprovenExcess != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStreamUnprovenCap(t *testing.T) {
	srv, addr := listenStream(t, conn.TunedStream(conn.StreamTuning{MaxUnproven: 2}))
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for srv.OpenConns() < 2 {
		time.Sleep(time.Millisecond)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClosed(t, c)
	if st := srv.Stats(); st.ConnsRejected != 1 || st.ConnsAccepted != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A peer that never reads fills only its own queue: Send does not block,
// the overflow is counted, and another peer's connection still carries
// its datagrams.
func TestStreamStalledPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(time.Minute) // never reads
		}
	}()
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.TunedStream(conn.StreamTuning{QueueBytes: 64 << 10}))
	defer cli.Close()
	stalled := conn.Endpoint{Dst: ln.Addr().(*net.TCPAddr).AddrPort(), Transport: conn.TransportTCP}
	big := make([][]byte, 64)
	for i := range big {
		big[i] = make([]byte, 1400)
	}
	start := time.Now()
	for range 200 { // 18 MB: more than the kernel's socket buffers hold
		if err := cli.Send(big, stalled); err != nil {
			t.Fatal(err)
		}
	}
	if st := cli.Stats(); st.TxQueueDrops == 0 {
		t.Fatalf("no drops for a peer that never reads: %+v", st)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Send to a stalled peer took %v", d)
	}
	if err := cli.Send([][]byte{[]byte("hello")}, conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}); err != nil {
		t.Fatal(err)
	}
	if got, _ := recvN(t, srv, 1); string(got[0]) != "hello" {
		t.Fatalf("other peer got %q", got[0])
	}
}

func TestStreamOversizeFrame(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.StreamOptions{})
	defer cli.Close()
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	cli.Send([][]byte{make([]byte, 3000)}, ep)
	fn := srv.ReceiveFunc()
	bufs, sizes, eps := [][]byte{make([]byte, 2048)}, []int{0}, []conn.Endpoint{{}}
	if n, err := fn(bufs, sizes, eps); n != 0 || !errors.Is(err, conn.ErrOversize) {
		t.Fatalf("oversize frame: n=%d err=%v", n, err)
	}
	cli.Send([][]byte{[]byte("fits")}, ep)
	if n, err := fn(bufs, sizes, eps); n != 1 || string(bufs[0][:sizes[0]]) != "fits" {
		t.Fatalf("after oversize: n=%d err=%v", n, err)
	}
	if st := srv.Stats(); st.RxOversize != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStreamDialFailureBacksOff(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dst := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close() // nothing listens there now
	cli := conn.NewStream(conn.TunedStream(conn.StreamTuning{DialBackoff: time.Hour}))
	defer cli.Close()
	ep := conn.Endpoint{Dst: dst, Transport: conn.TransportTCP}
	cli.Send([][]byte{{1}}, ep)
	for cli.Stats().DialFailures == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := cli.Send([][]byte{{1}}, ep); err == nil {
		t.Fatal("a send within the back-off did not fail")
	}
	// Both frames are lost: the first with the failed dial, the second
	// within the back-off.
	if st := cli.Stats(); st.DialFailures != 1 || st.TxNoConn != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStreamCloseUnblocksReceive(t *testing.T) {
	s := conn.NewStream(conn.StreamOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := s.ReceiveFunc()([][]byte{make([]byte, 100)}, []int{0}, []conn.Endpoint{{}})
		errc <- err
	}()
	s.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("receive after Close: %v", err)
	}
	if _, err := s.Listen(0); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Listen after Close: %v", err)
	}
}

// An endpoint that connected to the listener is not dialed back once its
// connection is gone: its address is the peer's ephemeral port, and the
// peer reconnects when it wants to; frames to it are dropped and counted.
func TestStreamNoDialBackToAcceptedEndpoint(t *testing.T) {
	srv, addr := listenStream(t, conn.StreamOptions{})
	cli := conn.NewStream(conn.StreamOptions{})
	ep := conn.Endpoint{Dst: addr, Transport: conn.TransportTCP}
	cli.Send([][]byte{[]byte("hi")}, ep)
	_, from := recvN(t, srv, 1)
	srv.Send([][]byte{[]byte("proof")}, from[0]) // the device answered
	recvN(t, cli, 1)
	cli.Close()
	for srv.OpenConns() != 0 {
		time.Sleep(time.Millisecond)
	}
	if err := srv.Send([][]byte{[]byte("late")}, from[0]); err == nil {
		t.Fatal("a send to a closed accepted endpoint succeeded")
	}
	time.Sleep(50 * time.Millisecond)
	if st := srv.Stats(); st.DialFailures != 0 || st.ConnsDialed != 0 || st.TxNoConn != 1 {
		t.Fatalf("stats %+v: want no dial and one frame dropped", st)
	}
}
