package ratelimit

import (
	"sync"
	"time"
)

// Share admits work while the work it admitted has taken no more than a
// fraction of the time that passed: work is charged what it took, after
// it ran, so a piece of work that costs more (a slower machine, a CPU
// shared with a flood) leaves room for fewer. The device bounds the
// Diffie-Hellman work it does for strangers under load this way; a count
// a second (Bucket) would cost a slow machine several times the CPU it
// costs a fast one. It is pure (the caller passes the time and the
// charge) and safe for concurrent use.
type Share struct {
	mu     sync.Mutex    // guards the fields below
	rate   time.Duration // may be spent per second of elapsed time
	max    time.Duration
	credit time.Duration // may go negative, down to -max
	last   time.Time
}

// NewShare returns a Share with a full burst: perSecond of each second
// may be spent (at most all of it), and up to burst at once (the credit
// saved while idle). Values below 1 ns count as 1 ns.
func NewShare(perSecond, burst time.Duration) *Share {
	return &Share{rate: min(max(1, perSecond), time.Second), max: max(1, burst), credit: max(1, burst)}
}

// Allow reports whether work may start at now: whether the credit earned
// up to now covers the charges so far.
func (s *Share) Allow(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.earn(now)
	return s.credit > 0
}

// Charge takes the time that admitted work took. The debt is capped at
// the burst, so one piece of work that took very long (the thread
// preempted mid-way) stops further work for at most burst/share.
func (s *Share) Charge(took time.Duration) {
	if took <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.credit = max(-s.max, s.credit-took)
}

// earn adds rate per second of the time since the last call, up to max;
// a clock that goes back earns nothing.
func (s *Share) earn(now time.Time) {
	if s.last.IsZero() {
		s.last = now
	}
	if el := now.Sub(s.last); el > 0 {
		// Whole seconds and the rest apart, so the product cannot overflow.
		sec, rest := el/time.Second, el%time.Second
		s.credit = min(s.max, s.credit+sec*s.rate+rest*s.rate/time.Second)
		s.last = now
	}
}
