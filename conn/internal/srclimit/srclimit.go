// Package srclimit limits how often each source may do something costly:
// a token bucket per source prefix (an IPv4 address, an IPv6 /64, since
// one IPv6 host is usually given a whole /64), kept in a table of fixed
// size. It does no I/O and reads no clock: the caller passes the time in.
//
// The table never locks out a source it has not seen: when it is full,
// the source used least recently is forgotten, and a forgotten source
// starts again with a full bucket. So the limit holds for sources that
// come back often, which is what a loop of connections from one host
// does, and costs a fixed amount of memory whatever the number of
// sources.
package srclimit

import (
	"net/netip"
	"time"
)

// Options configure a Limiter. The zero value is a good default for the
// TLS handshakes of a stream listener.
type Options struct {
	// Burst is how many events a source may have at once (default
	// DefaultBurst).
	Burst int
	// Every is how often a source gets one more, up to Burst (default
	// DefaultEvery).
	Every time.Duration
	// Sources caps the sources remembered (default DefaultSources).
	Sources int
}

const (
	// DefaultBurst covers a client that races TCP and TLS and then
	// reconnects a few times in a row.
	DefaultBurst = 8
	// DefaultEvery lets a source have four a second, steadily.
	DefaultEvery = 250 * time.Millisecond
	// DefaultSources caps the table: a few hundred KiB at most.
	DefaultSources = 4096
)

// Limiter is the table. It is not safe for concurrent use: the caller
// holds a lock around Allow.
type Limiter struct {
	burst time.Duration // Burst * Every: how far ahead of now a bucket may be
	every time.Duration
	max   int

	idx        map[netip.Addr]int32 // source prefix -> index into ents
	ents       []entry
	head, tail int32 // most and least recently used, none when -1
}

// entry is one source's bucket, kept as the time at which it would be full
// again (a generic cell rate algorithm's "theoretical arrival time"): one
// time instead of a count and a time, and nothing to refill.
type entry struct {
	key        netip.Addr
	full       time.Time
	prev, next int32 // the recency list
}

// New returns an empty Limiter; it allocates as sources arrive, up to the
// cap.
func New(o Options) *Limiter {
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Sources <= 0 {
		o.Sources = DefaultSources
	}
	return &Limiter{
		burst: time.Duration(o.Burst) * o.Every,
		every: o.Every,
		max:   o.Sources,
		idx:   make(map[netip.Addr]int32),
		head:  -1,
		tail:  -1,
	}
}

// Key is the prefix a source address is limited by: an IPv4 address
// (IPv4-mapped IPv6 included) as itself, an IPv6 address by its /64.
func Key(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// Allow reports whether src may have one more event at now, and takes it
// from its bucket when so. A refusal costs the source nothing: it may
// have the next event as soon as its bucket refills, however often it
// was refused meanwhile.
func (l *Limiter) Allow(src netip.Addr, now time.Time) bool {
	e := l.get(Key(src), now)
	at := e.full
	if at.Before(now) {
		at = now
	}
	at = at.Add(l.every)
	if at.Sub(now) > l.burst {
		return false
	}
	e.full = at
	return true
}

// Len is how many sources the table remembers.
func (l *Limiter) Len() int { return len(l.idx) }

// get returns k's entry, made (with a full bucket) when k is new, and
// marks it used most recently.
func (l *Limiter) get(k netip.Addr, now time.Time) *entry {
	if i, ok := l.idx[k]; ok {
		l.unlink(i)
		l.pushFront(i)
		return &l.ents[i]
	}
	var i int32
	if len(l.ents) < l.max {
		i = int32(len(l.ents))
		l.ents = append(l.ents, entry{})
	} else {
		i = l.tail
		delete(l.idx, l.ents[i].key)
		l.unlink(i)
	}
	l.ents[i] = entry{key: k, full: now}
	l.idx[k] = i
	l.pushFront(i)
	return &l.ents[i]
}

func (l *Limiter) unlink(i int32) {
	e := &l.ents[i]
	if e.prev >= 0 {
		l.ents[e.prev].next = e.next
	} else {
		l.head = e.next
	}
	if e.next >= 0 {
		l.ents[e.next].prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (l *Limiter) pushFront(i int32) {
	e := &l.ents[i]
	e.prev, e.next = -1, l.head
	if l.head >= 0 {
		l.ents[l.head].prev = i
	}
	l.head = i
	if l.tail < 0 {
		l.tail = i
	}
}
