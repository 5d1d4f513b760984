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
	mu     sync.Mutex // guards the fields below
	ppm    int64      // parts per million of elapsed time that may be spent
	max    time.Duration
	credit time.Duration // may go negative, down to -max
	last   time.Time
}

// NewShare returns a Share with a full burst: perMillion millionths of
// elapsed time may be spent, and up to burst of it at once (the credit
// saved while idle). perMillion below 1 counts as 1, burst below 1 ns as
// 1 ns.
func NewShare(perMillion int, burst time.Duration) *Share {
	return &Share{ppm: int64(max(1, perMillion)), max: max(1, burst), credit: max(1, burst)}
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

// earn adds ppm of the time since the last call, up to max; a clock that
// goes back earns nothing.
func (s *Share) earn(now time.Time) {
	if s.last.IsZero() {
		s.last = now
	}
	if el := now.Sub(s.last); el > 0 {
		s.credit = min(s.max, s.credit+time.Duration(int64(el)/1e6*s.ppm+int64(el)%1e6*s.ppm/1e6))
		s.last = now
	}
}
