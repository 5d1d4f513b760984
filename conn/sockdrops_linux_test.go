package conn

import (
	"testing"
	"time"
)

// Datagrams the kernel drops at a full receive buffer never reach a read;
// the bind asks for their count while reads go on, and counts them. With
// and without GRO, whose reads take two paths.
func TestSocketDropsCounted(t *testing.T) {
	const sent = 200
	for _, gro := range []bool{true, false} {
		a, b := openEnd(t, Options{}), openEnd(t, Options{SocketBuffer: 4096, DisableGRO: !gro})
		if err := a.b.Send(burst(sent, 1000), Endpoint{Dst: b.at(lo4)}); err != nil {
			t.Fatal(err)
		}
		// Two reads further apart than dropsEvery: the second asks.
		bufs, _, _ := rxBufs(1, 1500)
		recvN(t, b, b.fns[0], 1, bufs)
		time.Sleep(dropsEvery + 10*time.Millisecond)
		recvN(t, b, b.fns[0], 1, bufs)
		if d := b.b.Stats().RxSocketDrops; d == 0 || d > sent-2 {
			t.Fatalf("gro %v: RxSocketDrops %d after %d datagrams into a %d-byte buffer, want between 1 and %d",
				gro, d, sent, rcvbuf(t, b.sock(false).conn), sent-2)
		}
	}
}
