package ratelimit

import (
	"testing"
	"time"
)

func TestBucketExactRate(t *testing.T) {
	b := NewBucket(100, 10)
	now := time.Unix(1000, 0)
	n := 0
	for b.Allow(now) {
		n++
	}
	if n != 10 {
		t.Fatalf("burst %d, want 10", n)
	}
	// 10 ms earn exactly one token; a clock that goes back earns none.
	if b.Allow(now.Add(9*time.Millisecond)) || !b.Allow(now.Add(10*time.Millisecond)) || b.Allow(now.Add(10*time.Millisecond)) {
		t.Fatal("not one token per 10 ms")
	}
	if b.Allow(now) {
		t.Fatal("a clock step back earned a token")
	}
	// A long pause refills to the burst, not beyond.
	later := now.Add(time.Hour)
	n = 0
	for b.Allow(later) {
		n++
	}
	if n != 10 {
		t.Fatalf("after an hour %d tokens, want the burst of 10", n)
	}
}

func TestPacerExactWaits(t *testing.T) {
	p := NewPacer(1000, 100) // 1 ms a unit, a burst of 100
	now := time.Unix(1000, 0)
	if w := p.Spend(100, now); w != 0 {
		t.Fatalf("the burst waited %v", w)
	}
	if w := p.Spend(5, now); w != 5*time.Millisecond {
		t.Fatalf("5 units past the burst wait %v, want 5ms", w)
	}
	// Waiting it out clears the debt exactly.
	if w := p.Spend(0, now.Add(5*time.Millisecond)); w != 0 {
		t.Fatalf("after waiting, %v more", w)
	}
	// A charge past the burst waits for all of it: a batch larger than
	// the burst must not get through faster than the rate.
	if w := p.Spend(300, now.Add(5*time.Millisecond)); w != 300*time.Millisecond {
		t.Fatalf("300 units with no credit left wait %v, want 300ms", w)
	}
	// Debt is capped at a second however much is charged.
	if w := p.Spend(1_000_000, now.Add(5*time.Millisecond)); w != time.Second {
		t.Fatalf("a huge charge waits %v, want the 1s cap", w)
	}
	// A clock step back earns nothing.
	if w := p.Spend(0, now); w != time.Second {
		t.Fatalf("a step back changed the wait to %v", w)
	}
	// A long quiet spell refills to the burst, not beyond.
	later := now.Add(time.Hour)
	if w := p.Spend(100, later); w != 0 {
		t.Fatalf("a full burst after an hour waited %v", w)
	}
	if w := p.Spend(1, later); w != time.Millisecond {
		t.Fatalf("one past the refilled burst waits %v, want 1ms", w)
	}
}

// Refund gives a token back, never past the burst.
func TestBucketRefund(t *testing.T) {
	now := time.Unix(100, 0)
	b := NewBucket(1, 2)
	allowed := func() (n int) {
		for b.Allow(now) {
			n++
		}
		return n
	}
	if n := allowed(); n != 2 {
		t.Fatalf("a fresh bucket of burst 2 allowed %d", n)
	}
	b.Refund()
	if n := allowed(); n != 1 {
		t.Fatalf("one refund allowed %d", n)
	}
	b.Refund()
	b.Refund()
	b.Refund()
	if n := allowed(); n != 2 {
		t.Fatalf("three refunds into a bucket of burst 2 allowed %d", n)
	}
}

// A Pacer's refund pays its debt back first and never raises its credit
// past the burst.
func TestPacerRefund(t *testing.T) {
	now := time.Unix(100, 0)
	p := NewPacer(10, 2) // 100 ms a unit
	if w := p.Spend(4, now); w != 200*time.Millisecond {
		t.Fatalf("4 units against a burst of 2: wait %v, want 200ms", w)
	}
	p.Refund(2)
	if w := p.Spend(0, now); w != 0 {
		t.Fatalf("after a refund of the debt: wait %v, want 0", w)
	}
	p.Refund(100)
	if w := p.Spend(3, now); w != 100*time.Millisecond {
		t.Fatalf("a refund past the burst let 3 units through with wait %v, want 100ms", w)
	}
}
