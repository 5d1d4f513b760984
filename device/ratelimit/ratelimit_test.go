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
