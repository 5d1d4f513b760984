package device

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/noise"
)

// hsQueue is a bounded queue of handshake messages with buffers of its
// own: a flood that fills one queue cannot take the buffers of another. It
// holds up to base messages, and up to deep while the device's handshake
// work pays (a restart storm, see put); base buffers are allocated up
// front, the rest only while a backlog needs them and let go after.
type hsQueue struct {
	q     chan *hsMsg // capacity deep
	free  chan *hsMsg // capacity base: the buffers past it are not kept
	base  int
	deep  int
	extra atomic.Int32 // buffers allocated past base, at most deep-base
}

// hsBacklog is how many times Options.handshakeQueue the anonymous queue
// holds while the initiations worked on are mostly answered: 16,384
// messages by default, a second of a 10,000-peer restart storm and the
// two seconds of work it takes, about 3.6 MiB at most.
const hsBacklog = 16

func newHSQueue(base, deep int) *hsQueue {
	deep = max(base, deep)
	h := &hsQueue{q: make(chan *hsMsg, deep), free: make(chan *hsMsg, base), base: base, deep: deep}
	for range base {
		h.free <- new(hsMsg)
	}
	return h
}

// put queues a copy of msg; false when the queue is full: at base
// messages, or at deep when deep is set.
func (h *hsQueue) put(msg []byte, ep conn.Endpoint, slot hsSlot, deep bool) bool {
	if !deep && len(h.q) >= h.base {
		return false
	}
	var m *hsMsg
	select {
	case m = <-h.free:
	default:
		if !deep || !h.grow() {
			return false
		}
		m = new(hsMsg)
	}
	m.n = copy(m.buf[:], msg)
	m.ep = ep
	m.slot = slot
	h.q <- m // cannot block: a message only exists with its slot
	return true
}

// grow reserves one buffer past base, if the cap allows.
func (h *hsQueue) grow() bool {
	for {
		n := h.extra.Load()
		if int(n) >= h.deep-h.base {
			return false
		}
		if h.extra.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release takes back a message's buffer once it was handled: onto the
// free list up to base buffers, to the collector past it. Every buffer
// past base was counted by grow, so one that finds the free list full
// gives its count back.
func (h *hsQueue) release(m *hsMsg) {
	m.ep = conn.Endpoint{}
	select {
	case h.free <- m:
	default:
		h.extra.Add(-1)
	}
}

// triage decides, on the receive goroutine, where a handshake message of
// the right size goes: nil drops it (counted by the caller), or the queue
// to put it in, and for an initiation without MAC2 under load, the slot it
// took (see handleHandshake). MAC1 is checked here, not by the workers: it is cheap, and
// a message without it must not take a slot that a real peer's message
// needs. Messages that prove their source (a valid MAC2 while under load),
// answer a handshake we started, or (a few per second per address) come
// from a configured peer's endpoint go to the priority queue, which the
// anonymous flood cannot fill.
func (d *Device) triage(typ uint32, msg []byte, ep conn.Endpoint, now time.Time) (q *hsQueue, drop counterID, slot hsSlot) {
	switch typ {
	case noise.TypeCookieReply:
		if d.startedHandshake(binary.LittleEndian.Uint32(msg[4:8])) {
			return d.flood.hsqPrio, 0, slotPlain
		}
		return d.flood.hsq, 0, slotPlain
	case noise.TypeResponse:
		if !d.validMAC1(msg) {
			return nil, cRxHandshakeBadMAC, slotPlain
		}
		if d.startedHandshake(binary.LittleEndian.Uint32(msg[8:12])) {
			return d.flood.hsqPrio, 0, slotPlain
		}
	case noise.TypeInitiation:
		if !d.validMAC1(msg) {
			return nil, cRxHandshakeBadMAC, slotPlain
		}
	}
	if !d.underLoad(now) {
		return d.flood.hsq, 0, slotPlain
	}
	if d.checker.Load().CheckMAC2(msg, ep.Dst, now) {
		// Each initiation costs a Diffie-Hellman computation: strangers
		// share one budget however many addresses they have cookies for,
		// in time (charged by the worker, see handleHandshake) and count.
		if typ == noise.TypeInitiation && !d.known.has(ep.Dst) && (!d.flood.strangerTime.Allow(now) || !d.flood.strangers.Allow(now)) {
			return nil, cRxHandshakeRateLimited, slotPlain
		}
		return d.flood.hsqPrio, 0, slotPlain
	}
	// An initiation from where a configured peer is: it gets a priority
	// slot to be answered or to earn its cookie (see handleHandshake), at
	// a per-address rate a spoofer of that address cannot exceed.
	if typ == noise.TypeInitiation && d.known.has(ep.Dst) && d.flood.limitKnown.Allow(ep.Dst.Addr(), now) {
		return d.flood.hsqPrio, 0, slotKnown
	}
	// Any other initiation may be answered without a cookie while
	// unanswered ones cost less than Options.anonymousHandshakeTime (see handleHandshake,
	// which pays the cookie budgets below if it turns out it may not).
	if typ == noise.TypeInitiation && d.flood.anonTime != nil && d.flood.anonTime.Allow(now) {
		return d.flood.hsq, 0, slotAnon
	}
	// All the rest can earn is a cookie reply, a send each: bounded per
	// address first, so that one source cannot spend what every stranger's
	// reply comes out of, then in all; a flood turned away here still
	// holds the device in cookie mode.
	if !d.flood.limitCookies.Allow(ep.Dst.Addr(), now) || !d.flood.cookieBudget.Allow(now) {
		d.flood.load.Mark(now)
		return nil, cRxHandshakeRateLimited, slotPlain
	}
	return d.flood.hsq, 0, slotCookie
}

func (d *Device) validMAC1(msg []byte) bool {
	c := d.checker.Load()
	return c != nil && c.CheckMAC1(msg)
}

// startedHandshake reports whether idx names a handshake we initiated and
// are waiting on.
func (d *Device) startedHandshake(idx uint32) bool {
	e, ok := d.index.Lookup(idx)
	return ok && e.kp == nil
}
