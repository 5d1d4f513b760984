package hist

import (
	"testing"
	"time"
)

func TestIndexBounds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Microsecond, 0},
		{time.Microsecond + 1, 1},
		{2 * time.Microsecond, 1},
		{3 * time.Microsecond, 2},
		{4 * time.Microsecond, 2},
		{1024 * time.Microsecond, 10},
		{1025 * time.Microsecond, 11},
		{UpperBound(Buckets - 2), Buckets - 2},
		{UpperBound(Buckets-2) + 1, Buckets - 1},
		{time.Hour, Buckets - 1},
	} {
		if got := Index(c.d); got != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.d, got, c.want)
		}
		if c.want < Buckets-1 && c.d > UpperBound(c.want) {
			t.Errorf("%v is above its bucket's bound %v", c.d, UpperBound(c.want))
		}
	}
}

func TestQuantile(t *testing.T) {
	var h Hist
	if s := h.Snapshot(); func() bool { _, ok := s.Quantile(0.5); return ok }() {
		t.Fatal("empty histogram has a median")
	}
	h.ObserveN(100*time.Microsecond, 50) // bucket ≤128 µs
	h.ObserveN(3*time.Millisecond, 40)   // ≤4096 µs
	h.ObserveN(time.Hour, 10)
	s := h.Snapshot()
	if s.Total() != 100 {
		t.Fatalf("total %d", s.Total())
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
		ok   bool
	}{
		{0.5, 128 * time.Microsecond, true},
		{0.51, 4096 * time.Microsecond, true},
		{0.9, 4096 * time.Microsecond, true},
		{0.95, UpperBound(Buckets - 2), false},
	} {
		got, ok := s.Quantile(c.q)
		if got != c.want || ok != c.ok {
			t.Errorf("Quantile(%v) = %v %v, want %v %v", c.q, got, ok, c.want, c.ok)
		}
	}
	if Label(0) != "1" || Label(10) != "1024" || Label(Buckets-1) != "inf" {
		t.Errorf("labels %s %s %s", Label(0), Label(10), Label(Buckets-1))
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	var h Hist
	if n := testing.AllocsPerRun(100, func() { h.Observe(time.Millisecond) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
