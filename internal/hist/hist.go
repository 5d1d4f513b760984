// Package hist is a fixed-size, lock-free histogram of durations with
// power-of-two microsecond buckets, for sojourn times on the data path:
// recording costs one atomic add and never allocates.
package hist

import (
	"math/bits"
	"strconv"
	"sync/atomic"
	"time"
)

// Buckets is the number of buckets: bucket i counts durations of at most
// 2^i microseconds (and more than 2^(i-1)), for i < Buckets-1; the last one
// counts everything above 2^(Buckets-2) µs (about half a second).
const Buckets = 21

// Hist counts durations by bucket. The zero value is ready to use.
type Hist struct {
	b   [Buckets]atomic.Uint64
	sum atomic.Uint64 // nanoseconds, for a Prometheus histogram's _sum
}

// Index is the bucket a duration falls in.
func Index(d time.Duration) int {
	us := uint64(max(d, 0)+time.Microsecond-1) / uint64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(bits.Len64(us-1), Buckets-1)
}

// Observe counts one duration.
func (h *Hist) Observe(d time.Duration) { h.ObserveN(d, 1) }

// ObserveN counts n packets that all waited d.
func (h *Hist) ObserveN(d time.Duration, n uint64) {
	h.b[Index(d)].Add(n)
	h.sum.Add(uint64(max(d, 0)) * n)
}

// SumNanos is the total of every duration counted, in nanoseconds.
func (h *Hist) SumNanos() uint64 { return h.sum.Load() }

// Snapshot is a copy of a histogram's counts.
type Snapshot [Buckets]uint64

// Snapshot copies the counts. They are read one by one, so under load the
// copy is not one instant, which is good enough for a summary.
func (h *Hist) Snapshot() Snapshot {
	var s Snapshot
	for i := range s {
		s[i] = h.b[i].Load()
	}
	return s
}

// Total is the number of durations counted.
func (s *Snapshot) Total() uint64 {
	var t uint64
	for _, v := range s {
		t += v
	}
	return t
}

// Quantile is the upper bound of the bucket holding quantile q (0 < q <= 1)
// of the counts, and false if there are none or q is the last, unbounded
// bucket's.
func (s *Snapshot) Quantile(q float64) (time.Duration, bool) {
	t := s.Total()
	if t == 0 {
		return 0, false
	}
	want := uint64(q * float64(t))
	want = max(want, 1)
	var seen uint64
	for i, v := range s {
		seen += v
		if seen >= want {
			if i == Buckets-1 {
				return UpperBound(i - 1), false
			}
			return UpperBound(i), true
		}
	}
	return UpperBound(Buckets - 2), false
}

// UpperBound is bucket i's largest duration; the last bucket has none and
// reports the one before it.
func UpperBound(i int) time.Duration {
	i = min(i, Buckets-2)
	return time.Duration(1<<i) * time.Microsecond
}

// Label names bucket i's upper bound in microseconds, "inf" for the last.
func Label(i int) string {
	if i >= Buckets-1 {
		return "inf"
	}
	return strconv.Itoa(1 << i)
}
