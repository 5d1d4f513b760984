package timers

import (
	"testing"
	"time"
)

// sendReceiveRound is what the device does per batch on an active session.
func sendReceiveRound(tm *Timers, now time.Time) {
	tm.AuthenticatedTraversal(now)
	tm.AuthenticatedSent(now)
	tm.DataSent(now, 7*time.Millisecond)
	tm.AuthenticatedTraversal(now)
	tm.AuthenticatedReceived(now)
	tm.DataReceived(now)
	tm.Due(now)
	tm.Next()
}

func TestEventsDoNotAllocate(t *testing.T) {
	tm := New(Params{})
	tm.SetPersistentKeepalive(25*time.Second, t0)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Second)
		sendReceiveRound(tm, now)
	})
	if allocs != 0 {
		t.Fatalf("timer events allocate %v times per round", allocs)
	}
}

func BenchmarkEvents(b *testing.B) {
	tm := New(Params{})
	tm.SetPersistentKeepalive(25*time.Second, t0)
	now := t0
	b.ReportAllocs()
	for range b.N {
		now = now.Add(time.Millisecond)
		sendReceiveRound(tm, now)
	}
}
