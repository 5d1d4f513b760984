// Package ratelimit limits handshake messages per source address with token
// buckets, so that a flood from one address cannot crowd out the others,
// and bounds the handshake work a device does in all, by count (Bucket),
// by the time it takes (Share) and by the reads it spends (Pacer), however
// many addresses a flood comes from. It is pure: the caller passes the
// time in.
package ratelimit

import (
	"net/netip"
	"sync"
	"time"
)

// Options configure a Limiter; the zero value gives 20 handshakes per second
// per address with a burst of 5, tracking at most 4096 addresses.
type Options struct {
	PerSecond  int
	Burst      int
	MaxEntries int
}

// Limiter is a set of token buckets keyed by address. IPv6 addresses share a
// bucket per /64, since one host can hold a whole /64.
type Limiter struct {
	mu        sync.Mutex // guards entries and lastEvict
	opts      Options
	cost      time.Duration // time it takes to earn one token
	entries   map[netip.Addr]*bucket
	lastEvict time.Time
}

type bucket struct {
	tokens time.Duration // tokens, in units of time earned
	last   time.Time
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.PerSecond <= 0 {
		o.PerSecond = 20
	}
	if o.Burst <= 0 {
		o.Burst = 5
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 4096
	}
	return &Limiter{opts: o, cost: time.Second / time.Duration(o.PerSecond), entries: make(map[netip.Addr]*bucket)}
}

func key(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// Allow takes a token from a's bucket and reports whether there was one.
func (l *Limiter) Allow(a netip.Addr, now time.Time) bool {
	k := key(a)
	max := l.cost * time.Duration(l.opts.Burst)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.entries[k]
	if b == nil {
		if len(l.entries) >= l.opts.MaxEntries {
			l.evictLocked(now)
		}
		if len(l.entries) >= l.opts.MaxEntries {
			// Every tracked address is active. Refusing new ones would let
			// a flood from many addresses lock out every source it has
			// not seen, legitimate peers first; forget one tracked address
			// instead (Go's map order picks it at random, in O(1)). The
			// forgotten source can at most get one more burst.
			for victim := range l.entries {
				delete(l.entries, victim)
				break
			}
		}
		b = &bucket{tokens: max, last: now}
		l.entries[k] = b
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(max, b.tokens+el)
	}
	b.last = now
	if b.tokens < l.cost {
		return false
	}
	b.tokens -= l.cost
	return true
}

// evictLocked drops buckets that have refilled completely: forgetting them
// changes no decision. It scans the whole table, so it runs only when the
// table is full, and lastEvict keeps a flood of new sources from making
// every message pay for a scan.
func (l *Limiter) evictLocked(now time.Time) {
	if now.Sub(l.lastEvict) < l.cost {
		return
	}
	l.lastEvict = now
	full := l.cost * time.Duration(l.opts.Burst)
	for k, b := range l.entries {
		if b.tokens+now.Sub(b.last) >= full {
			delete(l.entries, k)
		}
	}
}

// Len is the number of addresses tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}
