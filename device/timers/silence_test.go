package timers

import (
	"math/rand/v2"
	"testing"
	"time"
)

// pingPong plays a request/response flow on tm from start to end: a data
// send every interval, answered by the peer rtt later while answering is
// true for the send's time. It reacts to due actions as the device does
// (a handshake is answered rtt later, when answering is true for its
// time) and returns when initiations were sent (since t0).
func pingPong(tm *Timers, start, end, interval, rtt time.Duration, answering func(at time.Duration) bool) []time.Duration {
	inits, _ := pingPongCount(tm, start, end, interval, rtt, answering)
	return inits
}

// pingPongCount is pingPong that also counts the initiations the early
// rule started.
func pingPongCount(tm *Timers, start, end, interval, rtt time.Duration, answering func(at time.Duration) bool) ([]time.Duration, int) {
	var inits []time.Duration
	var early int
	now := start
	pendingAnswer, pendingHS := time.Duration(-1), time.Duration(-1)
	for now <= end {
		// Deliver deadlines and the pending answer in time order.
		nextSend := now + interval
		for {
			next := tm.Next()
			ev := nextSend
			if pendingAnswer >= 0 && pendingAnswer < ev {
				ev = pendingAnswer
			}
			if pendingHS >= 0 && pendingHS < ev {
				ev = pendingHS
			}
			if !next.IsZero() && next.Sub(t0) <= ev {
				wasEarly := tm.newHandshake.armed && tm.silence.early && !tm.newHandshake.at.After(next)
				a := tm.Due(next)
				if wasEarly {
					early++
				}
				if a&SendInitiation != 0 {
					inits = append(inits, next.Sub(t0))
					tm.AuthenticatedSent(next)
					tm.HandshakeInitiated(next, 0)
					if answering(next.Sub(t0)) {
						pendingHS = next.Sub(t0) + rtt
					}
				}
				if a&SendKeepalive != 0 {
					tm.AuthenticatedSent(next)
				}
				continue
			}
			if ev == pendingHS {
				tm.HandshakeComplete(at(ev))
				tm.AuthenticatedReceived(at(ev))
				pendingHS = -1
				continue
			}
			if ev == pendingAnswer {
				tm.AuthenticatedReceived(at(ev))
				tm.DataReceived(at(ev))
				pendingAnswer = -1
				continue
			}
			break
		}
		now = nextSend
		tm.DataSent(at(now), 0)
		tm.AuthenticatedSent(at(now))
		if answering(now) && pendingAnswer < 0 {
			pendingAnswer = now + rtt
		}
	}
	return inits, early
}

func TestEarlyHandshakeWhenPromptPeerFallsSilent(t *testing.T) {
	// Pings every 100 ms, answered in 20 ms until the peer's process dies
	// at 10 s: the ping sent at 10.0 s is the first unanswered one, so the
	// initiation goes out at exactly 12.0 s, not 25.0 s.
	tm := New(Params{})
	inits := pingPong(tm, 0, 14*time.Second, 100*time.Millisecond, 20*time.Millisecond,
		func(at time.Duration) bool { return at < 10*time.Second })
	if len(inits) != 1 || inits[0] != 12*time.Second {
		t.Fatalf("initiations at %v, want exactly [12s]", inits)
	}
	// The open series retransmits every RekeyTimeout, as ever.
	if tm.Next() != at(17*time.Second) {
		t.Fatalf("next deadline %v, want the retransmit at 17s", tm.Next().Sub(t0))
	}
}

func TestEarlyHandshakeWaitsRekeyTimeoutAfterInitiation(t *testing.T) {
	// A handshake at 100 s, then data unanswered from 101 s: the early
	// deadline (103 s) would come sooner than RekeyTimeout after our
	// initiation, so it is moved to 105 s.
	tm := New(Params{})
	tm.DataSent(t0, 0)
	tm.AuthenticatedReceived(at(10 * time.Millisecond)) // prompt
	tm.HandshakeInitiated(at(100*time.Second), 0)
	tm.HandshakeComplete(at(100*time.Second + 10*time.Millisecond))
	tm.AuthenticatedReceived(at(100*time.Second + 10*time.Millisecond))
	tm.DataSent(at(101*time.Second), 0)
	if got := tm.Next(); got != at(105*time.Second) {
		t.Fatalf("early deadline at %v, want 105s", got.Sub(t0))
	}
	if a := tm.Due(at(105 * time.Second)); a != SendInitiation {
		t.Fatalf("Due(105s) = %v", a)
	}
}

func TestEarlyHandshakeNotDuringSeries(t *testing.T) {
	// While our own initiation is outstanding, the retransmit rule owns
	// the peer: data sent then gets the regular deadline.
	tm := New(Params{})
	tm.DataSent(t0, 0)
	tm.AuthenticatedReceived(at(10 * time.Millisecond))
	tm.HandshakeInitiated(at(time.Second), 0)
	tm.DataSent(at(2*time.Second), 0)
	tm.retransmit.disarm()
	if got := tm.Next(); got != at(17*time.Second) {
		t.Fatalf("deadline during a series at %v, want the regular 17s", got.Sub(t0))
	}
	// An early deadline armed before an initiation falls back to the
	// regular one when the initiation goes out.
	tm = New(Params{})
	tm.DataSent(t0, 0)
	tm.AuthenticatedReceived(at(10 * time.Millisecond))
	tm.DataSent(at(time.Second), 0)
	if got := tm.Next(); got != at(3*time.Second) {
		t.Fatalf("early deadline at %v, want 3s", got.Sub(t0))
	}
	tm.HandshakeInitiated(at(2*time.Second), 0)
	tm.retransmit.disarm()
	if got := tm.Next(); got != at(16*time.Second) {
		t.Fatalf("after an initiation the deadline is %v, want the regular 16s", got.Sub(t0))
	}
}

func TestOneWayStreamNeverEarly(t *testing.T) {
	// We send every 100 ms and the peer only ever answers with a passive
	// keepalive KeepaliveTimeout later: it never answered promptly, so in
	// an hour no handshake starts for silence.
	tm := New(Params{})
	lastKeepalive := -10 * time.Second
	inits := pingPong(tm, 0, time.Hour, 100*time.Millisecond, 10*time.Second,
		func(at time.Duration) bool {
			if at-lastKeepalive >= 10*time.Second {
				lastKeepalive = at
				return true
			}
			return false
		})
	if len(inits) != 0 {
		t.Fatalf("%d initiations on a healthy one-way stream: %v", len(inits), inits[:min(len(inits), 5)])
	}
}

func TestEarlyHandshakeSpendsItsEvidence(t *testing.T) {
	// A peer that answered once and then never again: one early
	// initiation; after it the regular rule governs until a prompt answer
	// is seen again, and an early one never follows the last sooner than
	// KeepaliveTimeout+RekeyTimeout.
	tm := New(Params{})
	tm.DataSent(t0, 0)
	tm.AuthenticatedReceived(at(10 * time.Millisecond))
	tm.DataSent(at(time.Second), 0)
	if a := tm.Due(at(3 * time.Second)); a != SendInitiation {
		t.Fatalf("Due(3s) = %v", a)
	}
	tm.HandshakeInitiated(at(3*time.Second), 0)
	tm.HandshakeComplete(at(3*time.Second + 10*time.Millisecond))
	// The handshake response answers nothing we sent as data: prompt
	// stays false, so new data gets the regular deadline.
	tm.DataSent(at(4*time.Second), 0)
	if got := tm.Next(); got != at(19*time.Second) {
		t.Fatalf("deadline after a spent early handshake at %v, want 19s", got.Sub(t0))
	}
	// A prompt answer re-arms the rule, but not sooner than 15 s after
	// the early initiation at 3 s.
	tm.AuthenticatedReceived(at(4*time.Second + 10*time.Millisecond)) // answered in 10 ms
	tm.DataSent(at(5*time.Second), 0)
	if got := tm.Next(); got != at(18*time.Second) {
		t.Fatalf("second early deadline at %v, want 18s", got.Sub(t0))
	}
}

func TestIdlePathNoHandshakes(t *testing.T) {
	// An idle path: persistent keepalives only, no data. Nothing but the
	// keepalives fires in an hour.
	s := newSim(t, Params{})
	s.tm.SetPersistentKeepalive(25*time.Second, t0)
	s.runUntil(time.Hour)
	for _, f := range s.log {
		if f.a != SendKeepalive {
			t.Fatalf("%v at %v on an idle path", f.a, f.at)
		}
	}
}

// TestLossyPathFalseAlarms measures what the early rule costs on a lossy
// path that is healthy: a ping a second, each request and each answer
// lost with probability 10%, for a simulated hour. An extra handshake is
// two datagrams; the count is logged and bounded by what the regular
// rule may ever start (one per KeepaliveTimeout+RekeyTimeout).
func TestLossyPathFalseAlarms(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		loss     float64
	}{{time.Second, 0.1}, {100 * time.Millisecond, 0.1}, {time.Second, 0.3}} {
		run := func(silence time.Duration) (int, int) {
			rng := rand.New(rand.NewPCG(1, 2))
			tm := New(Params{SilenceTimeout: silence})
			inits, early := pingPongCount(tm, 0, time.Hour, tc.interval, 20*time.Millisecond, func(time.Duration) bool {
				// The datagram and its answer are lost independently.
				there, back := rng.Float64() >= tc.loss, rng.Float64() >= tc.loss
				return there && back
			})
			return len(inits), early
		}
		all, early := run(0)
		regular, _ := run(time.Hour)
		t.Logf("ping every %v, %.0f%% loss each way: %d initiations/hour (%d by the early rule), %d without it",
			tc.interval, tc.loss*100, all, early, regular)
		if early > int(time.Hour/(15*time.Second)) {
			t.Errorf("%d early initiations in an hour, more than the regular rule's ceiling", early)
		}
	}
}
