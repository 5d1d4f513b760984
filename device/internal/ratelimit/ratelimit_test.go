package ratelimit

import (
	"net/netip"
	"testing"
	"time"
)

func TestBurstThenRate(t *testing.T) {
	l := New(Options{PerSecond: 10, Burst: 3})
	a := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1000, 0)
	for i := range 3 {
		if !l.Allow(a, now) {
			t.Fatalf("burst message %d refused", i)
		}
	}
	if l.Allow(a, now) {
		t.Fatal("4th message in the same instant allowed past a burst of 3")
	}
	if l.Allow(a, now.Add(99*time.Millisecond)) {
		t.Fatal("allowed before one token (100ms) was earned")
	}
	if !l.Allow(a, now.Add(100*time.Millisecond)) {
		t.Fatal("refused after one token was earned")
	}
	if !l.Allow(netip.MustParseAddr("192.0.2.2"), now) {
		t.Fatal("another address shares the bucket")
	}
}

func TestIPv6SharesSlash64(t *testing.T) {
	l := New(Options{PerSecond: 1, Burst: 1})
	now := time.Unix(0, 0)
	if !l.Allow(netip.MustParseAddr("2001:db8::1"), now) {
		t.Fatal("first refused")
	}
	if l.Allow(netip.MustParseAddr("2001:db8::2"), now) {
		t.Fatal("same /64 got a second bucket")
	}
	if !l.Allow(netip.MustParseAddr("2001:db8:0:1::1"), now) {
		t.Fatal("different /64 refused")
	}
}

func TestBoundedEntries(t *testing.T) {
	l := New(Options{PerSecond: 1, Burst: 1, MaxEntries: 16})
	now := time.Unix(0, 0)
	for i := range 100 {
		l.Allow(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), now)
	}
	if l.Len() > 16 {
		t.Fatalf("tracked %d addresses, cap is 16", l.Len())
	}
	// Once buckets have refilled they are evictable and new addresses fit again.
	if !l.Allow(netip.MustParseAddr("10.1.0.1"), now.Add(2*time.Second)) {
		t.Fatal("new address refused after old buckets refilled")
	}
}

// A full table of active sources must not lock out a source it has never
// seen (issue 13: every new source was refused once 4,096 flooding sources
// filled the table, legitimate peers included).
func TestFullTableNeverLocksOutANewSource(t *testing.T) {
	l := New(Options{PerSecond: 20, Burst: 5, MaxEntries: 64})
	now := time.Unix(1000, 0)
	// 64 flooding sources, each kept busy (no bucket refills).
	for i := range 64 {
		a := netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)})
		for range 10 {
			l.Allow(a, now)
		}
	}
	if l.Len() != 64 {
		t.Fatalf("table holds %d, want 64", l.Len())
	}
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)})
		if !l.Allow(a, now) {
			t.Fatalf("new source %v refused with the table full", a)
		}
		if l.Len() > 64 {
			t.Fatalf("table grew to %d past its cap of 64", l.Len())
		}
	}
}

// Under load is true from the moment the queue reaches the threshold until
// Hold after it was last seen there, and no longer.
func TestLoadGaugeHolds(t *testing.T) {
	var g LoadGauge
	now := time.Unix(1000, 0)
	if g.Observe(10, 1024, now) {
		t.Fatal("under load with a nearly empty queue")
	}
	if !g.Observe(256, 1024, now) {
		t.Fatal("not under load at a quarter full")
	}
	if !g.Observe(0, 1024, now.Add(LoadHold-time.Nanosecond)) {
		t.Fatal("load mode ended before the hold time")
	}
	if g.Observe(0, 1024, now.Add(LoadHold)) {
		t.Fatal("load mode outlasted the hold time")
	}
	// Load seen again extends it from then.
	g.Observe(300, 1024, now.Add(2*time.Second))
	if !g.Observe(0, 1024, now.Add(2*time.Second+LoadHold/2)) {
		t.Fatal("renewed load mode ended early")
	}
}
