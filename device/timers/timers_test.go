package timers

import (
	"testing"
	"time"

	"github.com/fips-go/fips-go/device/noise"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

type fired struct {
	at time.Duration // since t0
	a  Action
}

// sim plays the device: it sleeps until Next, calls Due and reacts to the
// actions the way the device will (sending packets reports them back as
// events). It checks on every step that nothing is due a nanosecond early.
type sim struct {
	t      *testing.T
	tm     *Timers
	now    time.Time
	jitter time.Duration
	// deaf makes the simulated device ignore SendInitiation, as when it
	// has no endpoint to send to.
	deaf bool
	log  []fired
}

func newSim(t *testing.T, p Params) *sim {
	return &sim{t: t, tm: New(p), now: t0}
}

// runUntil fires every deadline up to and including t0+d.
func (s *sim) runUntil(d time.Duration) {
	s.t.Helper()
	end := at(d)
	for {
		next := s.tm.Next()
		if next.IsZero() || next.After(end) {
			break
		}
		if next.Before(s.now) {
			s.t.Fatalf("Next %v is before the current time %v", next.Sub(t0), s.now.Sub(t0))
		}
		if a := s.tm.Due(next.Add(-time.Nanosecond)); a != 0 {
			s.t.Fatalf("Due 1ns before Next (%v) returned %v", next.Sub(t0), a)
		}
		s.now = next
		a := s.tm.Due(next)
		if a == 0 {
			s.t.Fatalf("Due(Next()=%v) returned nothing", next.Sub(t0))
		}
		s.log = append(s.log, fired{next.Sub(t0), a})
		s.react(a)
	}
	s.now = end
}

func (s *sim) react(a Action) {
	if a&SendInitiation != 0 && !s.deaf {
		s.tm.AuthenticatedTraversal(s.now)
		s.tm.AuthenticatedSent(s.now)
		s.tm.HandshakeInitiated(s.now, s.jitter)
	}
	if a&SendKeepalive != 0 {
		s.tm.AuthenticatedTraversal(s.now)
		s.tm.AuthenticatedSent(s.now)
	}
}

// initiate is the device sending a first initiation at t0+d.
func (s *sim) initiate(d time.Duration) {
	s.now = at(d)
	s.tm.AuthenticatedTraversal(s.now)
	s.tm.AuthenticatedSent(s.now)
	s.tm.HandshakeInitiated(s.now, s.jitter)
}

func (s *sim) expect(want []fired) {
	s.t.Helper()
	if len(s.log) != len(want) {
		s.t.Fatalf("fired %v, want %v", s.log, want)
	}
	for i := range want {
		if s.log[i] != want[i] {
			s.t.Fatalf("event %d: fired %v at %v, want %v at %v (all: %v)",
				i, s.log[i].a, s.log[i].at, want[i].a, want[i].at, s.log)
		}
	}
}

func TestRetransmitThenGiveUp(t *testing.T) {
	s := newSim(t, Params{})
	s.initiate(0)
	s.runUntil(time.Hour)
	// Initiations at 0, 5, ..., 85 s: 18 in all. The retransmit deadline
	// of the one at 85 s expires at 90 s, exactly RekeyAttemptTime after
	// the series began, which gives up instead of retrying.
	var want []fired
	for k := 1; k <= 17; k++ {
		want = append(want, fired{time.Duration(k) * 5 * time.Second, SendInitiation})
	}
	want = append(want, fired{90 * time.Second, GiveUp},
		fired{90*time.Second + 540*time.Second, ZeroKeys}) // residue of the exchange
	s.expect(want)
	if !s.tm.Next().IsZero() {
		t.Fatalf("deadline left after giving up: %v", s.tm.Next().Sub(t0))
	}
}

func TestRetransmitWithJitter(t *testing.T) {
	s := newSim(t, Params{})
	s.jitter = noise.RekeyTimeoutJitterMax // 333 ms
	s.initiate(0)
	s.runUntil(100 * time.Second)
	// Each attempt lasts 5.333 s: retries at k*5.333 s for k = 1..16
	// (85.328 s), and the 17th expiry at 90.661 s is past 90 s: give up.
	step := 5*time.Second + 333*time.Millisecond
	var want []fired
	for k := 1; k <= 16; k++ {
		want = append(want, fired{time.Duration(k) * step, SendInitiation})
	}
	want = append(want, fired{17 * step, GiveUp})
	s.expect(want)
}

func TestJitterIsClamped(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{-time.Second, 0}, {0, 0}, {100 * time.Millisecond, 100 * time.Millisecond},
		{time.Hour, noise.RekeyTimeoutJitterMax},
	} {
		tm := New(Params{})
		tm.HandshakeInitiated(t0, tc.in)
		if got := tm.Next().Sub(t0); got != 5*time.Second+tc.want {
			t.Errorf("jitter %v: retransmit at %v, want %v", tc.in, got, 5*time.Second+tc.want)
		}
	}
}

func TestDeafDeviceStillGivesUp(t *testing.T) {
	// The device cannot send (no endpoint): it never reports the retries,
	// yet the series must still end instead of staying open forever.
	s := newSim(t, Params{})
	s.deaf = true
	s.initiate(0)
	s.runUntil(95 * time.Second)
	var want []fired
	for k := 1; k <= 17; k++ {
		want = append(want, fired{time.Duration(k) * 5 * time.Second, SendInitiation})
	}
	s.expect(append(want, fired{90 * time.Second, GiveUp}))
}

func TestHandshakeCompleteEndsSeries(t *testing.T) {
	s := newSim(t, Params{})
	s.initiate(0)
	s.runUntil(12 * time.Second) // retries at 5 and 10
	s.tm.HandshakeComplete(at(12 * time.Second))
	s.runUntil(200 * time.Second)
	s.expect([]fired{{5 * time.Second, SendInitiation}, {10 * time.Second, SendInitiation}})
	// A new series starts its own 90 s budget.
	s.log = nil
	s.initiate(200 * time.Second)
	s.runUntil(400 * time.Second)
	if last := s.log[len(s.log)-1]; last != (fired{290 * time.Second, GiveUp}) {
		t.Fatalf("second series ended with %v at %v, want GiveUp at 290s", last.a, last.at)
	}
}

func TestNewHandshakeAfterUnansweredData(t *testing.T) {
	tm := New(Params{})
	tm.DataSent(t0, 100*time.Millisecond)
	tm.DataSent(at(3*time.Second), 0) // does not push the deadline back
	want := at(15*time.Second + 100*time.Millisecond)
	if tm.Next() != want {
		t.Fatalf("Next = %v, want 15.1s", tm.Next().Sub(t0))
	}
	if a := tm.Due(want.Add(-time.Nanosecond)); a != 0 {
		t.Fatalf("early %v", a)
	}
	if a := tm.Due(want); a != SendInitiation {
		t.Fatalf("Due(15.1s) = %v, want SendInitiation", a)
	}

	// Any authenticated reply cancels it.
	tm = New(Params{})
	tm.DataSent(t0, 0)
	tm.AuthenticatedReceived(at(7 * time.Second))
	if a := tm.Due(at(time.Hour)); a != 0 || !tm.Next().IsZero() {
		t.Fatalf("answered data still triggers %v", a)
	}
}

func TestPassiveKeepalive(t *testing.T) {
	tm := New(Params{})
	tm.DataReceived(t0)
	if tm.Next() != at(10*time.Second) {
		t.Fatalf("keepalive at %v, want 10s", tm.Next().Sub(t0))
	}
	if a := tm.Due(at(10*time.Second - time.Nanosecond)); a != 0 {
		t.Fatalf("early %v", a)
	}
	if a := tm.Due(at(10 * time.Second)); a != SendKeepalive {
		t.Fatalf("Due(10s) = %v, want SendKeepalive", a)
	}

	// Sending anything within the 10 s makes the keepalive unnecessary.
	tm = New(Params{})
	tm.DataReceived(t0)
	tm.AuthenticatedSent(at(3 * time.Second))
	if a := tm.Due(at(time.Hour)); a != 0 {
		t.Fatalf("keepalive %v despite a reply", a)
	}
}

func TestNeedAnotherKeepalive(t *testing.T) {
	tm := New(Params{})
	tm.DataReceived(t0)
	tm.DataReceived(at(4 * time.Second)) // deadline stays at 10 s
	if a := tm.Due(at(10 * time.Second)); a != SendKeepalive {
		t.Fatalf("Due(10s) = %v", a)
	}
	// If the keepalive is not reported sent, a second one follows.
	if tm.Next() != at(20*time.Second) {
		t.Fatalf("second keepalive at %v, want 20s", tm.Next().Sub(t0))
	}
	// Once it is sent, nothing more is needed.
	tm.AuthenticatedSent(at(10 * time.Second))
	if a := tm.Due(at(time.Hour)); a != 0 {
		t.Fatalf("extra %v after the keepalive was sent", a)
	}
}

func TestPersistentKeepalive(t *testing.T) {
	s := newSim(t, Params{})
	s.tm.SetPersistentKeepalive(25*time.Second, t0)
	if s.tm.PersistentKeepalive() != 25*time.Second {
		t.Fatal("interval not stored")
	}
	s.runUntil(60 * time.Second)
	s.expect([]fired{{0, SendKeepalive}, {25 * time.Second, SendKeepalive}, {50 * time.Second, SendKeepalive}})
	// Traffic at 60 s pushes the next one to 85 s.
	s.log = nil
	s.tm.AuthenticatedTraversal(at(60 * time.Second))
	s.runUntil(100 * time.Second)
	s.expect([]fired{{85 * time.Second, SendKeepalive}})
	// Changing the interval reschedules from now; disabling stops it.
	s.log = nil
	s.tm.SetPersistentKeepalive(7*time.Second, at(100*time.Second))
	s.runUntil(115 * time.Second)
	s.expect([]fired{{107 * time.Second, SendKeepalive}, {114 * time.Second, SendKeepalive}})
	s.tm.SetPersistentKeepalive(0, at(115*time.Second))
	if !s.tm.Next().IsZero() {
		t.Fatal("disabled persistent keepalive still armed")
	}
	s.tm.AuthenticatedTraversal(at(116 * time.Second))
	if !s.tm.Next().IsZero() {
		t.Fatal("traversal armed a disabled persistent keepalive")
	}
}

func TestPersistentKeepaliveWithoutSends(t *testing.T) {
	// Even if the keepalives cannot be sent, they keep recurring.
	tm := New(Params{})
	tm.SetPersistentKeepalive(10*time.Second, t0)
	for k := range 5 {
		now := at(time.Duration(k) * 10 * time.Second)
		if a := tm.Due(now); a != SendKeepalive {
			t.Fatalf("Due(%ds) = %v", k*10, a)
		}
	}
}

func TestZeroKeys(t *testing.T) {
	tm := New(Params{})
	tm.SessionDerived(t0)
	if a := tm.Due(at(540*time.Second - time.Nanosecond)); a != 0 {
		t.Fatalf("early %v", a)
	}
	if a := tm.Due(at(540 * time.Second)); a != ZeroKeys {
		t.Fatalf("Due(540s) = %v, want ZeroKeys", a)
	}
	// Each new session restarts the countdown.
	tm.SessionDerived(at(600 * time.Second))
	tm.SessionDerived(at(700 * time.Second))
	if tm.Next() != at(1240*time.Second) {
		t.Fatalf("zeroing at %v, want 1240s", tm.Next().Sub(t0))
	}
}

func TestGiveUpDisarmsTriggers(t *testing.T) {
	tm := New(Params{})
	tm.SessionDerived(t0) // zeroing at 540 s must not move
	tm.HandshakeInitiated(at(10*time.Second), 0)
	tm.DataSent(at(99*time.Second), 0)
	tm.DataReceived(at(99 * time.Second))
	// Deliver the retransmit late, at 101 s: it gives up.
	tm.retransmit.arm(at(101 * time.Second))
	if a := tm.Due(at(101 * time.Second)); a != GiveUp {
		t.Fatalf("Due(101s) = %v, want GiveUp", a)
	}
	if tm.Next() != at(540*time.Second) {
		t.Fatalf("after GiveUp Next = %v, want only zeroing at 540s", tm.Next().Sub(t0))
	}
}

func TestStop(t *testing.T) {
	tm := New(Params{})
	tm.SetPersistentKeepalive(25*time.Second, t0)
	tm.DataSent(t0, 0)
	tm.DataReceived(t0)
	tm.HandshakeInitiated(t0, 0)
	tm.SessionDerived(t0)
	tm.Stop()
	if !tm.Next().IsZero() || tm.Due(at(time.Hour)) != 0 {
		t.Fatal("Stop left a deadline armed")
	}
	// The interval survives; setting it again on restart fires at once.
	tm.SetPersistentKeepalive(tm.PersistentKeepalive(), at(2*time.Hour))
	if tm.Next() != at(2*time.Hour) {
		t.Fatalf("restart keepalive at %v", tm.Next().Sub(t0))
	}
	// A fresh series after Stop gets the full 90 s.
	tm.HandshakeInitiated(at(2*time.Hour), 0)
	tm.retransmit.arm(at(2*time.Hour + 89*time.Second))
	if a := tm.Due(at(2*time.Hour + 89*time.Second)); a&GiveUp != 0 {
		t.Fatal("series from before Stop carried over")
	}
}

func TestZeroValueAndCustomParams(t *testing.T) {
	var tm Timers // zero value: protocol defaults
	tm.DataReceived(t0)
	if tm.Next() != at(noise.KeepaliveTimeout) {
		t.Fatalf("zero Timers keepalive at %v", tm.Next().Sub(t0))
	}
	p := Params{KeepaliveTimeout: time.Second, RekeyTimeout: 100 * time.Millisecond, RejectAfterTime: -1}
	tm.Init(p)
	tm.DataSent(t0, 0)
	if tm.Next() != at(1100*time.Millisecond) {
		t.Fatalf("custom params: new handshake at %v", tm.Next().Sub(t0))
	}
	tm.SessionDerived(t0)
	tm.Stop()
	tm.SessionDerived(t0)
	if tm.Next() != at(3*noise.RejectAfterTime) {
		t.Fatal("negative RejectAfterTime did not fall back to the default")
	}
	if DefaultParams().WithDefaults() != DefaultParams() || (Params{}).WithDefaults() != DefaultParams() {
		t.Fatal("defaults inconsistent")
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{
		0: "none", SendInitiation: "SendInitiation", GiveUp | ZeroKeys: "GiveUp|ZeroKeys",
		SendKeepalive | 1<<6: "SendKeepalive|unknown",
	} {
		if a.String() != want {
			t.Errorf("%d.String() = %q, want %q", uint8(a), a.String(), want)
		}
	}
}
