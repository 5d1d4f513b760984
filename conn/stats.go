package conn

import (
	"sync/atomic"

	"github.com/fips-go/fips-go/internal/hist"
)

// counters are a bind's Stats as atomics, updated once per batch on the data
// path rather than once per packet where the code allows.
type counters struct {
	gsoFallbacks   atomic.Uint64
	gsoOversize    atomic.Uint64
	groFallbacks   atomic.Uint64
	rxOversize     atomic.Uint64
	rxShedStale    atomic.Uint64
	rxSocketDrops  atomic.Uint64
	rxBadControl   atomic.Uint64
	sendErrors     atomic.Uint64
	stickyFallback atomic.Uint64
	connOpened     atomic.Uint64
	connClosed     atomic.Uint64
	connFailures   atomic.Uint64
	connFallbacks  atomic.Uint64
	rxPackets      atomic.Uint64
	rxMessages     atomic.Uint64
	txPackets      atomic.Uint64
	txMessages     atomic.Uint64
	rxSojourn      hist.Hist
}

func (c *counters) snapshot() Stats {
	return Stats{
		GSOFallbacks:   c.gsoFallbacks.Load(),
		GSOOversize:    c.gsoOversize.Load(),
		GROFallbacks:   c.groFallbacks.Load(),
		RxOversize:     c.rxOversize.Load(),
		RxShedStale:    c.rxShedStale.Load(),
		RxSocketDrops:  c.rxSocketDrops.Load(),
		RxBadControl:   c.rxBadControl.Load(),
		SendErrors:     c.sendErrors.Load(),
		StickyFallback: c.stickyFallback.Load(),
		ConnOpened:     c.connOpened.Load(),
		ConnClosed:     c.connClosed.Load(),
		ConnFailures:   c.connFailures.Load(),
		ConnFallbacks:  c.connFallbacks.Load(),
		RxPackets:      c.rxPackets.Load(),
		RxMessages:     c.rxMessages.Load(),
		TxPackets:      c.txPackets.Load(),
		TxMessages:     c.txMessages.Load(),
		RxSojourn:      c.rxSojourn.Snapshot(),
		RxSojournNanos: c.rxSojourn.SumNanos(),
	}
}
