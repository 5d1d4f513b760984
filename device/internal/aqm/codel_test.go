package aqm

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// A queue whose sojourn stays above target gets its first signal exactly
// one interval after it rose, then signals spaced interval/sqrt(count).
func TestCoDelSignalTimes(t *testing.T) {
	c := New(Params{})
	var got []time.Duration
	for now := t0; now.Before(t0.Add(60 * time.Millisecond)); now = now.Add(100 * time.Microsecond) {
		if c.Signal(2*time.Millisecond, now, false) {
			got = append(got, now.Sub(t0))
		}
	}
	// First at 10 ms; then +10/sqrt(1), +10/sqrt(2), +10/sqrt(3), ... each
	// rounded up to the 100 µs step of the loop.
	want := []time.Duration{ms(10)}
	next := ms(10)
	for n := 1; ; n++ {
		next += time.Duration(float64(10*time.Millisecond) / math.Sqrt(float64(n)))
		if next >= ms(60) {
			break
		}
		want = append(want, next)
	}
	if len(got) != len(want) {
		t.Fatalf("signals at %v, want %d near %v", got, len(want), want)
	}
	for i := range got {
		if got[i] < want[i] || got[i]-want[i] >= 100*time.Microsecond {
			t.Errorf("signal %d at %v, want %v (within one 100 µs step)", i, got[i], want[i])
		}
	}
}

// Below target, or with the queue empty behind the packet, nothing is
// signalled however long it lasts, and a dip below target restarts the
// interval.
func TestCoDelBelowTargetOrEmpty(t *testing.T) {
	c := New(Params{Target: ms(1), Interval: ms(10)})
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if c.Signal(ms(0.9), now, false) || c.Signal(ms(50), now, true) {
			t.Fatalf("signal at %d ms", i)
		}
	}
	c = New(Params{Target: ms(1), Interval: ms(10)})
	if c.Signal(ms(2), t0, false) || c.Signal(ms(2), t0.Add(ms(9)), false) {
		t.Fatal("signal before an interval above target")
	}
	if c.Signal(ms(0.5), t0.Add(ms(9.5)), false) {
		t.Fatal("signal below target")
	}
	if c.Signal(ms(2), t0.Add(ms(10)), false) {
		t.Fatal("the dip below target did not restart the interval")
	}
	if !c.Signal(ms(2), t0.Add(ms(20)), false) {
		t.Fatal("no signal an interval after the sojourn rose again")
	}
}

// Leaving and re-entering the dropping state soon after resumes near the
// signal rate reached before (RFC 8289 5.4), instead of starting over.
func TestCoDelResumesRate(t *testing.T) {
	c := New(Params{})
	now := t0
	for i := 0; i < 400; i++ { // 40 ms above target: several signals
		c.Signal(ms(5), now, false)
		now = now.Add(100 * time.Microsecond)
	}
	before := c.count
	if before < 3 {
		t.Fatalf("only %d signals in 40 ms", before)
	}
	c.Signal(ms(0.1), now, false) // queue drained: leave
	if c.Dropping() {
		t.Fatal("still dropping below target")
	}
	now = now.Add(ms(1))
	c.Signal(ms(5), now, false)
	now = now.Add(ms(10))
	if !c.Signal(ms(5), now, false) {
		t.Fatal("no signal on re-entry")
	}
	if c.count != before-1 {
		t.Errorf("re-entered with count %d, want %d (the signals of the last episode but the first)", c.count, before-1)
	}
}

func TestCoDelOff(t *testing.T) {
	c := New(Params{Target: -1})
	for i := range 100 {
		if c.Signal(time.Second, t0.Add(time.Duration(i)*time.Second), false) {
			t.Fatal("an off controller signalled")
		}
	}
}
