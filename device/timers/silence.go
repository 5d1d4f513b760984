package timers

import "time"

// DefaultSilenceTimeout is the default Params.SilenceTimeout.
//
// Why 2 s: a peer counts as answering promptly when its last answer to our
// data came within half of it (1 s), which covers a ping's round trip, a
// delayed TCP ACK (at most 500 ms) and a loaded queue; a peer that answered
// within 1 s and is now silent for twice that is most likely gone (a
// restarted daemon that cannot decrypt our session), not slow. It stays
// well under KeepaliveTimeout+RekeyTimeout, which is what every WireGuard
// otherwise waits.
const DefaultSilenceTimeout = 2 * time.Second

// silence is the state of the early new-handshake rule: the regular rule
// starts a handshake KeepaliveTimeout+RekeyTimeout after data went
// unanswered, because a peer that only receives answers with a passive
// keepalive after KeepaliveTimeout. A peer that has been answering our data
// within SilenceTimeout/2 (a request/response flow: pings, TCP ACKs) gives
// no reason to wait that long, so for it the same deadline is armed at
// SilenceTimeout instead.
//
// The early deadline never breaks the protocol's pacing: it is not armed
// while a handshake series is open, it lies at least RekeyTimeout after our
// last initiation, and at least KeepaliveTimeout+RekeyTimeout after the
// previous early one, so it never starts handshakes more often than the
// regular rule could. Firing it spends the evidence (prompt is cleared):
// another early handshake needs another prompt answer first.
type silence struct {
	// sentAt is the first data send not yet answered (when newHandshake
	// was armed); regularAt is the regular deadline for it; early says
	// newHandshake is armed earlier than regularAt.
	sentAt    time.Time
	regularAt time.Time
	early     bool
	// prompt: the peer's last answer came within SilenceTimeout/2 of
	// the first data it answered.
	prompt bool
	// lastInit is our last initiation, lastEarly the last early deadline
	// that fired; zero when none.
	lastInit  time.Time
	lastEarly time.Time
}

// newHandshakeAt returns when the new-handshake deadline for data first
// sent unanswered at now should be, and records which rule chose it.
func (t *Timers) newHandshakeAt(now time.Time, jitter time.Duration) time.Time {
	p := t.params()
	s := t.silenceState()
	s.sentAt = now
	s.regularAt = now.Add(p.KeepaliveTimeout + p.RekeyTimeout + jitter)
	s.early = false
	if !s.prompt || t.inAttempt {
		return s.regularAt
	}
	at := now.Add(p.SilenceTimeout + jitter)
	if !s.lastInit.IsZero() {
		at = latest(at, s.lastInit.Add(p.RekeyTimeout))
	}
	if !s.lastEarly.IsZero() {
		at = latest(at, s.lastEarly.Add(p.KeepaliveTimeout+p.RekeyTimeout))
	}
	if !at.Before(s.regularAt) {
		return s.regularAt
	}
	s.early = true
	return at
}

// answered records an authenticated packet from the peer while our data
// was unanswered: was it prompt?
func (s *silence) answered(now time.Time, p Params) {
	s.prompt = now.Sub(s.sentAt) <= p.SilenceTimeout/2
	s.early = false
}

// initiated records our initiation; an open series takes over from the
// early deadline, which falls back to the regular one.
func (t *Timers) silenceInitiated(now time.Time) {
	s := t.silenceState()
	s.lastInit = now
	if t.newHandshake.armed && s.early {
		t.newHandshake.arm(s.regularAt)
		s.early = false
	}
}

// fired records that the new-handshake deadline passed.
func (s *silence) fired(now time.Time) {
	if s.early {
		s.lastEarly = now
		s.prompt = false
		s.early = false
	}
}

// silenceState returns the rule's state, allocating it on first use.
func (t *Timers) silenceState() *silence {
	if t.silence == nil {
		t.silence = new(silence)
	}
	return t.silence
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
