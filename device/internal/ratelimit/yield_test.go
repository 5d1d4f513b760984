package ratelimit

import (
	"testing"
	"time"
)

func TestYieldNeedsEvidence(t *testing.T) {
	var y Yield
	t0 := time.Unix(1000, 0)
	if y.Productive(t0) {
		t.Fatal("no outcomes yet: want unproductive")
	}
	for i := range yieldEvidence - 1 {
		y.Record(true, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if y.Productive(t0.Add(40 * time.Millisecond)) {
		t.Fatalf("%d answered: too few to judge, want unproductive", yieldEvidence-1)
	}
	y.Record(true, t0.Add(41*time.Millisecond))
	if !y.Productive(t0.Add(42 * time.Millisecond)) {
		t.Fatalf("%d answered: want productive", yieldEvidence)
	}
}

func TestYieldFloodAndStorm(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var storm, flood, mixed Yield
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		storm.Record(true, now)
		flood.Record(false, now)
		mixed.Record(i%3 != 0, now) // two in three answered
	}
	end := t0.Add(time.Second)
	if !storm.Productive(end) {
		t.Error("every initiation answered: want productive")
	}
	if flood.Productive(end) {
		t.Error("none answered: want unproductive")
	}
	if !mixed.Productive(end) {
		t.Error("two in three answered: want productive")
	}
}

func TestYieldForgets(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var y Yield
	for i := range 500 {
		y.Record(false, t0.Add(time.Duration(i)*time.Millisecond))
	}
	// Half a second into the next window, the flood's window still
	// counts for half: 250 unanswered against 100 answered now.
	for i := range 100 {
		y.Record(true, t0.Add(time.Second+time.Duration(i)*time.Millisecond))
	}
	if y.Productive(t0.Add(1500 * time.Millisecond)) {
		t.Error("the flood half a window ago still outweighs: want unproductive")
	}
	// More answered in the same window outweigh it.
	for i := range 200 {
		y.Record(true, t0.Add(1500*time.Millisecond+time.Duration(i)*time.Millisecond))
	}
	if !y.Productive(t0.Add(1700 * time.Millisecond)) {
		t.Error("300 answered against 150 of the old flood's: want productive")
	}
	// Two windows later everything is forgotten: no evidence.
	if y.Productive(t0.Add(4 * time.Second)) {
		t.Error("nothing in the last two windows: want unproductive")
	}
	// A clock that goes back neither panics nor forgets.
	y.Record(false, t0)
}
