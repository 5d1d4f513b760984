// Package procs lowers GOMAXPROCS while the machine has no CPU to spare and
// raises it again when it has.
//
// Every P beyond the first costs a Go program wake-ups: a goroutine that
// readies another (a batch handed to a crypto worker) wakes a spinning
// thread for the idle P, which looks for work, sleeps, and is woken again.
// On a machine with idle CPUs that costs only idle time. On a saturated
// one (a 2-core VM carrying a tunnel, its application and the kernel's
// network stack) it takes CPU from the work: in the netns benchmark a
// daemon at GOMAXPROCS=1 used 8-30% less CPU per GB than at 2 and carried
// more. The controller keeps the extra Ps while they can run on an idle CPU
// or the process uses them, and gives back the last one when neither holds.
//
// The controller gives back at most one P: it never goes below the
// runtime's default less one. That is all it does on 2 CPUs, where it was
// measured, and it bounds what it can cost anywhere else. Lowering
// GOMAXPROCS has a risk that grows with the CPU count: on a machine that
// other programs keep busy, a daemon left with few Ps cannot take back
// more (a raise waits for an idle CPU that never comes), and competes for
// CPU time with fewer threads than its load needs. With one P fewer than
// the default, the daemon still runs N-1 threads of Go code on N CPUs:
// at worst 1/N of its parallelism, and only while the machine has no
// CPU to spare and the daemon left that P unused. The wake-up cost it
// saves is a spinning P's, so the bound leaves most of the benefit where
// there is one (few CPUs) and takes away the risk where there is no
// measurement (many).
//
// The Controller is pure (the caller passes the samples); Run does the I/O.
// An idle process has nothing for GOMAXPROCS to decide, so after a few
// quiet intervals the controller asks to park: Run then stops sampling
// until the data path reports traffic through a Waker.
package procs

import "time"

// Sample is one interval's measurements.
type Sample struct {
	Wall time.Duration // the interval's length
	Busy time.Duration // CPU time of this process in it (user + system)
	Idle float64       // CPUs the whole machine left idle, on average over it
}

// The rule's thresholds, in CPUs.
const (
	// SpareRaise idle CPUs are enough to run one more P (and every further
	// whole idle CPU one more again)...
	SpareRaise = 0.5
	// ...when the process keeps its top P at least RaiseUsed busy. An idle
	// process gets no Ps back: each change flushes the Ps' page caches
	// (up to 512 KiB each), so flapping between load and idle grew the
	// daemon's RSS by 0.3-0.5 MiB per cycle.
	RaiseUsed = 0.5
	// Below SpareLow idle CPUs the machine counts as saturated.
	SpareLow = 0.25
	// The top P counts as unused when the process used less than
	// cur - 1 + TopUsed CPUs.
	TopUsed = 0.25
	// LowerAfter intervals in a row must ask to lower before the
	// controller does: a burst of load does not move it.
	LowerAfter = 2
	// An interval in which the process used less than QuietUsed CPUs is
	// quiet (an idle daemon uses about 0.001, one carrying pings at 20 Hz
	// a few times that), and after ParkAfter quiet intervals in a row the
	// controller asks to park: its samples then cost more than anything
	// they could decide.
	QuietUsed = 0.01
	ParkAfter = 4
)

// Controller decides GOMAXPROCS from Samples. Max is the most it sets (the
// runtime's default at start, which already honours a cgroup CPU limit)
// and Cur the value now: set both before the first Next (Next clamps
// them to at least 1). It lowers Cur to Max-1 at the lowest.
type Controller struct {
	Max, Cur int
	low      int // intervals in a row that asked to lower
	quiet    int // quiet intervals in a row
}

// Parked reports whether the last ParkAfter intervals were all quiet: the
// caller may stop sampling until there is traffic again, and must call
// Resume before the next Next.
func (c *Controller) Parked() bool { return c.quiet >= ParkAfter }

// Resume starts counting afresh after a park: the intervals before it say
// nothing about the load that ended it.
func (c *Controller) Resume() { c.quiet, c.low = 0, 0 }

// Next takes one interval's sample and returns the GOMAXPROCS to use now:
// more when CPUs sat idle while the process used its top P (one per idle
// CPU, rounded, at least one); one fewer when for LowerAfter intervals in
// a row the machine was saturated and the process did not use its top P,
// down to Max-1 at the lowest; otherwise Cur.
func (c *Controller) Next(s Sample) int {
	c.Max = max(c.Max, 1)
	c.Cur = min(max(c.Cur, 1), c.Max)
	floor := max(c.Max-1, 1) // the lowest it lowers to
	if s.Wall <= 0 {
		return c.Cur
	}
	used := float64(s.Busy) / float64(s.Wall)
	if used < QuietUsed {
		c.quiet++
	} else {
		c.quiet = 0
	}
	switch {
	case s.Idle >= SpareRaise && used >= float64(c.Cur-1)+RaiseUsed:
		c.low = 0
		c.Cur = min(c.Max, c.Cur+max(1, int(s.Idle+0.5)))
	case s.Idle < SpareLow && used < float64(c.Cur-1)+TopUsed && c.Cur > floor:
		c.low++
		if c.low >= LowerAfter {
			c.low = 0
			c.Cur--
		}
	default:
		c.low = 0
	}
	return c.Cur
}
