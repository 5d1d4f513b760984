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
