package ratelimit

import (
	"sync"
	"time"
)

// budget is time earned at one unit per cost, up to max: the state that
// Bucket and Pacer share. It is not safe for concurrent use.
type budget struct {
	cost   time.Duration
	max    time.Duration
	credit time.Duration // earned time; a Pacer's goes negative for debt
	last   time.Time
}

// newBudget returns a full budget; perSecond and burst below 1 count as 1.
func newBudget(perSecond, burst int) budget {
	cost := time.Second / time.Duration(max(1, perSecond))
	m := cost * time.Duration(max(1, burst))
	return budget{cost: cost, max: m, credit: m}
}

// earn adds the time since the last call, up to max; a clock that goes
// back earns nothing.
func (b *budget) earn(now time.Time) {
	if b.last.IsZero() {
		b.last = now
	}
	if el := now.Sub(b.last); el > 0 {
		b.credit = min(b.max, b.credit+el)
		b.last = now
	}
}

// Bucket is a single token bucket: PerSecond tokens a second, up to Burst
// at once. The device uses one to bound the Diffie-Hellman work it does
// for strangers under load, however many source addresses they hold valid
// cookies for: per-address buckets cannot, since a flood from more
// addresses than the Limiter tracks gets a fresh burst for each. It is
// pure (the caller passes the time) and safe for concurrent use.
type Bucket struct {
	mu sync.Mutex // guards b
	b  budget
}

// NewBucket returns a full Bucket; perSecond and burst below 1 count as 1.
func NewBucket(perSecond, burst int) *Bucket {
	return &Bucket{b: newBudget(perSecond, burst)}
}

// Allow takes a token and reports whether there was one.
func (b *Bucket) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.earn(now)
	if b.b.credit < b.b.cost {
		return false
	}
	b.b.credit -= b.b.cost
	return true
}

// Refund gives back a token taken by Allow, up to Burst: for work that
// turned out not to be what the bucket bounds.
func (b *Bucket) Refund() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.credit = min(b.b.max, b.b.credit+b.b.cost)
}

// Pacer spaces work out to PerSecond units a second with bursts of up to
// Burst, by telling its one caller how long to wait rather than refusing:
// a reader that waits leaves the excess to the kernel, which drops it at
// the socket for much less than reading it costs. It is pure (the caller
// passes the time) and not safe for concurrent use.
type Pacer struct{ b budget }

// NewPacer returns a Pacer with a full burst; perSecond and burst below 1
// count as 1.
func NewPacer(perSecond, burst int) *Pacer {
	return &Pacer{b: newBudget(perSecond, burst)}
}

// Refund gives back n units spent on work that turned out not to be what
// the pacing bounds, up to the burst.
func (p *Pacer) Refund(n int) {
	p.b.credit = min(p.b.max, p.b.credit+time.Duration(n)*p.b.cost)
}

// Spend charges n units at now and returns how long the caller should
// wait before the next unit: zero while the burst lasts. The debt is
// capped at a second, so one huge charge never earns a longer wait.
func (p *Pacer) Spend(n int, now time.Time) time.Duration {
	p.b.earn(now)
	p.b.credit = max(-time.Second, p.b.credit-time.Duration(n)*p.b.cost)
	if p.b.credit >= 0 {
		return 0
	}
	return -p.b.credit
}
