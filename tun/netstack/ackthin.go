package netstack

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/internal/packet"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"
)

// ackThinning is the I/O around ackHolder: its lock, its clock and the
// one timer that delivers held ACKs whose deadline passed.
type ackThinning struct {
	hold  time.Duration // 0: off
	epoch time.Time

	mu    sync.Mutex
	h     *ackHolder // guarded by mu
	armed bool       // guarded by mu: the timer is set
	timer *time.Timer
	// nheld mirrors len(h.held) so that a packet which is not a pure ACK
	// passes without the lock while nothing is held.
	nheld atomic.Int64

	// expireMu serialises timer callbacks and guards due, the copies of
	// the ACKs a callback delivers.
	expireMu sync.Mutex
	due      []heldACK
}

func (a *ackThinning) init(hold time.Duration, expire func()) {
	if hold <= 0 {
		return
	}
	a.hold = hold
	a.epoch = time.Now()
	a.h = newACKHolder(int64(hold), maxHeldACKs, defaultMinFlows)
	a.timer = time.AfterFunc(time.Hour, expire)
	a.timer.Stop()
}

func (a *ackThinning) on() bool { return a.hold > 0 }

func (a *ackThinning) now() int64 { return int64(time.Since(a.epoch)) }

// offer runs the holder on one packet from Write: it enqueues a held ACK
// that must go first, and reports whether p is to be enqueued now.
func (a *ackThinning) offer(g *gro.GRO, p []byte, proto tcpip.NetworkProtocolNumber) bool {
	t, ok := parseTCP(p)
	if !ok || (!t.holdable && a.nheld.Load() == 0) {
		return true
	}
	var first [maxHeldACK]byte
	a.mu.Lock()
	before, deliver := a.h.offer(p, t, a.now())
	k := copy(first[:], before)
	a.nheld.Store(int64(len(a.h.held)))
	if !deliver && !a.armed {
		a.armed = true
		a.timer.Reset(a.hold)
	}
	a.mu.Unlock()
	if k > 0 {
		// The held ACK is of p's flow, so of p's IP version.
		enqueue(g, first[:k], proto)
	}
	return deliver
}

// stop ends the timer; held ACKs are dropped with the stack.
func (a *ackThinning) stop() {
	if a.on() {
		a.timer.Stop()
	}
}

// stats returns the holder's counters.
func (a *ackThinning) stats() (holds, superseded, released uint64) {
	if !a.on() {
		return 0, 0, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.h.holds, a.h.superseded, a.h.released
}

// expireACKs is the timer's callback: it delivers the held ACKs whose
// deadline passed and sets the timer for the next one.
func (n *Net) expireACKs() {
	a := &n.ack
	a.expireMu.Lock()
	defer a.expireMu.Unlock()
	a.mu.Lock()
	now := a.now()
	a.due = a.due[:0]
	next := a.h.expire(now, func(p []byte) {
		var e heldACK
		e.n = copy(e.buf[:], p)
		a.due = append(a.due, e)
	})
	a.nheld.Store(int64(len(a.h.held)))
	a.armed = next != 0
	if a.armed {
		// Deadlines of many flows are spread out; waking for each would
		// cost more than the thinning saves. Wake at most every quarter
		// hold: an ACK waits at most 1.25 holds.
		a.timer.Reset(max(time.Duration(next-now), a.hold/4))
	}
	a.mu.Unlock()
	if len(a.due) == 0 {
		return
	}
	n.closeMu.RLock()
	defer n.closeMu.RUnlock()
	if n.closed {
		return
	}
	d := n.ep.getDispatcher()
	if d == nil {
		return
	}
	g := <-n.gros
	defer func() { n.gros <- g }()
	g.Dispatcher = d
	for i := range a.due {
		p := a.due[i].buf[:a.due[i].n]
		proto := header.IPv4ProtocolNumber
		if packet.Version(p) == 6 {
			proto = header.IPv6ProtocolNumber
		}
		enqueue(g, p, proto)
	}
	g.Flush()
}
