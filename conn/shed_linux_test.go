package conn

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rcvbuf is the socket's SO_RCVBUF as the kernel reports it (twice what
// was set).
func rcvbuf(t *testing.T, c *net.UDPConn) int {
	t.Helper()
	var v int
	err := sockoptControl(c, func(fd int) error {
		var err error
		v, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// While shedding, a shared socket's buffer is small and what waited in the
// kernel longer than ShedMaxAge (queued before the shedding began) is
// dropped unread and counted, while what is fresh is delivered; afterwards
// the buffer is full-size again and nothing is dropped for its age. With
// and without GRO, whose reads take two paths.
func TestShedDropsStaleDatagrams(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out ShedMaxAge")
	}
	for _, gro := range []bool{true, false} {
		a, b := openEnd(t, Options{}), openEnd(t, Options{DisableGRO: !gro})
		full := rcvbuf(t, b.sock(false).conn)
		old, fresh := burst(8, 200), burst(3, 300)
		if err := a.b.Send(old, Endpoint{Dst: b.at(lo4)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ShedMaxAge + 100*time.Millisecond)
		b.b.Shed(true)
		// Without CAP_NET_ADMIN net.core.rmem_max may hold the full
		// buffer at or below the shed one; then there is nothing to see.
		if got := rcvbuf(t, b.sock(false).conn); full > 2*ShedBuffer && (got >= full || got > 2*ShedBuffer) {
			t.Fatalf("gro %v: SO_RCVBUF %d while shedding, was %d; want at most %d", gro, got, full, 2*ShedBuffer)
		}
		if err := a.b.Send(fresh, Endpoint{Dst: b.at(lo4)}); err != nil {
			t.Fatal(err)
		}
		bufs, _, _ := rxBufs(16, 1500)
		got, eps := recvN(t, b, b.fns[0], len(fresh), bufs)
		checkBurst(t, got, eps, fresh, a.at(lo4), lo4)
		if s := b.b.Stats().RxShedStale; s != uint64(len(old)) {
			t.Fatalf("gro %v: RxShedStale %d, want %d", gro, s, len(old))
		}

		b.b.Shed(false)
		if got := rcvbuf(t, b.sock(false).conn); got != full {
			t.Fatalf("gro %v: SO_RCVBUF %d after shedding, want %d again", gro, got, full)
		}
		if err := a.b.Send(old, Endpoint{Dst: b.at(lo4)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ShedMaxAge + 100*time.Millisecond)
		got, eps = recvN(t, b, b.fns[0], len(old), bufs)
		checkBurst(t, got, eps, old, a.at(lo4), lo4)
	}
}

// Shedding outlasts a reopen (a listen-port change while under load): the
// new shared sockets start shed, and stop with the bind's next Shed(false).
func TestShedSurvivesReopen(t *testing.T) {
	b := openEnd(t, Options{})
	full := rcvbuf(t, b.sock(false).conn)
	b.b.Shed(true)
	b.b.Close()
	if _, _, err := b.b.Open(0); err != nil {
		t.Fatal(err)
	}
	s := b.sock(false)
	if !s.shed.Load() {
		t.Fatal("a socket opened while shedding is not shed")
	}
	if got := rcvbuf(t, s.conn); full > 2*ShedBuffer && got > 2*ShedBuffer {
		t.Fatalf("SO_RCVBUF %d on a socket opened while shedding, want at most %d", got, 2*ShedBuffer)
	}
	b.b.Shed(false)
	if s.shed.Load() || rcvbuf(t, s.conn) != full {
		t.Fatalf("after Shed(false): shed %v, SO_RCVBUF %d, want false, %d", s.shed.Load(), rcvbuf(t, s.conn), full)
	}
}
