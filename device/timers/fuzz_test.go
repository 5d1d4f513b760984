package timers

import (
	"testing"
	"time"
)

// fuzzModel tracks, independently of Timers, the two deadlines whose exact
// times follow directly from the event history: the end of a handshake
// attempt series and key zeroing.
type fuzzModel struct {
	seriesOpen  bool
	seriesStart time.Time
	zeroArmed   bool
	zeroAt      time.Time
}

func (m *fuzzModel) armZero(at time.Time) { m.zeroArmed, m.zeroAt = true, at }

// checkFired validates the actions Due returned at now.
func (m *fuzzModel) checkFired(t *testing.T, now time.Time, a Action, onTime bool) {
	t.Helper()
	p := DefaultParams()
	if a&GiveUp != 0 {
		if !m.seriesOpen || now.Sub(m.seriesStart) < p.RekeyAttemptTime {
			t.Fatalf("GiveUp at %v: series open %v since %v", now.Sub(t0), m.seriesOpen, m.seriesStart.Sub(t0))
		}
		if a&SendInitiation != 0 {
			t.Fatal("GiveUp together with SendInitiation")
		}
		m.seriesOpen = false
		if !m.zeroArmed {
			m.armZero(now.Add(3 * p.RejectAfterTime))
		}
	}
	zeroDue := m.zeroArmed && !m.zeroAt.After(now)
	if (a&ZeroKeys != 0) != zeroDue {
		t.Fatalf("ZeroKeys fired=%v at %v, model due=%v at %v", a&ZeroKeys != 0, now.Sub(t0), zeroDue, m.zeroAt.Sub(t0))
	}
	if zeroDue {
		if onTime && !m.zeroAt.Equal(now) {
			t.Fatalf("ZeroKeys at %v, armed for %v", now.Sub(t0), m.zeroAt.Sub(t0))
		}
		m.zeroArmed = false
	}
}

// fire delivers every deadline up to end the way the device's scheduler
// does, checking that Next is the earliest armed deadline: nothing is due
// a nanosecond before it, and something is due at it.
func fire(t *testing.T, tm *Timers, m *fuzzModel, now *time.Time, end time.Time) {
	t.Helper()
	for {
		next := tm.Next()
		if next.IsZero() || next.After(end) {
			break
		}
		if a := tm.Due(next.Add(-time.Nanosecond)); a != 0 {
			t.Fatalf("Due returned %v 1ns before Next", a)
		}
		if next.Before(*now) {
			t.Fatalf("deadline %v armed in the past (now %v)", next.Sub(t0), now.Sub(t0))
		}
		*now = next
		a := tm.Due(next)
		if a == 0 {
			t.Fatalf("nothing due at Next %v", next.Sub(t0))
		}
		m.checkFired(t, next, a, true)
		if n := tm.Next(); !n.IsZero() && !n.After(*now) {
			t.Fatalf("after Due(%v), Next is %v", now.Sub(t0), n.Sub(t0))
		}
	}
	*now = end
}

func FuzzTimers(f *testing.F) {
	f.Add([]byte{5, 0, 0, 250, 0, 250, 0, 250, 0, 250})
	f.Add([]byte{7, 0, 1, 0, 2, 0, 9, 3, 0, 40, 3, 0, 0, 200})
	f.Add([]byte{9, 25, 6, 0, 0, 100, 11, 0, 1, 0, 12, 250, 0, 30})
	f.Fuzz(func(t *testing.T, data []byte) {
		tm := New(Params{})
		var m fuzzModel
		now := t0
		for i := 0; i+2 <= len(data) && i < 2*500; i += 2 {
			op, arg := data[i], data[i+1]
			d := time.Duration(arg) * 250 * time.Millisecond
			jitter := time.Duration(arg) * 2 * time.Millisecond // up to 510 ms: also tests clamping
			switch op % 14 {
			case 0:
				fire(t, tm, &m, &now, now.Add(d))
			case 1: // a late scheduler: one Due long after deadlines passed
				now = now.Add(d)
				m.checkFired(t, now, tm.Due(now), false)
				if n := tm.Next(); !n.IsZero() && !n.After(now) {
					t.Fatalf("after a late Due, Next %v is not in the future", n.Sub(t0))
				}
			case 2:
				tm.DataSent(now, jitter)
			case 3:
				tm.DataReceived(now)
			case 4:
				tm.AuthenticatedSent(now)
			case 5:
				tm.AuthenticatedReceived(now)
			case 6:
				tm.AuthenticatedTraversal(now)
			case 7:
				tm.HandshakeInitiated(now, jitter)
				if !m.seriesOpen {
					m.seriesOpen, m.seriesStart = true, now
				}
			case 8:
				tm.HandshakeComplete(now)
				m.seriesOpen = false
			case 9:
				tm.SessionDerived(now)
				m.armZero(now.Add(3 * DefaultParams().RejectAfterTime))
			case 10:
				tm.SetPersistentKeepalive(time.Duration(arg%4)*10*time.Second-time.Duration(arg>>7), now)
			case 11:
				tm.Stop()
				m = fuzzModel{}
			default:
				fire(t, tm, &m, &now, now.Add(d*8))
			}
		}
		fire(t, tm, &m, &now, now.Add(time.Hour))
	})
}
