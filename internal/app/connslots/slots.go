// Package connslots bounds the connections a server holds open at once
// without letting idle ones keep a client out: at the cap a new
// connection takes the slot of the connection idle longest. The SOCKS5
// and HTTP proxies and the metrics endpoint share it.
package connslots

import (
	"net"
	"sync"
)

// Slots bounds the connections a server serves at once. A connection
// holds a slot from its accept to its end, but while it waits for its
// client to begin (a SOCKS5 greeting, the next request on a keep-alive
// connection) it is idle, and at the cap a new connection closes the one
// idle longest and takes its slot: idle connections, which anyone who
// reaches the listener can open, never keep out a client about to send.
// Only when every slot is busy is a new connection refused.
type Slots struct {
	n     int
	freed chan struct{} // capacity 1; see Freed

	mu   sync.Mutex
	held int                // guarded by mu
	idle map[*Slot]struct{} // guarded by mu
	tick uint64             // guarded by mu; orders the idle, oldest first
}

// Slot is one connection's hold on a Slots.
type Slot struct {
	s     *Slots
	close func()
	// since is s.tick when the connection was accepted or last became
	// busy: "idle longest" counts from when it last began to serve, not
	// from when it went idle, since its client may begin on another
	// connection before this one's goroutine has marked it idle.
	since   uint64 // guarded by s.mu
	evicted bool   // guarded by s.mu; its slot went to another connection
	done    bool   // guarded by s.mu; released
}

// New allows n at once (at least one).
func New(n int) *Slots {
	return &Slots{n: max(n, 1), freed: make(chan struct{}, 1), idle: map[*Slot]struct{}{}}
}

// Cap is the limit.
func (s *Slots) Cap() int { return s.n }

// Freed is signalled when a refused Acquire may now succeed: a slot was
// released, or a connection became idle. A server that waits at the cap
// instead of refusing waits on it between tries.
func (s *Slots) Freed() <-chan struct{} { return s.freed }

func (s *Slots) signal() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// NumIdle counts the idle connections.
func (s *Slots) NumIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}

// Acquire takes a slot, idle, for a new connection that closeFn closes. At
// the cap it closes the connection idle longest and hands its slot over;
// false when every slot is busy.
func (s *Slots) Acquire(closeFn func()) (*Slot, bool) {
	sl := &Slot{s: s, close: closeFn}
	s.mu.Lock()
	var victim *Slot
	if s.held >= s.n {
		for o := range s.idle {
			if victim == nil || o.since < victim.since {
				victim = o
			}
		}
		if victim == nil {
			s.mu.Unlock()
			return nil, false
		}
		delete(s.idle, victim)
		victim.evicted = true
	} else {
		s.held++
	}
	s.tick++
	sl.since = s.tick
	s.idle[sl] = struct{}{}
	s.mu.Unlock()
	if victim != nil {
		victim.close()
	}
	return sl, true
}

// Busy marks the connection as serving its client, so no other takes its
// slot; false when it was closed for another already.
func (sl *Slot) Busy() bool {
	sl.s.mu.Lock()
	defer sl.s.mu.Unlock()
	if sl.evicted || sl.done {
		return false
	}
	delete(sl.s.idle, sl)
	sl.s.tick++
	sl.since = sl.s.tick
	return true
}

// Idle marks the connection as waiting for its client again.
func (sl *Slot) Idle() {
	sl.s.mu.Lock()
	defer sl.s.mu.Unlock()
	if sl.evicted || sl.done {
		return
	}
	sl.s.idle[sl] = struct{}{}
	sl.s.signal()
}

// Release gives the slot back as the connection ends; a connection closed
// for another has given its slot already.
func (sl *Slot) Release() {
	sl.s.mu.Lock()
	defer sl.s.mu.Unlock()
	if sl.done {
		return
	}
	sl.done = true
	delete(sl.s.idle, sl)
	if !sl.evicted {
		sl.s.held--
		sl.s.signal()
	}
}

// BusyOnRead wraps c so that the first byte read from it marks sl busy,
// and a read after sl's connection was closed for another fails.
func BusyOnRead(c net.Conn, sl *Slot) net.Conn { return &busyConn{Conn: c, sl: sl} }

type busyConn struct {
	net.Conn
	sl   *Slot
	busy bool // owned by the reading goroutine
}

func (b *busyConn) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if n > 0 && !b.busy {
		if !b.sl.Busy() {
			return 0, net.ErrClosed
		}
		b.busy = true
	}
	return n, err
}
