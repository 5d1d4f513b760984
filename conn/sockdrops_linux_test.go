package conn

import (
	"testing"
	"time"
)

// Datagrams the kernel drops at a full receive buffer never reach a read;
// the bind asks for their count at a read, at most every dropsEvery, and
// counts them. With GRO the first read's ask is checked; without it (one
// datagram per read, so each call reads) the pacing too.
func TestSocketDropsCounted(t *testing.T) {
	const sent = 200
	bufs, _, _ := rxBufs(1, 1500)
	send := func(a, b *end) {
		t.Helper()
		if err := a.b.Send(burst(sent, 100), Endpoint{Dst: b.at(lo4)}); err != nil {
			t.Fatal(err)
		}
	}

	a, b := openEnd(t, Options{}), openEnd(t, Options{socketBuffer: 4096})
	send(a, b)
	recvN(t, b, b.fns[0], 1, bufs)
	if d := b.b.Stats().RxSocketDrops; d == 0 || d >= sent {
		t.Fatalf("gro: RxSocketDrops %d after %d datagrams into a %d-byte buffer, want between 1 and %d",
			d, sent, rcvbuf(t, b.sock(false).conn), sent-1)
	}

	b = openEnd(t, Options{socketBuffer: 4096, DisableGRO: true})
	send(a, b)
	asked := time.Now()
	recvN(t, b, b.fns[0], 1, bufs) // the first read asks
	first := b.b.Stats().RxSocketDrops
	if first == 0 || first >= sent {
		t.Fatalf("RxSocketDrops %d after %d datagrams into a %d-byte buffer, want between 1 and %d",
			first, sent, rcvbuf(t, b.sock(false).conn), sent-1)
	}
	send(a, b) // the buffer is still nearly full: most of these drop too
	recvN(t, b, b.fns[0], 1, bufs)
	// Only meaningful if this read came within dropsEvery of the ask,
	// which a stalled test machine may not manage.
	if d := b.b.Stats().RxSocketDrops; d != first && time.Since(asked) < dropsEvery {
		t.Fatalf("a read within %v of the last ask asked again: RxSocketDrops %d, was %d", dropsEvery, d, first)
	}
	time.Sleep(dropsEvery + 10*time.Millisecond)
	recvN(t, b, b.fns[0], 1, bufs)
	if d := b.b.Stats().RxSocketDrops; d <= first {
		t.Fatalf("a read %v after the last ask did not count the new drops: RxSocketDrops %d, was %d", dropsEvery, d, first)
	}
}
