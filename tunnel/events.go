package tunnel

import (
	"sync"

	"github.com/fips-go/fips-go/device"
)

// Event is something that happened to one of the tunnel's peers: a
// handshake completed (device.HandshakeCompleted), its session expired
// (device.SessionExpired) or its endpoint changed (device.EndpointChanged).
type Event struct {
	device.PeerEvent
	// Dropped is how many events just before this one were dropped
	// because OnEvent had fallen 64 events behind.
	Dropped int
}

// eventQueue bounds the events waiting for Options.OnEvent; past it the
// oldest is dropped, so the device never waits for a slow callback.
const eventQueue = 64

// events takes the device's peer events, on the device's goroutines and
// without ever blocking them, queues them for Options.OnEvent (delivered
// in order, one at a time, on a goroutine of its own) and wakes
// WaitHandshake on every completed handshake.
type events struct {
	on   func(Event) // nil: nothing is queued and no goroutine runs
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex // guards the fields below
	ring      [eventQueue]device.PeerEvent
	head, n   int           // the queue is ring[head], ... ring[head+n-1], modulo its size
	dropped   int           // dropped since the last event delivered
	handshake chan struct{} // closed, and replaced, at every completed handshake
}

func newEvents(on func(Event)) *events {
	e := &events{on: on, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		handshake: make(chan struct{})}
	if on == nil {
		close(e.done)
	} else {
		go e.run()
	}
	return e
}

// push is the device's Options.OnPeerEvent.
func (e *events) push(ev device.PeerEvent) {
	e.mu.Lock()
	if ev.Kind == device.HandshakeCompleted {
		close(e.handshake)
		e.handshake = make(chan struct{})
	}
	if e.on != nil {
		if e.n == len(e.ring) {
			e.head = (e.head + 1) % len(e.ring)
			e.n--
			e.dropped++
		}
		e.ring[(e.head+e.n)%len(e.ring)] = ev
		e.n++
	}
	e.mu.Unlock()
	if e.on != nil {
		select {
		case e.wake <- struct{}{}:
		default: // a wake-up is pending already; it will find this event too
		}
	}
}

// pop takes the oldest queued event and how many were dropped before it.
func (e *events) pop() (Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		return Event{}, false
	}
	ev := Event{PeerEvent: e.ring[e.head], Dropped: e.dropped}
	e.head = (e.head + 1) % len(e.ring)
	e.n--
	e.dropped = 0
	return ev, true
}

// handshakeDone is closed at the next completed handshake.
func (e *events) handshakeDone() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.handshake
}

func (e *events) run() {
	defer close(e.done)
	for {
		select {
		case <-e.stop:
			return
		case <-e.wake:
		}
		for {
			ev, ok := e.pop()
			if !ok {
				break
			}
			e.on(ev)
		}
	}
}

// close stops deliveries; it returns once OnEvent is not running.
func (e *events) close() {
	if e.on != nil {
		close(e.stop)
	}
	<-e.done
}
