package procs

import (
	"context"
	"runtime"
	"time"
)

// Options for Run. The zero value works.
type Options struct {
	// Interval between samples (default 500 ms).
	Interval time.Duration
	// Logf reports each change; nil discards.
	Logf func(format string, args ...any)

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
