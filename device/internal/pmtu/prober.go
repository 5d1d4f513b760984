package pmtu

import "time"

// Prober searches one endpoint's path for the largest plaintext a probe
// carries, RFC 8899 style: probes are padded packets that need an answer,
// so neither ICMP nor a loss the application sees is needed. Sizes are
// plaintext lengths (the inner packet the datagram could carry); the
// caller turns them into datagrams. It is pure: every call takes now.
//
// The search, one probe in flight at a time and at most maxAttempts per
// size:
//   - the tunnel's MTU (Max) first: most paths carry it, and one answered
//     probe settles them;
//   - lost: the base size (Min), to learn whether the peer answers probes
//     at all. A peer that never answers (a stock WireGuard) is left alone
//     until the next search (RaiseInterval later);
//   - answered: a binary search between Min and Max in steps of 16 bytes
//     (WireGuard pads plaintexts to 16).
//
// What the search found is the path's limit only once a larger size was
// lost (Capped); an answered Max is a floor: nothing larger was tried.
// A completed search is repeated after RaiseInterval, from Max down to
// what was found, as a path may have grown; SetMax (the tunnel's MTU
// changed) searches upward from a floor at once; Reset starts over at once
// (the endpoint moved).
// Between searches, the size found is confirmed every ConfirmInterval (one
// probe, when set): a path that shrank loses it three times, which starts
// a search below it at once (RFC 8899's black hole detection, by probe).
//
// A probe is lost after Timeout until an answer has measured the round
// trip, then after four smoothed round trips (at least minTimeout, at most
// maxTimeout): on most paths a loss is judged in a fraction of a second,
// not seconds. An answer that comes after its probe was judged lost still
// counts, so a timeout too short costs probes, never a wrong result.
type Prober struct {
	opts ProberOptions

	phase    phase
	lo, hi   int // lo: largest answered (0: none); hi: smallest lost (0: none)
	size     int // the size in flight or to send next
	attempts int // probes of size sent so far
	due      time.Time
	raiseAt  time.Time // when an idle prober searches again
	result   int       // the last search's answer, 0: none
	capped   bool      // a size above result was lost: result is the limit
	sentAt   time.Time // when the first probe of size went, for the RTT
	srtt     time.Duration
}

// ProberOptions are a Prober's sizes and times; zero picks defaults.
type ProberOptions struct {
	Min, Max int // plaintext sizes: the base every path must carry, the tunnel's MTU
	// Timeout is how long a probe waits for its answer before any answer
	// measured the round trip (default 400 ms).
	Timeout       time.Duration
	RaiseInterval time.Duration // from one search's end to the next (default 10 min)
	// ConfirmInterval is how often an idle prober probes the size found
	// (0: never).
	ConfirmInterval time.Duration
}

type phase uint8

const (
	phaseMax phase = iota
	phaseBase
	phaseSearch
	phaseIdle
	phaseConfirm
)

const (
	maxAttempts = 3 // RFC 8899's MAX_PROBES
	step        = 16
	minTimeout  = 50 * time.Millisecond
	maxTimeout  = 2 * time.Second
)

// NewProber returns a prober whose first probe is due at now.
func NewProber(o ProberOptions, now time.Time) *Prober {
	if o.Timeout <= 0 {
		o.Timeout = 400 * time.Millisecond
	}
	if o.RaiseInterval <= 0 {
		o.RaiseInterval = 10 * time.Minute
	}
	o.Min = max(o.Min, step)
	o.Max = max(o.Max, o.Min)
	p := &Prober{opts: o}
	p.Reset(now)
	return p
}

// Reset forgets what the path carried and starts a search at now.
func (p *Prober) Reset(now time.Time) {
	p.result, p.capped = 0, false
	p.start(now)
}

// SetMax changes the largest size searched (the tunnel's MTU). A result
// that reaches the new top is a floor at the top; a floor below it starts
// an upward search at now; a limit found stays.
func (p *Prober) SetMax(m int, now time.Time) {
	m = max(m, p.opts.Min)
	if m == p.opts.Max {
		return
	}
	p.opts.Max = m
	switch {
	case p.result >= m:
		p.result, p.capped = m, false
		p.idle(now)
	case p.result == 0 || !p.capped:
		p.start(now)
	case p.Searching():
		p.start(now) // the search's bounds were for the old top
	}
}

func (p *Prober) start(now time.Time) {
	p.phase, p.lo, p.hi = phaseMax, 0, 0
	p.size, p.attempts, p.due = p.opts.Max, 0, now
}

// Result is the largest plaintext the path was found to carry, 0 when no
// search has answered yet (or the peer does not answer probes).
func (p *Prober) Result() int { return p.result }

// Capped reports whether Result is the path's limit (a larger probe was
// lost), not only a floor.
func (p *Prober) Capped() bool { return p.capped }

// Searching reports whether a search is under way.
func (p *Prober) Searching() bool { return p.phase != phaseIdle && p.phase != phaseConfirm }

// Due is when Poll next has something to do.
func (p *Prober) Due() time.Time { return p.due }

// Poll returns the size of a probe to send now, or 0 for none; the caller
// sends it and calls Poll again at Due (or when Acked says so).
func (p *Prober) Poll(now time.Time) int {
	if now.Before(p.due) {
		return 0
	}
	if p.phase == phaseIdle {
		if p.result > 0 && p.opts.ConfirmInterval > 0 && now.Before(p.raiseAt) {
			p.next(phaseConfirm, p.result)
		} else {
			p.start(now)
		}
	}
	if p.attempts == maxAttempts {
		p.lost(now)
		if p.phase == phaseIdle {
			return 0
		}
	}
	p.attempts++
	if p.attempts == 1 {
		p.sentAt = now
	}
	p.due = now.Add(p.timeout())
	return p.size
}

// timeout is how long the probe just sent waits for its answer.
func (p *Prober) timeout() time.Duration {
	if p.srtt == 0 {
		return p.opts.Timeout
	}
	return min(max(4*p.srtt, minTimeout), maxTimeout)
}

// sample takes the round trip of an answer to the size in flight, if it
// answers its first probe (Karn: a resent probe's answer is ambiguous).
func (p *Prober) sample(size int, now time.Time) {
	if size != p.size || p.attempts != 1 || p.sentAt.IsZero() {
		return
	}
	rtt := max(now.Sub(p.sentAt), time.Millisecond)
	if p.srtt == 0 {
		p.srtt = rtt
	} else {
		p.srtt = (7*p.srtt + rtt) / 8
	}
}

// lost moves on after maxAttempts unanswered probes of p.size.
func (p *Prober) lost(now time.Time) {
	switch p.phase {
	case phaseMax:
		p.hi = p.opts.Max
		if p.result >= p.opts.Max {
			p.result = 0 // what carried Max before carries it no longer
		}
		if p.result > 0 {
			// A floor known: the path's limit lies between it and Max.
			p.lo, p.capped = p.result, true
			p.bisect(now)
			return
		}
		p.next(phaseBase, p.opts.Min)
	case phaseBase:
		// The peer answers no probes, or the path carries not even the
		// base: nothing is learned, and the path is left to the kernel.
		p.result, p.capped = 0, false
		p.idle(now)
	case phaseSearch:
		p.hi = p.size
		p.capped = p.result > 0
		p.bisect(now)
	case phaseConfirm:
		// The path no longer carries what it did: search below it at
		// once, and until then claim nothing.
		p.lo, p.hi = 0, p.size
		p.result, p.capped = 0, false
		p.next(phaseBase, p.opts.Min)
	}
}

func (p *Prober) next(ph phase, size int) {
	p.phase, p.size, p.attempts = ph, size, 0
}

func (p *Prober) idle(now time.Time) {
	p.phase, p.attempts = phaseIdle, 0
	p.raiseAt = now.Add(p.opts.RaiseInterval)
	p.due = p.raiseAt
	p.confirmLater(now)
}

// confirmLater makes an idle prober's next due its next confirmation.
func (p *Prober) confirmLater(now time.Time) {
	if c := now.Add(p.opts.ConfirmInterval); p.result > 0 && p.opts.ConfirmInterval > 0 && c.Before(p.raiseAt) {
		p.due = c
	}
}

// Acked records the answer to a probe of size (a late one counts too). It
// returns true when the caller should Poll at once: the search moved on.
func (p *Prober) Acked(size int, now time.Time) bool {
	p.sample(size, now)
	if p.phase == phaseConfirm && size == p.size {
		p.phase, p.attempts = phaseIdle, 0
		p.due = p.raiseAt
		p.confirmLater(now)
		return false
	}
	if size <= 0 || size > p.opts.Max || size <= p.lo {
		return false
	}
	p.lo = size
	if p.hi != 0 && p.hi <= size {
		p.hi = 0 // a loss that was not one
	}
	switch {
	case size >= p.opts.Max:
		p.result, p.capped = p.opts.Max, false
		p.idle(now)
		return false
	case p.phase == phaseIdle:
		p.result = max(p.result, size) // a late answer: the path carried it
		return false
	}
	p.result = max(p.result, size)
	p.capped = p.hi != 0
	if p.hi == 0 {
		p.hi = p.opts.Max
	}
	p.bisect(now)
	return p.phase != phaseIdle
}

// bisect picks the next size between lo and hi, or ends the search.
func (p *Prober) bisect(now time.Time) {
	if p.lo == 0 {
		// Nothing carried yet: go down from the loss.
		p.next(phaseBase, p.opts.Min)
		p.due = now
		return
	}
	if p.hi-p.lo <= step {
		p.result, p.capped = p.lo, true
		p.idle(now)
		return
	}
	mid := (p.lo + (p.hi-p.lo)/2) &^ (step - 1)
	if mid <= p.lo {
		mid = p.lo + step
	}
	p.next(phaseSearch, mid)
	p.due = now
}
