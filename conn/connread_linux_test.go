package conn

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestConnectedReaderTakesTurns: with one connected socket holding a
// long burst and two others a datagram each, the first read already
// carries the two others' datagrams: each ready socket gets a turn of a
// few messages, the busy one does not keep the reader. A socket that
// becomes ready while the busy one still has most of its burst gets its
// turn before the burst ends, and the burst arrives in order. With and
// without GRO.
func TestConnectedReaderTakesTurns(t *testing.T) {
	for _, o := range []Options{{}, {DisableGRO: true}} {
		t.Run(fmt.Sprintf("DisableGRO=%v", o.DisableGRO), func(t *testing.T) {
			us := openEnd(t, o)
			busy, busyAddr := peerSock(t)
			b, bAddr := peerSock(t)
			c, cAddr := peerSock(t)
			for _, ap := range []netip.AddrPort{busyAddr, bAddr, cAddr} {
				connect(t, us, Endpoint{Dst: ap})
			}
			d, dAddr := peerSock(t)
			connect(t, us, Endpoint{Dst: dAddr})
			const burst = 600
			var want [][]byte
			for i := range burst {
				want = append(want, []byte(fmt.Sprintf("busy %d", i)))
			}
			sendAll(t, busy, us.at(lo4), want)
			sendAll(t, b, us.at(lo4), [][]byte{[]byte("b")})
			sendAll(t, c, us.at(lo4), [][]byte{[]byte("c")})

			bufs, _, _ := rxBufs(64, 100)
			fn := us.connFn(t)
			sizes, eps := make([]int, 64), make([]Endpoint, 64)
			n, err := fn(bufs, sizes, eps)
			if err != nil {
				t.Fatal(err)
			}
			from := map[netip.AddrPort]int{}
			var gotBusy [][]byte
			for i := range n {
				from[eps[i].Dst]++
				if eps[i].Dst == busyAddr {
					gotBusy = append(gotBusy, append([]byte{}, bufs[i][:sizes[i]]...))
				}
			}
			if from[bAddr] != 1 || from[cAddr] != 1 {
				t.Fatalf("first read: %d datagrams by source %v; want b's and c's among them", n, from)
			}
			sendAll(t, d, us.at(lo4), [][]byte{[]byte("d")})
			rest, from2 := recvConn(t, us, burst-len(gotBusy)+1, bufs)
			dAt := -1
			for i, ep := range from2 {
				if ep.Dst == dAddr {
					dAt = i
					continue
				}
				gotBusy = append(gotBusy, rest[i])
			}
			if dAt < 0 || dAt == len(rest)-1 {
				t.Fatalf("the socket that became ready came at %d of %d, want before the burst ended", dAt, len(rest))
			}
			for i := range want {
				if string(gotBusy[i]) != string(want[i]) {
					t.Fatalf("busy datagram %d is %q, want %q", i, gotBusy[i], want[i])
				}
			}
		})
	}
}

// TestConnectedReaderOversize: a datagram larger than the caller's
// buffers on a connected socket makes the read return ErrOversize, so the
// device can look for an MTU raise; with GRO it is kept for a call with
// larger buffers, without GRO it is dropped and counted.
func TestConnectedReaderOversize(t *testing.T) {
	for _, o := range []Options{{}, {DisableGRO: true}} {
		t.Run(fmt.Sprintf("DisableGRO=%v", o.DisableGRO), func(t *testing.T) {
			us := openEnd(t, o)
			a, aAddr := peerSock(t)
			connect(t, us, Endpoint{Dst: aAddr})
			big := make([]byte, 1000)
			sendAll(t, a, us.at(lo4), [][]byte{big})
			fn := us.connFn(t)
			small, sizes, eps := rxBufs(4, 500)
			if _, err := fn(small, sizes, eps); !errors.Is(err, ErrOversize) {
				t.Fatalf("read into small buffers: %v, want ErrOversize", err)
			}
			large, _, _ := rxBufs(4, 1500)
			if o.DisableGRO {
				if s := us.b.Stats(); s.RxOversize != 1 {
					t.Fatalf("RxOversize %d, want 1", s.RxOversize)
				}
				sendAll(t, a, us.at(lo4), [][]byte{[]byte("next")})
				if got, _ := recvConn(t, us, 1, large); string(got[0]) != "next" {
					t.Fatalf("got %q", got[0])
				}
				return
			}
			got, _ := recvConn(t, us, 1, large)
			if len(got[0]) != len(big) {
				t.Fatalf("got %d bytes, want the kept %d-byte datagram", len(got[0]), len(big))
			}
		})
	}
}

// TestConnectedSocketClosedWhileRead: connected sockets are closed while
// the reader reads them, and each close is followed at once by a plain
// socket that likely reuses the closed descriptor's number. The reader
// must never read such a socket (the closed one's epoll events, already
// taken, must not lead it there): every plain socket gets all its
// datagrams, and every datagram the reader returns comes from a
// connected peer.
func TestConnectedSocketClosedWhileRead(t *testing.T) {
	us := openEnd(t, Options{})
	peer, peerAddr := peerSock(t)
	sender, _ := peerSock(t)
	fn := us.connFn(t)
	var wg sync.WaitGroup
	stray := make(chan netip.AddrPort, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		bufs, sizes, eps := rxBufs(64, 1500)
		for {
			n, err := fn(bufs, sizes, eps)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			for i := range n {
				if eps[i].Dst != peerAddr {
					select {
					case stray <- eps[i].Dst:
					default:
					}
				}
			}
		}
	}()
	const rounds, perRound = 50, 20
	for r := range rounds {
		pc, err := us.b.Connect(Endpoint{Dst: peerAddr})
		if err != nil {
			t.Fatal(err)
		}
		var dgrams [][]byte
		for i := range perRound {
			dgrams = append(dgrams, []byte(fmt.Sprintf("%d %d", r, i)))
		}
		sendAll(t, peer, us.at(lo4), dgrams) // queued: the reader has them to read
		pc.Close()
		plain, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		sendAll(t, sender, plain.LocalAddr().(*net.UDPAddr).AddrPort(), dgrams)
		buf := make([]byte, 100)
		for i := range perRound {
			plain.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, _, err := plain.ReadFromUDPAddrPort(buf); err != nil {
				t.Fatalf("round %d: the plain socket got %d of %d datagrams: %v", r, i, perRound, err)
			}
		}
		plain.Close()
	}
	us.b.Close()
	wg.Wait()
	select {
	case ap := <-stray:
		t.Fatalf("the reader returned a datagram from %v, not a connected peer", ap)
	default:
	}
	if s := us.b.Stats(); s.ConnOpened != rounds || s.ConnClosed != rounds {
		t.Fatalf("stats %+v, want %d opened and closed", s, rounds)
	}
}

// TestConnectedReaderManyActiveSockets: 300 connected sockets with
// datagrams queued at once, read by one caller with a small batch: every
// datagram arrives, each socket's in order. (Readers of their own once
// deadlocked here, each holding a batch while waiting for read buffers
// the others held; the one reader owns its buffers.)
func TestConnectedReaderManyActiveSockets(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 600 sockets")
	}
	us := openEnd(t, Options{})
	const socks, each = 300, 3
	var peers []*net.UDPConn
	for range socks {
		c, ap := peerSock(t)
		connect(t, us, Endpoint{Dst: ap})
		peers = append(peers, c)
	}
	for i := range each {
		for j, c := range peers {
			sendAll(t, c, us.at(lo4), [][]byte{[]byte(fmt.Sprintf("%d %d", j, i))})
		}
	}
	bufs, _, _ := rxBufs(8, 100)
	got, eps := recvConn(t, us, socks*each, bufs)
	next := map[netip.AddrPort]int{}
	for k, d := range got {
		var j, i int
		if _, err := fmt.Sscanf(string(d), "%d %d", &j, &i); err != nil {
			t.Fatalf("datagram %q: %v", d, err)
		}
		if eps[k].Dst != peers[j].LocalAddr().(*net.UDPAddr).AddrPort() || i != next[eps[k].Dst] {
			t.Fatalf("datagram %q from %v: out of order or from the wrong socket", d, eps[k].Dst)
		}
		next[eps[k].Dst]++
	}
}

// TestConnectedReaderSmallBatch: without GRO a turn reads at most
// BatchSize datagrams, however many buffers the caller has; a turn that
// fills that is full, and its socket keeps its place in the ring. Taken
// for drained, it would wait for its next datagram's epoll edge with the
// rest of its queue unread.
func TestConnectedReaderSmallBatch(t *testing.T) {
	us := openEnd(t, Options{DisableGRO: true, batchSize: 4})
	a, aAddr := peerSock(t)
	connect(t, us, Endpoint{Dst: aAddr})
	want := burst(10, 20)
	sendAll(t, a, us.at(lo4), want)
	bufs, _, _ := rxBufs(64, 100)
	got, _ := recvConn(t, us, len(want), bufs)
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("datagram %d is %x, want %x", i, got[i], want[i])
		}
	}
}
