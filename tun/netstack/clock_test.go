package netstack

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fips-go/fips-go/internal/testkit/leakcheck"
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

// TCP works through stacks with timer slack on both ends.
func TestTCPTransferWithTimerSlack(t *testing.T) {
	leakcheck.Check(t)
	var packets atomic.Int64
	p := newPair(t, Options{TimerSlack: 2 * time.Millisecond}, verifier(t, DefaultMTU, &packets))
	if _, ok := p.a.stack.Clock().(slackClock); !ok {
		t.Fatal("TimerSlack set but the stack's clock is not a slackClock")
	}
	transfer(t, p.a, p.b, netip.AddrPortFrom(addrB4, 5300), 4<<20)
}
