package ratelimit

import (
	"sync"
	"time"
)

// Bucket is a single token bucket: PerSecond tokens a second, up to Burst
// at once. The device uses one to bound the Diffie-Hellman work it does
// for strangers under load, however many source addresses they hold valid
// cookies for: per-address buckets cannot, since a flood from more
// addresses than the Limiter tracks gets a fresh burst for each. It is
// pure (the caller passes the time) and safe for concurrent use.
type Bucket struct {
	mu     sync.Mutex // guards tokens and last
	cost   time.Duration
	max    time.Duration
	tokens time.Duration // in units of time earned
	last   time.Time
}

// NewBucket returns a full Bucket; perSecond and burst below 1 count as 1.
func NewBucket(perSecond, burst int) *Bucket {
	cost := time.Second / time.Duration(max(1, perSecond))
	m := cost * time.Duration(max(1, burst))
	return &Bucket{cost: cost, max: m, tokens: m}
}

// Allow takes a token and reports whether there was one.
func (b *Bucket) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.last = now
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.max, b.tokens+el)
		b.last = now
	}
	if b.tokens < b.cost {
		return false
	}
	b.tokens -= b.cost
	return true
}

// Pacer spaces work out to PerSecond units a second with bursts of up to
// Burst, by telling its one caller how long to wait rather than refusing:
// a reader that waits leaves the excess to the kernel, which drops it at
// the socket for much less than reading it costs. It is pure (the caller
// passes the time) and not safe for concurrent use.
type Pacer struct {
	cost   time.Duration
	max    time.Duration
	credit time.Duration // earned time; negative is debt to wait out
	last   time.Time
}

// NewPacer returns a Pacer with a full burst; perSecond and burst below 1
// count as 1.
func NewPacer(perSecond, burst int) *Pacer {
	cost := time.Second / time.Duration(max(1, perSecond))
	m := cost * time.Duration(max(1, burst))
	return &Pacer{cost: cost, max: m, credit: m}
}

// Spend charges n units at now and returns how long the caller should
// wait before the next unit: zero while the burst lasts. The debt is
// capped at a second, so one huge charge never earns a longer wait.
func (p *Pacer) Spend(n int, now time.Time) time.Duration {
	if p.last.IsZero() {
		p.last = now
	}
	if el := now.Sub(p.last); el > 0 {
		p.credit = min(p.max, p.credit+el)
		p.last = now
	}
	p.credit = max(-time.Second, p.credit-time.Duration(n)*p.cost)
	if p.credit >= 0 {
		return 0
	}
	return -p.credit
}
