// Package timers implements the per-peer timer rules of WireGuard (paper,
// section 6) as a pure state machine: the device reports events with the
// current time and asks which actions are due; this package never reads the
// clock, starts timers or goroutines.
//
// The device keeps one goroutine and a heap of every peer's Next deadline;
// when a deadline passes it calls Due and carries out the returned actions.
// Because jitter is an argument too, the whole schedule is deterministic and
// tests can assert exact times.
package timers

import (
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

// Params are the protocol durations. A zero or negative field means the
// protocol default from package noise; tests and benchmarks shorten them.
type Params struct {
	RekeyAfterTime   time.Duration
	RejectAfterTime  time.Duration
	RekeyAttemptTime time.Duration
	RekeyTimeout     time.Duration
	KeepaliveTimeout time.Duration
	// SilenceTimeout is how long a peer that has been answering promptly
	// may stay silent after we send data before a new handshake starts
	// (see silence.go); the regular KeepaliveTimeout+RekeyTimeout rule
	// still applies to peers that do not answer promptly.
	SilenceTimeout time.Duration
}

// DefaultParams returns the durations of the WireGuard paper.
func DefaultParams() Params {
	return Params{
		RekeyAfterTime:   noise.RekeyAfterTime,
		RejectAfterTime:  noise.RejectAfterTime,
		RekeyAttemptTime: noise.RekeyAttemptTime,
		RekeyTimeout:     noise.RekeyTimeout,
		KeepaliveTimeout: noise.KeepaliveTimeout,
		SilenceTimeout:   DefaultSilenceTimeout,
	}
}

// WithDefaults replaces unset (zero or negative) fields with the protocol defaults.
func (p Params) WithDefaults() Params {
	d := DefaultParams()
	fill := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&p.RekeyAfterTime, d.RekeyAfterTime)
	fill(&p.RejectAfterTime, d.RejectAfterTime)
	fill(&p.RekeyAttemptTime, d.RekeyAttemptTime)
	fill(&p.RekeyTimeout, d.RekeyTimeout)
	fill(&p.KeepaliveTimeout, d.KeepaliveTimeout)
	fill(&p.SilenceTimeout, d.SilenceTimeout)
	return p
}

// RekeyOnSend reports whether sending on a keypair created at created
// should also start a new handshake: after RekeyAfterMessages messages, or,
// for the initiator only, once the keypair is RekeyAfterTime old (only the
// initiator rekeys on age, so both sides do not start handshakes at once).
func (p Params) RekeyOnSend(created time.Time, initiator bool, sendCount uint64, now time.Time) bool {
	p = p.WithDefaults()
	return sendCount >= noise.RekeyAfterMessages ||
		(initiator && now.Sub(created) >= p.RekeyAfterTime)
}

// RekeyOnReceive reports whether receiving on a keypair created at created
// should start a new handshake: the initiator does so once the keypair is
// within KeepaliveTimeout+RekeyTimeout of expiring, so that a peer that only
// receives still gets a fresh keypair before the current one is rejected.
// The device should do this at most once per keypair.
func (p Params) RekeyOnReceive(created time.Time, initiator bool, now time.Time) bool {
	p = p.WithDefaults()
	return initiator && now.Sub(created) >= p.RejectAfterTime-p.KeepaliveTimeout-p.RekeyTimeout
}

// Expired reports whether a keypair created at created is too old to send
// or receive with (RejectAfterTime).
func (p Params) Expired(created time.Time, now time.Time) bool {
	p = p.WithDefaults()
	return now.Sub(created) >= p.RejectAfterTime
}

// Action is a set of things the device must do for a peer.
type Action uint8

const (
	// SendInitiation: send a handshake initiation, either a retransmit of
	// an unanswered one or a new handshake because the peer stopped
	// answering data. The device then calls HandshakeInitiated.
	SendInitiation Action = 1 << iota
	// SendKeepalive: send an empty data message (passive or persistent
	// keepalive).
	SendKeepalive
	// GiveUp: handshake attempts went unanswered for RekeyAttemptTime; the
	// device drops the packets staged for this peer. No further timer
	// starts a handshake until new traffic does.
	GiveUp
	// ZeroKeys: no new session for 3*RejectAfterTime; the device wipes
	// every keypair and the handshake state.
	ZeroKeys
)

// String lists the actions, for logs and test failures.
func (a Action) String() string {
	if a == 0 {
		return "none"
	}
	names := [...]string{"SendInitiation", "SendKeepalive", "GiveUp", "ZeroKeys"}
	var s string
	for i, n := range names {
		if a&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if a>>len(names) != 0 {
		s += "|unknown"
	}
	return s
}

// deadline is one armed-or-not point in time.
type deadline struct {
	at    time.Time
	armed bool
}

func (d *deadline) arm(at time.Time) { *d = deadline{at: at, armed: true} }
func (d *deadline) disarm()          { *d = deadline{} }

// due reports whether d is armed and has passed, disarming it if so.
func (d *deadline) due(now time.Time) bool {
	if !d.armed || d.at.After(now) {
		return false
	}
	d.disarm()
	return true
}
