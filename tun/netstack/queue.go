package netstack

import (
	"os"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// queued is one outbound packet and what it costs in wire packets: a TCP
// super-packet costs the number of segments Read will cut it into.
type queued struct {
	pkt  *stack.PacketBuffer
	cost int
}

// outQueue is the bounded FIFO between the stack, which writes packets from
// many goroutines, and Read, which drains it in batches. Its capacity is
// counted in wire packets, not entries, so a queue of 1024 holds about
// 1024*MTU bytes whether the stack sends 64 KiB super-packets or single
// segments. One super-packet larger than the whole capacity is admitted
// into an empty queue, so the bound is limit packets plus one super-packet.
type outQueue struct {
	mu sync.Mutex
	// readable is signalled when a packet arrives while Read waits, and
	// broadcast on close.
	readable sync.Cond
	// writable is broadcast when Read frees room while writers wait, and
	// on close.
	writable sync.Cond

	// The fields below are guarded by mu.
	ring           []queued // circular, len(ring) == limit: every entry costs at least 1
	head, n        int
	slots          int // wire packets queued
	limit          int
	closed         bool
	readerWaiting  bool
	writersWaiting int
	highWater      int    // most slots ever queued
	waits          uint64 // writers that had to wait for room
	drops          uint64 // packets refused because the queue was full and the writer could not wait
}

func newOutQueue(limit int) *outQueue {
	q := &outQueue{ring: make([]queued, limit), limit: limit}
	q.readable.L = &q.mu
	q.writable.L = &q.mu
	return q
}

// push queues pkt (taking a reference). When the queue is full it waits
// for room if wait is set (backpressure: the stack goroutine sending stalls,
// as a socket writer on a full qdisc would) and otherwise refuses the
// packet with ErrNoBufferSpace, which the stack counts as a drop.
func (q *outQueue) push(pkt *stack.PacketBuffer, cost int, wait bool) tcpip.Error {
	q.mu.Lock()
	waited := false
	for !q.closed && q.slots != 0 && q.slots+cost > q.limit {
		if !wait {
			q.drops++
			q.mu.Unlock()
			return &tcpip.ErrNoBufferSpace{}
		}
		if !waited {
			waited = true
			q.waits++
		}
		q.writersWaiting++
		q.writable.Wait()
		q.writersWaiting--
	}
	if q.closed {
		q.mu.Unlock()
		return &tcpip.ErrClosedForSend{}
	}
	q.ring[(q.head+q.n)%len(q.ring)] = queued{pkt: pkt.IncRef(), cost: cost}
	q.n++
	q.slots += cost
	q.highWater = max(q.highWater, q.slots)
	wake := q.readerWaiting
	q.mu.Unlock()
	if wake {
		q.readable.Signal()
	}
	return nil
}

// pop appends queued packets to dst while their cost fits room. When
// block is set it waits for a packet if the queue is empty, and takes the
// first packet even if it alone costs more than room (its segments then
// span several Reads); otherwise it returns what fits, possibly nothing.
// Keeping a super-packet within one Read batch matters: the peer's GRO then
// sees it whole and acknowledges it in one piece, while partial ACKs of a
// super-packet made RACK declare its tail lost and retransmit spuriously.
// After close it returns os.ErrClosed. The caller owns the references it
// gets.
func (q *outQueue) pop(dst []queued, room int, block bool) ([]queued, error) {
	q.mu.Lock()
	for !q.closed && q.n == 0 && block {
		q.readerWaiting = true
		q.readable.Wait()
		q.readerWaiting = false
	}
	if q.closed {
		q.mu.Unlock()
		return dst, os.ErrClosed
	}
	taken := 0
	for q.n > 0 && taken < room {
		e := q.ring[q.head]
		if (taken > 0 || !block) && taken+e.cost > room {
			break
		}
		dst = append(dst, e)
		q.ring[q.head] = queued{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.slots -= e.cost
		taken += e.cost
	}
	wake := q.writersWaiting > 0 && taken > 0
	q.mu.Unlock()
	if wake {
		q.writable.Broadcast()
	}
	return dst, nil
}

// close wakes every waiter, refuses further packets and releases the
// queued ones.
func (q *outQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	for q.n > 0 {
		q.ring[q.head].pkt.DecRef()
		q.ring[q.head] = queued{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
	}
	q.slots = 0
	q.mu.Unlock()
	q.readable.Broadcast()
	q.writable.Broadcast()
}

// queueStats is a snapshot of the queue's counters.
type queueStats struct {
	slots, highWater int
	waits, drops     uint64
}

func (q *outQueue) stats() queueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queueStats{slots: q.slots, highWater: q.highWater, waits: q.waits, drops: q.drops}
}
