package procs

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Options for Run. The zero value works.
type Options struct {
	// Interval between samples (default 500 ms).
	Interval time.Duration
	// Logf reports each change; nil discards.
	Logf func(format string, args ...any)
	// Waker, if set, lets the controller park while the process is idle
	// (Controller.Parked): it stops sampling until the data path calls
	// Kick. Without one it samples all the time.
	Waker *Waker

	// read replaces the /proc/stat and getrusage sampler (tests).
	read func() (counters, error)
}

// Run adapts GOMAXPROCS until ctx is done, then restores the value it
// found. It returns at once where the machine's idle time or the process's
// CPU time cannot be read, or where GOMAXPROCS is 1.
func Run(ctx context.Context, o Options) {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	start := runtime.GOMAXPROCS(0)
	if start <= 1 {
		return
	}
	read := o.read
	if read == nil {
		r, err := newStatReader()
		if err != nil {
			logf("adaptive GOMAXPROCS off: %v", err)
			return
		}
		defer r.close()
		read = r.read
	}
	prev, err := read()
	if err != nil {
		logf("adaptive GOMAXPROCS off: %v", err)
		return
	}
	c := Controller{Max: start, Cur: start}
	defer func() {
		if c.Cur != start {
			runtime.GOMAXPROCS(start)
		}
	}()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		if c.Parked() && o.Waker != nil {
			t.Stop()
			if !o.Waker.wait(ctx) {
				return
			}
			// The first interval after the park starts now, not when the
			// controller parked.
			c.Resume()
			if now, err := read(); err == nil {
				prev = now
			}
			t.Reset(o.Interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := read()
		if err != nil {
			continue
		}
		old := c.Cur
		if n := c.Next(now.since(prev)); n != old {
			runtime.GOMAXPROCS(n)
			logf("GOMAXPROCS %d -> %d", old, n)
		}
		prev = now
	}
}

// Waker restarts a parked controller. Kick is what the data path calls on
// traffic: one atomic load while the controller runs, a channel send only
// the first time after it parked.
type Waker struct {
	parked atomic.Bool
	ch     chan struct{}
}

// NewWaker returns a Waker for one controller.
func NewWaker() *Waker { return &Waker{ch: make(chan struct{}, 1)} }

// Kick wakes the controller if it is parked. Safe for concurrent use, and
// it never blocks.
func (w *Waker) Kick() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// wait parks until Kick or ctx is done; false for ctx. A Kick between
// setting the flag and receiving leaves its token in the channel, so it
// is not lost.
func (w *Waker) wait(ctx context.Context) bool {
	w.parked.Store(true)
	select {
	case <-w.ch:
		return true
	case <-ctx.Done():
		w.parked.Store(false)
		return false
	}
}

// counters are the cumulative values a Sample is the difference of.
type counters struct {
	wall      time.Time
	busy      time.Duration // process CPU time
	idle, all uint64        // machine's idle and total CPU ticks
	cpus      int           // CPUs online
}

func (n counters) since(p counters) Sample {
	s := Sample{Wall: n.wall.Sub(p.wall), Busy: n.busy - p.busy}
	if n.all > p.all && n.idle >= p.idle {
		s.Idle = float64(n.idle-p.idle) / float64(n.all-p.all) * float64(n.cpus)
	}
	return s
}
