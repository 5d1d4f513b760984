package netstack

import (
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// slackClock is the stack's clock with every timer shorter than below
// fired slack later (Options.TimerSlack).
//
// Why: gVisor arms its tail-loss probe at exactly twice the smoothed RTT
// and its RACK reorder timer at exactly the reorder window. Linux adds
// TCP_TIMEOUT_MIN (2 jiffies: 2 ms at HZ=1000, 8 ms at HZ=250) to both,
// because a probe that fires before an ACK merely delayed arrives is a
// spurious retransmission, and gVisor then halves the flow's window: it
// reads the ACK that passes the probe without a DSACK as a repaired loss
// and does not undo on the DSACK that follows. Through the exit, where
// many flows' RTTs swing widely, that kept windows small, so each ACK
// freed a small burst, the costly regime ACK thinning works against.
//
// The cost is later loss detection when a loss is real: small at 2 ms
// (BenchmarkNetstackWAN; docs/benchmarks.md).
//
// Among the stack's timers only those two are shorter than MinRTO (200
// ms): the retransmission, keep-alive, TIME-WAIT and handshake timers are
// longer and keep their time. A zero duration (run now) is not delayed.
type slackClock struct {
	tcpip.Clock
	slack, below time.Duration
}

func (c slackClock) stretch(d time.Duration) time.Duration {
	if d > 0 && d < c.below {
		return d + c.slack
	}
	return d
}

// AfterFunc implements tcpip.Clock.
func (c slackClock) AfterFunc(d time.Duration, f func()) tcpip.Timer {
	return slackTimer{c.Clock.AfterFunc(c.stretch(d), f), c}
}

type slackTimer struct {
	tcpip.Timer
	c slackClock
}

// Reset implements tcpip.Timer.
func (t slackTimer) Reset(d time.Duration) { t.Timer.Reset(t.c.stretch(d)) }
