package procs

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// With a Waker, Run stops sampling once the process has been quiet for
// ParkAfter intervals, samples again from a fresh baseline after a Kick,
// and a Kick while it runs leaves nothing behind that would wake the next
// park.
func TestRunParksUntilKicked(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	if start < 2 {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(start)
	}
	synctest.Test(t, func(t *testing.T) {
		const interval = 500 * time.Millisecond
		var reads atomic.Int64
		var busy atomic.Int64 // CPU time per read, in ns
		c := counters{wall: time.Now(), all: 1, cpus: 2}
		read := func() (counters, error) {
			reads.Add(1)
			c.wall = time.Now()
			c.busy += time.Duration(busy.Load())
			c.all += 100
			c.idle += 50
			return c, nil
		}
		w := NewWaker()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			Run(ctx, Options{Interval: interval, read: read, Waker: w})
			close(done)
		}()
		// The baseline and ParkAfter quiet samples, then nothing for a minute.
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := reads.Load(), int64(1+ParkAfter); got != want {
			t.Fatalf("%d reads in a quiet minute, want %d (baseline and %d samples, then parked)", got, want, ParkAfter)
		}
		// Traffic: a new baseline at once, then a sample every interval
		// for as long as the process is busy.
		busy.Store(int64(interval / 2))
		w.Kick()
		w.Kick() // a second Kick of the same wake-up does nothing more
		synctest.Wait()
		if got, want := reads.Load(), int64(2+ParkAfter); got != want {
			t.Fatalf("%d reads after Kick, want %d (a fresh baseline)", got, want)
		}
		time.Sleep(10 * interval)
		synctest.Wait()
		if got, want := reads.Load(), int64(12+ParkAfter); got != want {
			t.Fatalf("%d reads after 10 busy intervals, want %d", got, want)
		}
		// Kicks while it runs, then quiet: it parks again and stays parked.
		w.Kick()
		busy.Store(0)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := reads.Load(), int64(12+2*ParkAfter); got != want {
			t.Fatalf("%d reads after a second quiet minute, want %d", got, want)
		}
		cancel()
		<-done
	})
}
