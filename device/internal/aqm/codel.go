// Package aqm is the pure part of fips-go's queue management: a sojourn-time
// controller in the style of CoDel (RFC 8289) that decides when a packet
// leaving a queue should carry a congestion signal, and the inner-packet
// helpers that give that signal as an ECN mark where the flow allows it.
// Nothing here reads a clock or touches a socket: callers pass the time.
package aqm

import (
	"math"
	"time"
)

// Defaults for Params' zero fields: a standing queue above a millisecond
// for ten milliseconds is what the controller acts on. CoDel's 5 ms and
// 100 ms are for the Internet's round trips; through a tunnel between
// nearby hosts 10 ms is already a long RTT, and the interval should be
// about one.
const (
	DefaultTarget   = time.Millisecond
	DefaultInterval = 10 * time.Millisecond
)

// Params configure a controller. The zero value is the defaults; a
// negative Target turns the controller off.
type Params struct {
	// Target is the sojourn time a queue may keep standing.
	Target time.Duration
	// Interval is how long the sojourn must stay above Target before the
	// first signal, and the base of the spacing between later ones.
	Interval time.Duration
}

// WithDefaults fills zero fields.
func (p Params) WithDefaults() Params {
	if p.Target == 0 {
		p.Target = DefaultTarget
	}
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	return p
}

// Off reports whether the controller is turned off.
func (p Params) Off() bool { return p.Target < 0 }

// CoDel is one queue's controller state. It is not safe for concurrent use:
// the queue's single consumer owns it. The zero value with Params set by
// New is ready.
type CoDel struct {
	p Params
	// firstAbove is when the sojourn time, above target since then, will
	// have been so for an interval (zero: not above target).
	firstAbove time.Time
	// dropping is the state in which signals are given every dropNext.
	dropping  bool
	dropNext  time.Time
	count     uint32 // signals since dropping began
	lastCount uint32 // count when dropping last ended
}

// New returns a controller with p (defaults filled in).
func New(p Params) CoDel { return CoDel{p: p.WithDefaults()} }

// Signal is called for each packet as it leaves the queue, with how long
// it waited and whether the queue is now empty behind it. It reports
// whether this packet should carry a congestion signal (be marked or
// dropped). The logic is RFC 8289's dequeue path with one packet per call.
func (c *CoDel) Signal(sojourn time.Duration, now time.Time, empty bool) bool {
	if c.p.Off() {
		return false
	}
	if empty && sojourn >= c.p.Target {
		// Never signal the packet that empties the queue: dropping it frees
		// nothing. Unlike RFC 8289 this does not restart the interval or
		// leave the dropping state either: a device hands packets on in
		// batches, so its queue empties after every batch even while a
		// standing queue moves through it; the sojourn time alone says
		// whether one stands.
		if c.firstAbove.IsZero() {
			c.firstAbove = now.Add(c.p.Interval)
		}
		return false
	}
	ok := c.okToSignal(sojourn, now)
	if c.dropping {
		if !ok {
			c.dropping = false
			return false
		}
		if now.Before(c.dropNext) {
			return false
		}
		c.count++
		c.dropNext = c.controlLaw(c.dropNext)
		return true
	}
	if !ok {
		return false
	}
	// Enter the dropping state. If it was left only recently, resume near
	// the rate it had reached, so that a persistent queue is not given
	// the slow start again (RFC 8289 section 5.4).
	c.dropping = true
	delta := c.count - c.lastCount
	c.count = 1
	if c.count < delta && now.Sub(c.dropNext) < 16*c.p.Interval {
		c.count = delta
	}
	c.dropNext = c.controlLaw(now)
	c.lastCount = c.count
	return true
}

// okToSignal tracks how long the sojourn has been above target.
func (c *CoDel) okToSignal(sojourn time.Duration, now time.Time) bool {
	if sojourn < c.p.Target {
		c.firstAbove = time.Time{}
		return false
	}
	if c.firstAbove.IsZero() {
		c.firstAbove = now.Add(c.p.Interval)
		return false
	}
	return !now.Before(c.firstAbove)
}

// controlLaw is the time of the next signal: interval/sqrt(count) after t,
// so signals come faster the longer the queue stands.
func (c *CoDel) controlLaw(t time.Time) time.Time {
	return t.Add(time.Duration(float64(c.p.Interval) / math.Sqrt(float64(c.count))))
}

// Dropping reports whether the controller is in its signalling state.
func (c *CoDel) Dropping() bool { return c.dropping }
