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
