package procs

import (
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
