package netstack

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/faketime"
)

func TestSlackClockDelaysShortTimers(t *testing.T) {
	mc := faketime.NewManualClock()
	c := slackClock{Clock: mc, slack: 2 * time.Millisecond, below: slackBelow}
	var fired atomic.Int32
	f := func() { fired.Add(1) }
	// step advances the clock by d and reports whether the timer fired.
	step := func(d time.Duration) bool {
		mc.Advance(d)
		return fired.Swap(0) != 0
	}

	// A 10 ms timer (a loss probe) fires at 12 ms, not at 10.
	tm := c.AfterFunc(10*time.Millisecond, f)
	if step(10 * time.Millisecond) {
		t.Fatal("10 ms timer fired at 10 ms; want 2 ms of slack")
	}
	if !step(2 * time.Millisecond) {
		t.Fatal("10 ms timer did not fire at 12 ms")
	}
	// Reset is stretched the same way.
	tm.Reset(5 * time.Millisecond)
	if step(5 * time.Millisecond) {
		t.Fatal("reset to 5 ms fired at 5 ms")
	}
	if !step(2 * time.Millisecond) {
		t.Fatal("reset to 5 ms did not fire at 7 ms")
	}
	// A stopped timer stays stopped.
	tm.Reset(time.Millisecond)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if step(10 * time.Millisecond) {
		t.Fatal("stopped timer fired")
	}

	// Zero means now, and timers of 200 ms and more (retransmission,
	// keep-alive, TIME-WAIT) keep their time.
	c.AfterFunc(0, f)
	if !step(0) {
		t.Fatal("zero timer did not fire at once")
	}
	c.AfterFunc(slackBelow, f)
	if !step(slackBelow) {
		t.Fatal("200 ms timer was delayed")
	}
}

func TestTimerSlackOption(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, maxTimerSlack + 1} {
		if n, err := New(Options{TimerSlack: d}); err == nil {
			n.Close()
			t.Errorf("TimerSlack %v accepted", d)
		}
	}
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, ok := n.stack.Clock().(slackClock); ok {
		t.Error("timer slack on by default")
	}

	// TCP works through a stack with slack on both ends.
	var packets atomic.Int64
	p := newPair(t, Options{TimerSlack: 2 * time.Millisecond}, verifier(t, DefaultMTU, &packets))
	if _, ok := p.a.stack.Clock().(slackClock); !ok {
		t.Fatal("TimerSlack set but the stack's clock is not a slackClock")
	}
	transfer(t, p.a, p.b, netip.AddrPortFrom(addrB4, 5300), 4<<20)
}
