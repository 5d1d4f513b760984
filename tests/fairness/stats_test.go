package fairness

import (
	"math"
	"testing"
)

func TestSummarise(t *testing.T) {
	s := summarise([]uint64{10, 10, 10, 10}, 0)
	if s.jain != 1 || s.min != 1 || s.med != 1 || s.max != 1 || s.belowHalf != 0 {
		t.Fatalf("equal counts: %+v", s)
	}
	s = summarise([]uint64{40, 0, 0, 0}, 0)
	if s.jain != 0.25 || s.zero != 3 || s.belowHalf != 3 || s.max != 4 || s.med != 0 {
		t.Fatalf("one takes all: %+v", s)
	}
	s = summarise([]uint64{4, 6, 10, 20}, 0) // fair 10
	if s.min != 0.4 || s.med != 0.8 || s.max != 2 || s.belowHalf != 1 {
		t.Fatalf("mixed: %+v", s)
	}
	if want := 40.0 * 40 / (4 * (16 + 36 + 100 + 400)); math.Abs(s.jain-want) > 1e-12 {
		t.Fatalf("jain %v, want %v", s.jain, want)
	}
	s = summarise([]uint64{5, 5}, 10)
	if s.med != 0.5 || s.belowHalf != 0 {
		t.Fatalf("override: %+v", s)
	}
	if s := summarise(nil, 0); s.total != 0 {
		t.Fatalf("empty: %+v", s)
	}
}

func TestSchedule(t *testing.T) {
	round := schedule(heavySenders, heavyFactor)
	count := map[int]int{}
	for _, i := range round {
		count[i]++
	}
	if count[heavySpoke] != heavyFactor || len(count) != active || len(round) != active-1+heavyFactor {
		t.Fatalf("round of %d: heavy %d times, %d senders", len(round), count[heavySpoke], len(count))
	}
	if r := schedule(equalSenders, 1); len(r) != active {
		t.Fatalf("equal round of %d", len(r))
	}
}
