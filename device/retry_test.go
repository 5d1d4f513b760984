package device

import (
	"testing"
	"time"
)

func TestRetryPolicyBacksOffAndResets(t *testing.T) {
	ms := time.Millisecond
	want := []time.Duration{0, 1 * ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 100 * ms, 100 * ms, 100 * ms}
	var r retryPolicy
	for i, w := range want {
		if got := r.failed(); got != w {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w)
		}
		if got := r.persistent(); got != (i+1 == persistentAfter) {
			t.Fatalf("failure %d: persistent %v", i+1, got)
		}
	}
	for range 1000 {
		r.failed()
	}
	if got := r.failed(); got != retryMaxWait {
		t.Fatalf("after a long streak: wait %v, want %v", got, retryMaxWait)
	}
	r.ok()
	if got := r.failed(); got != 0 {
		t.Fatalf("first failure after a good read: wait %v, want 0", got)
	}
}

func TestRetryPolicyGivesUpOnRepeatedPanics(t *testing.T) {
	var r retryPolicy
	for i := 1; i < maxReadPanics; i++ {
		if _, giveUp := r.panicked(); giveUp {
			t.Fatalf("gave up after %d panics, want %d", i, maxReadPanics)
		}
	}
	r.ok() // a good read in between: the next streak starts over
	for i := 1; i < maxReadPanics; i++ {
		r.panicked()
		r.failed() // plain errors don't count toward the panic limit
	}
	wait, giveUp := r.panicked()
	if !giveUp || wait != retryMaxWait {
		t.Fatalf("panic %d: wait %v, give up %v; want %v, true", maxReadPanics, wait, giveUp, retryMaxWait)
	}
}
