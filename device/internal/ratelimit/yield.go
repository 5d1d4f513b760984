package ratelimit

import (
	"sync"
	"time"
)

// YieldWindow is the span over which a Yield weighs outcomes: the last
// whole window and the current one, the older one fading out linearly.
const YieldWindow = time.Second

// yieldEvidence is how many recent outcomes a Yield needs before it may
// call the work productive.
const yieldEvidence = 32

// Yield tells a device's handshake load that pays (configured peers
// reconnecting together, every initiation answered) from load that does
// not (a flood, answered never): after the Diffie-Hellman work the two no
// longer look alike. It counts, over about the last YieldWindow, the
// initiations the device worked on and how many of them it answered.
// Productive holds once there are at least 32 outcomes to judge by and at
// least half of them were answered: without evidence the load is taken
// for a flood, as it was before the Diffie-Hellman work could tell. It is pure (the caller passes
// the time) and safe for concurrent use.
type Yield struct {
	mu          sync.Mutex // guards the fields below
	start       time.Time  // of the current window
	tried, ok   int        // in the current window
	pTried, pOK int        // in the window before it
}

// Record adds the outcome of one initiation worked on at now.
func (y *Yield) Record(answered bool, now time.Time) {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.roll(now)
	y.tried++
	if answered {
		y.ok++
	}
}

// Productive reports whether the recent work was mostly answered (see
// Yield).
func (y *Yield) Productive(now time.Time) bool {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.roll(now)
	// The window before counts for the part of it still within
	// YieldWindow of now.
	left := YieldWindow - now.Sub(y.start)
	if left < 0 {
		left = 0
	}
	tried := y.tried + int(int64(y.pTried)*int64(left)/int64(YieldWindow))
	ok := y.ok + int(int64(y.pOK)*int64(left)/int64(YieldWindow))
	return tried >= yieldEvidence && 2*ok >= tried
}

// roll starts a new window when the current one is over; a clock that
// goes back keeps the current one.
func (y *Yield) roll(now time.Time) {
	if y.start.IsZero() {
		y.start = now
		return
	}
	el := now.Sub(y.start)
	switch {
	case el < YieldWindow:
		return
	case el < 2*YieldWindow:
		y.pTried, y.pOK = y.tried, y.ok
		y.start = y.start.Add(YieldWindow)
	default:
		y.pTried, y.pOK = 0, 0
		y.start = now
	}
	y.tried, y.ok = 0, 0
}
