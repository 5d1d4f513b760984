package procs

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestStatReader(t *testing.T) {
	r, err := newStatReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	c, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	if c.cpus < 1 || c.all == 0 || c.idle > c.all {
		t.Fatalf("implausible counters %+v", c)
	}
	if a := testing.AllocsPerRun(20, func() { r.read() }); a != 0 {
		t.Fatalf("a sample allocates %v times", a)
	}
	// The kept descriptor reads fresh numbers: the machine's ticks move.
	for deadline := time.Now().Add(5 * time.Second); ; {
		time.Sleep(20 * time.Millisecond)
		d, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		if d.all > c.all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/proc/stat's ticks did not move in 5 s: %d", d.all)
		}
	}
}

// Run gives back the GOMAXPROCS it found when it stops, whatever it set.
func TestRunRestores(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	if start < 2 {
		t.Skip("GOMAXPROCS is 1: Run does nothing")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Options{Interval: time.Millisecond})
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != start {
		t.Fatalf("GOMAXPROCS %d after Run, want %d", got, start)
	}
}
