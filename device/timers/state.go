package timers

import (
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

// zeroKeysAfter is how many RejectAfterTime periods without a new session
// pass before all key material is wiped (the paper's 3*Reject-After-Time).
const zeroKeysAfter = 3

// Timers is the timer state of one peer. The zero value is ready and uses
// DefaultParams; New or Init choose other durations.
//
// Timers is not safe for concurrent use; the device guards it with the
// peer's lock. After any event that arms a deadline (DataSent, DataReceived,
// AuthenticatedTraversal, HandshakeInitiated, SessionDerived,
// SetPersistentKeepalive) Next may move earlier, so the device reschedules
// the peer then. Disarming events only move Next later; a scheduler that
// wakes too early is harmless because Due never acts before a deadline.
type Timers struct {
	p Params // unset fields resolved by params()

	// retransmit: our initiation went unanswered for RekeyTimeout+jitter.
	retransmit deadline
	// newHandshake: we sent data and heard nothing back for
	// KeepaliveTimeout+RekeyTimeout+jitter.
	newHandshake deadline
	// keepalive: we received data and sent nothing back for
	// KeepaliveTimeout (passive keepalive).
	keepalive deadline
	// persistent: no authenticated packet either way for the persistent
	// keepalive interval.
	persistent deadline
	// zeroKeys: no new session for 3*RejectAfterTime.
	zeroKeys deadline

	// attemptStart is when the open series of handshake attempts began;
	// inAttempt is whether one is open. A series ends with
	// HandshakeComplete, GiveUp or Stop.
	attemptStart time.Time
	inAttempt    bool
	// needAnotherKeepalive records data received while a keepalive was
	// already pending, so that if the keepalive fires but is never sent
	// (AuthenticatedSent does not follow) another one is scheduled.
	needAnotherKeepalive bool
	persistentInterval   time.Duration
	// silence holds the early new-handshake rule's state (silence.go),
	// allocated on first use: a configured peer that never carries
	// traffic pays only the pointer.
	silence *silence
}

// New returns Timers using p (zero fields take the protocol defaults).
func New(p Params) *Timers {
	t := new(Timers)
	t.Init(p)
	return t
}

// Init resets t to a fresh state using p, for Timers embedded in a larger
// struct.
func (t *Timers) Init(p Params) {
	*t = Timers{p: p.WithDefaults()}
}

// params returns the durations in force. Init stores them with defaults
// filled in, so an unset RekeyTimeout means a zero Timers that was never
// initialized.
func (t *Timers) params() Params {
	if t.p.RekeyTimeout == 0 {
		return DefaultParams()
	}
	return t.p
}

// clampJitter keeps caller-supplied jitter inside [0, RekeyTimeoutJitterMax]
// so that a bad random source cannot push a deadline into the past or far
// into the future.
func clampJitter(j time.Duration) time.Duration {
	return min(max(j, 0), noise.RekeyTimeoutJitterMax)
}

// DataSent records that a data packet (not a keepalive) was sent. If no
// new-handshake deadline is armed, one is armed at
// now+KeepaliveTimeout+RekeyTimeout+jitter: a live peer answers data (with
// its own data or a passive keepalive) within KeepaliveTimeout, so silence
// beyond that plus a margin means the session is broken. For a peer that
// has been answering promptly the deadline is earlier (silence.go).
func (t *Timers) DataSent(now time.Time, jitter time.Duration) {
	if !t.newHandshake.armed {
		t.newHandshake.arm(t.newHandshakeAt(now, clampJitter(jitter)))
	}
}

// DataReceived records that a data packet (not a keepalive) was received:
// unless something is sent back within KeepaliveTimeout, a keepalive is due
// then.
func (t *Timers) DataReceived(now time.Time) {
	if !t.keepalive.armed {
		t.keepalive.arm(now.Add(t.params().KeepaliveTimeout))
	} else {
		t.needAnotherKeepalive = true
	}
}

// AuthenticatedSent records that any authenticated packet (data,
// keepalive, handshake) was sent. It acknowledges everything received so
// far, so no passive keepalive is needed.
func (t *Timers) AuthenticatedSent(now time.Time) {
	t.keepalive.disarm()
	t.needAnotherKeepalive = false
}

// AuthenticatedReceived records that any authenticated packet was
// received: the peer is alive, so no new handshake is needed for silence.
func (t *Timers) AuthenticatedReceived(now time.Time) {
	if t.newHandshake.armed && t.silence != nil {
		t.silence.answered(now, t.params())
	}
	t.newHandshake.disarm()
}

// AuthenticatedTraversal records that any authenticated packet was sent or
// received: the persistent keepalive (if enabled) is pushed back a full
// interval, since the NAT mapping it protects was just refreshed.
func (t *Timers) AuthenticatedTraversal(now time.Time) {
	if t.persistentInterval > 0 {
		t.persistent.arm(now.Add(t.persistentInterval))
	}
}

// HandshakeInitiated records that an initiation was sent and arms its
// retransmit at now+RekeyTimeout+jitter. The first initiation after a
// series ended (or ever) opens a new series of attempts starting at now;
// later ones, retransmits or not, continue it until it completes or gives
// up.
func (t *Timers) HandshakeInitiated(now time.Time, jitter time.Duration) {
	if !t.inAttempt {
		t.inAttempt = true
		t.attemptStart = now
	}
	t.retransmit.arm(now.Add(t.params().RekeyTimeout + clampJitter(jitter)))
	t.silenceInitiated(now)
}

// HandshakeComplete records that a handshake finished (response received,
// or first data message on a responder session): no retransmit, and the
// attempt series is over.
func (t *Timers) HandshakeComplete(now time.Time) {
	t.retransmit.disarm()
	t.inAttempt = false
}

// SessionDerived records that new session keys were derived; key material
// is wiped 3*RejectAfterTime after the last such event.
func (t *Timers) SessionDerived(now time.Time) {
	t.zeroKeys.arm(now.Add(zeroKeysAfter * t.params().RejectAfterTime))
}

// SetPersistentKeepalive sets the persistent keepalive interval; zero or
// negative disables it. Enabling it (from disabled, or for the first time
// after Stop) makes a keepalive due at once, so that a NAT mapping is
// opened without waiting for traffic, as wireguard-go does; changing an
// active interval reschedules the next keepalive at now+interval.
func (t *Timers) SetPersistentKeepalive(interval time.Duration, now time.Time) {
	switch {
	case interval <= 0:
		t.persistentInterval = 0
		t.persistent.disarm()
	case t.persistentInterval == 0 || !t.persistent.armed:
		t.persistentInterval = interval
		t.persistent.arm(now)
	default:
		t.persistentInterval = interval
		t.persistent.arm(now.Add(interval))
	}
}

// PersistentKeepalive returns the interval set by SetPersistentKeepalive.
func (t *Timers) PersistentKeepalive() time.Duration {
	return t.persistentInterval
}

// Stop disarms every deadline and ends any attempt series, for a removed
// peer or a device going down. The persistent keepalive interval is kept;
// calling SetPersistentKeepalive again on restart sends one right away.
func (t *Timers) Stop() {
	p, interval := t.p, t.persistentInterval
	*t = Timers{p: p, persistentInterval: interval}
}

// Next returns the earliest armed deadline, or the zero Time if none is
// armed. Due(Next()) returns at least one action.
func (t *Timers) Next() time.Time {
	var next time.Time
	for _, d := range [...]*deadline{&t.retransmit, &t.newHandshake, &t.keepalive, &t.persistent, &t.zeroKeys} {
		if d.armed && (next.IsZero() || d.at.Before(next)) {
			next = d.at
		}
	}
	return next
}

// Due returns the actions whose deadlines are at or before now and
// consumes those deadlines; deadlines still in the future are untouched.
func (t *Timers) Due(now time.Time) Action {
	p := t.params()
	var a Action
	if t.retransmit.due(now) {
		a |= t.retransmitDue(now, p)
	}
	if t.newHandshake.due(now) {
		if t.silence != nil {
			t.silence.fired(now)
		}
		a |= SendInitiation
	}
	if t.keepalive.due(now) {
		a |= SendKeepalive
		if t.needAnotherKeepalive {
			t.needAnotherKeepalive = false
			t.keepalive.arm(now.Add(p.KeepaliveTimeout))
		}
	}
	if t.persistent.due(now) {
		a |= SendKeepalive
		// Rearm here as well as in AuthenticatedTraversal so that the
		// keepalive keeps recurring even when this one cannot be sent
		// (no endpoint yet, no session yet).
		t.persistent.arm(now.Add(t.persistentInterval))
	}
	if t.zeroKeys.due(now) {
		a |= ZeroKeys
	}
	return a
}

// retransmitDue handles an unanswered initiation: retry, or give up once
// the series has lasted RekeyAttemptTime.
func (t *Timers) retransmitDue(now time.Time, p Params) Action {
	if now.Sub(t.attemptStart) >= p.RekeyAttemptTime {
		t.inAttempt = false
		// Without a session the keepalive or new-handshake deadlines would
		// each start a fresh handshake, and the series would never end.
		t.newHandshake.disarm()
		t.keepalive.disarm()
		t.needAnotherKeepalive = false
		// Wipe what a half-finished exchange left behind, eventually.
		if !t.zeroKeys.armed {
			t.zeroKeys.arm(now.Add(zeroKeysAfter * p.RejectAfterTime))
		}
		return GiveUp
	}
	// Rearm without jitter: HandshakeInitiated replaces this when the
	// device sends the retry, and if it cannot send, the series still
	// advances to GiveUp instead of stalling open.
	t.retransmit.arm(now.Add(p.RekeyTimeout))
	return SendInitiation
}
