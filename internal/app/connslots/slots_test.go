package connslots

import "testing"

func TestSlots(t *testing.T) {
	s := New(2)
	closed := map[string]bool{}
	acquire := func(name string) (*Slot, bool) {
		return s.Acquire(func() { closed[name] = true })
	}
	a, ok1 := acquire("a")
	b, ok2 := acquire("b")
	if !ok1 || !ok2 {
		t.Fatal("the first two were refused")
	}
	// At the cap with both idle: the older, a, makes room.
	c, ok := acquire("c")
	if !ok || !closed["a"] || closed["b"] {
		t.Fatalf("third: %v, closed %v; want a closed", ok, closed)
	}
	if a.Busy() {
		t.Error("a closed for c could still become busy")
	}
	a.Release() // a's slot is c's now: no double give-back
	if !b.Busy() || !c.Busy() {
		t.Fatal("b and c could not become busy")
	}
	if _, ok := acquire("d"); ok {
		t.Error("a fourth got in beside two busy connections")
	}
	// b goes idle between requests: it makes room next.
	b.Idle()
	d, ok := acquire("d")
	if !ok || !closed["b"] || closed["c"] {
		t.Fatalf("with b idle: %v, closed %v; want b closed", ok, closed)
	}
	b.Release()
	c.Release()
	// One slot free again: no one is closed for the next.
	if _, ok := acquire("e"); !ok || closed["d"] {
		t.Fatalf("with a free slot: %v, closed %v", ok, closed)
	}
	d.Release()
	d.Release() // twice is harmless
	if s.held != 1 {
		t.Errorf("%d slots held, want 1 (e's)", s.held)
	}
}

// TestSlotsOrderAndFreed: "idle longest" counts from when a connection
// last began to serve, not from when its goroutine marked it idle; Freed
// tells a waiter when a refused Acquire may succeed.
func TestSlotsOrderAndFreed(t *testing.T) {
	s := New(2)
	closed := map[string]bool{}
	acquire := func(name string) (*Slot, bool) {
		return s.Acquire(func() { closed[name] = true })
	}
	a, _ := acquire("a")
	b, _ := acquire("b")
	a.Busy()
	b.Busy()
	if _, ok := acquire("c"); ok {
		t.Fatal("a third got in beside two busy connections")
	}
	select {
	case <-s.Freed():
		t.Fatal("Freed signalled with nothing freed")
	default:
	}
	b.Idle()
	a.Idle() // marked idle last, but began serving first
	<-s.Freed()
	if _, ok := acquire("c"); !ok || !closed["a"] || closed["b"] {
		t.Fatalf("closed %v; want a, which began serving first", closed)
	}
	b.Busy()
	a.Release()
	b.Release()
	<-s.Freed()
	if _, ok := acquire("d"); !ok || len(closed) != 1 {
		t.Fatalf("after a release: closed %v", closed)
	}
}
