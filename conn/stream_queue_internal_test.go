package conn

import (
	"net"
	"net/netip"
	"testing"
)

// The writer's two buffers are reused: a busy connection allocates nothing
// once they have grown, also when the writer wakes to an empty queue (its
// wake-up is a token that an enqueue it already served may have left).
func TestStreamQueueReusesBuffers(t *testing.T) {
	s := NewStream(StreamOptions{})
	defer s.Close()
	k := connKey{netip.MustParseAddrPort("127.0.0.1:1"), TransportTCP}
	c := newStreamConn(s, k, nil)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c.nc = a
	frame := [][]byte{make([]byte, 1452)}
	round := func() {
		c.enqueue(frame)
		buf, _, _ := c.next()
		if len(buf) == 0 {
			t.Fatal("next returned nothing after an enqueue")
		}
		if empty, _, _ := c.next(); len(empty) != 0 {
			t.Fatalf("next returned %d bytes from an empty queue", len(empty))
		}
		c.written(buf)
	}
	for range 4 { // both buffers at their first size
		round()
	}
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Errorf("%v allocations per enqueue and write, want 0: the queue's buffers are not reused", n)
	}
}

// The queues of all connections together hold at most queueTotal: a
// connection whose queue would grow past it drops instead, and the room
// comes back when another connection closes.
func TestStreamQueueTotal(t *testing.T) {
	const per, total = 64 << 10, 96 << 10
	s := NewStream(StreamOptions{queueBytes: per, queueTotal: total})
	defer s.Close()
	conns := make([]*streamConn, 2)
	for i := range conns {
		k := connKey{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(i+1)), TransportTCP}
		conns[i] = newStreamConn(s, k, nil)
	}
	frame := make([]byte, 1000)
	fill := func(c *streamConn) {
		for range per / len(frame) {
			c.enqueue([][]byte{frame})
		}
	}
	fill(conns[0])
	if cap(conns[0].q) != per || s.queued.Load() != per {
		t.Fatalf("first queue: cap %d, %d bytes counted; want %d", cap(conns[0].q), s.queued.Load(), per)
	}
	drops := s.Stats().TxQueueDrops
	fill(conns[1])
	if got := s.queued.Load(); got > total {
		t.Errorf("queues hold %d bytes, more than the %d allowed", got, total)
	}
	if cap(conns[1].q) != 32<<10 || s.Stats().TxQueueDrops == drops {
		t.Errorf("second queue grew to %d bytes (want 32 KiB, what the total leaves) with %d drops",
			cap(conns[1].q), s.Stats().TxQueueDrops-drops)
	}
	conns[0].shut()
	if got := s.queued.Load(); got != 32<<10 {
		t.Errorf("after the first connection closed, %d bytes counted, want 32 KiB", got)
	}
	conns[1].q, conns[1].qn = conns[1].q[:0], 0 // as if written
	fill(conns[1])
	if cap(conns[1].q) != per {
		t.Errorf("with the room back, the second queue grew to %d bytes, want %d", cap(conns[1].q), per)
	}
}
