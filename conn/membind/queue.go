package membind

import (
	"net/netip"
	"sync"
	"time"
)

// packet is a datagram in flight. data is the network's own copy, shared
// read-only by a duplicate.
type packet struct {
	data []byte
	from netip.AddrPort
	to   netip.Addr
	at   time.Time // deliver no earlier than this; zero for no delay
}

// queue is one open bind's bounded receive queue.
type queue struct {
	// mu guards ring, head, n, held, hasHeld and closed.
	mu      sync.Mutex
	ring    []packet
	head, n int
	held    packet // a datagram held back to be reordered
	hasHeld bool
	closed  bool

	notify chan struct{} // capacity 1: something was queued
	done   chan struct{} // closed by close
}

func newQueue(size int) *queue {
	return &queue{
		ring:   make([]packet, size),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// push queues p. With hold, p is kept back and released behind the next
// datagram; a datagram already held is released behind p.
func (q *queue) push(p packet, hold bool, n *Network) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if hold && !q.hasHeld {
		q.held, q.hasHeld = p, true
		return
	}
	q.enqueue(p, n)
	if q.hasHeld {
		q.enqueue(q.held, n)
		q.held, q.hasHeld = packet{}, false
		n.reordered.Add(1)
	}
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// enqueue appends p, or drops and counts it when the queue is full.
func (q *queue) enqueue(p packet, n *Network) {
	if q.n == len(q.ring) {
		n.queueDrops.Add(1)
		return
	}
	q.ring[(q.head+q.n)%len(q.ring)] = p
	q.n++
}

// pop removes the head; the caller checked q.n > 0.
func (q *queue) pop() packet {
	p := q.ring[q.head]
	q.ring[q.head] = packet{}
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return p
}

// close wakes every waiting receiver and drops what is queued.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	clear(q.ring)
	q.n, q.held, q.hasHeld = 0, packet{}, false
	close(q.done)
}
