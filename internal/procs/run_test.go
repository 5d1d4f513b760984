package procs

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Run lowers GOMAXPROCS on samples of a saturated machine and gives back
// the value it found when it stops.
func TestRunLowersAndRestores(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	if start < 2 {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(start)
		start = 2
	}
	// Each sample: 10 ms of wall time, 1 ms of this process's CPU, no
	// idle CPU anywhere: the top P is unused on a saturated machine.
	var mu sync.Mutex
	c := counters{wall: time.Unix(0, 0), all: 1, cpus: start}
	read := func() (counters, error) {
		mu.Lock()
		defer mu.Unlock()
		c.wall = c.wall.Add(10 * time.Millisecond)
		c.busy += time.Millisecond
		c.all += 100
		return c, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Options{Interval: time.Millisecond, read: read})
		close(done)
	}()
	for deadline := time.Now().Add(10 * time.Second); runtime.GOMAXPROCS(0) != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS still %d after 10 s of saturated samples", runtime.GOMAXPROCS(0))
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != start {
		t.Fatalf("GOMAXPROCS %d after Run, want %d", got, start)
	}
}
