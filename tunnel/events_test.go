package tunnel

import (
	"net/netip"
	"testing"

	"github.com/fips-go/fips-go/device"
)

// The queue for OnEvent keeps the newest eventQueue events when its reader
// falls behind, says how many it dropped, and never blocks the pusher; a
// completed handshake wakes every waiter, other events none.
func TestEventQueueDropsOldest(t *testing.T) {
	e := &events{on: func(Event) {}, wake: make(chan struct{}, 1), handshake: make(chan struct{})}
	ev := func(i int) device.PeerEvent {
		return device.PeerEvent{Kind: device.EndpointChanged, Endpoint: netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(i))}
	}
	waiter := e.handshakeDone()
	const pushed = 100
	for i := range pushed { // no reader runs: the queue must not block
		e.push(ev(i))
	}
	select {
	case <-waiter:
		t.Fatal("endpoint events woke a handshake waiter")
	default:
	}
	for i := pushed - eventQueue; i < pushed; i++ {
		got, ok := e.pop()
		if !ok {
			t.Fatalf("queue empty at event %d", i)
		}
		if got.Endpoint.Port() != uint16(i) {
			t.Fatalf("got event %d, want %d", got.Endpoint.Port(), i)
		}
		wantDropped := 0
		if i == pushed-eventQueue {
			wantDropped = pushed - eventQueue
		}
		if got.Dropped != wantDropped {
			t.Fatalf("event %d says %d dropped, want %d", i, got.Dropped, wantDropped)
		}
	}
	if _, ok := e.pop(); ok {
		t.Fatal("more events than were kept")
	}
	e.push(device.PeerEvent{Kind: device.HandshakeCompleted})
	select {
	case <-waiter:
	default:
		t.Fatal("a completed handshake did not wake the waiter")
	}
	if next := e.handshakeDone(); next == waiter {
		t.Fatal("the handshake signal was not renewed")
	}
}
