package ratelimit

import (
	"testing"
	"time"
)

// A Share of 2% with a 20 ms burst: the burst spent, work waits until 2%
// of the elapsed time has paid the charges back; credit saved while idle
// stops at the burst; debt stops at minus the burst.
func TestShareExactCredit(t *testing.T) {
	s := NewShare(20*time.Millisecond, 20*time.Millisecond)
	t0 := time.Unix(1000, 0)
	if !s.Allow(t0) {
		t.Fatal("a new Share refused work")
	}
	s.Charge(15 * time.Millisecond)
	if !s.Allow(t0) {
		t.Fatal("refused with 5 ms of the burst left")
	}
	s.Charge(10 * time.Millisecond) // 5 ms in debt
	if s.Allow(t0) {
		t.Fatal("allowed in debt")
	}
	// 5 ms of debt at 2% is paid back after 250 ms.
	if s.Allow(t0.Add(249 * time.Millisecond)) {
		t.Fatal("allowed before the debt was paid back")
	}
	if !s.Allow(t0.Add(251 * time.Millisecond)) {
		t.Fatal("refused after the debt was paid back")
	}
	// A long idle time earns no more than the burst.
	t1 := t0.Add(time.Hour)
	s.Allow(t1)
	s.Charge(20 * time.Millisecond)
	if s.Allow(t1) {
		t.Fatal("the credit saved while idle exceeded the burst")
	}
	// A charge of a minute owes no more than the burst: 20 ms, paid back
	// in one second.
	s.Charge(time.Minute)
	if s.Allow(t1.Add(999 * time.Millisecond)) {
		t.Fatal("allowed before the capped debt was paid back")
	}
	if !s.Allow(t1.Add(1001 * time.Millisecond)) {
		t.Fatal("a huge charge cost more than the burst")
	}
	// A clock that goes back earns nothing; zero and negative charges
	// cost nothing.
	s.Charge(0)
	s.Charge(-time.Second)
	if !s.Allow(t1) {
		t.Fatal("a clock going back or an empty charge took credit")
	}
}

// Over a long run, the work admitted takes the share of the time, as work
// that costs more gets fewer admissions.
func TestShareBoundsWorkTime(t *testing.T) {
	for _, cost := range []time.Duration{50 * time.Microsecond, 400 * time.Microsecond} {
		s := NewShare(20*time.Millisecond, 20*time.Millisecond)
		now := time.Unix(0, 0)
		var spent time.Duration
		for range 1_000_000 { // 100 s in steps of 100 µs
			now = now.Add(100 * time.Microsecond)
			if s.Allow(now) {
				s.Charge(cost)
				spent += cost
			}
		}
		// 2% of 100 s plus the burst, within one piece of work.
		want := 2*time.Second + 20*time.Millisecond
		if spent < want-cost || spent > want+cost {
			t.Errorf("cost %v: spent %v in 100 s, want %v", cost, spent, want)
		}
	}
}
