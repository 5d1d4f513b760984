package device

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/device/internal/pmtu"
)

// Black holes toward a peer that answers no probes (a stock WireGuard, or
// probes off): the inner TCP shows them. A full-size segment the path
// drops without a word is sent again at each retransmission timeout,
// unchanged, while the small packets of the session still pass; after
// the third such sending (pmtu.Retransmits) the peer's path MTU becomes
// pmtuTCPFloor for pmtuTCPHold, and the frag-needed answers and the MSS
// clamp tell the inner stacks (docs/architecture.md, "Paths narrower
// than the tunnel").
//
// The data path pays an atomic load per packet; it parses full-size
// packets only while the watch is on, which refreshPMTU decides once a
// second: no path MTU known, no probe answered, a tunnel MTU above the
// floor, and less than pmtuWatchRate sent in the last second (a peer that
// carries more has no black hole worth the parsing).

const (
	// pmtuTCPFloor is the path MTU assumed after a black hole: what
	// every IPv6 path carries, and nearly every IPv4 one.
	pmtuTCPFloor = 1280
	// pmtuTCPHold is how long the floor holds before full-size packets
	// are tried again: the time a Linux host keeps a learned path MTU.
	pmtuTCPHold = 10 * time.Minute
	// pmtuWatchRate bounds, in bytes a second to the peer, the traffic
	// whose full-size TCP segments are watched.
	pmtuWatchRate = 1 << 20
	// pmtuAliveWithin is how recent a packet from the peer must be for
	// its silence to be the path's size and not the path down.
	pmtuAliveWithin = 10 * time.Second
)

// peerTCPWatch is a peer's black-hole watch.
type peerTCPWatch struct {
	// above is the inner size above which a packet is watched, 0: the
	// watch is off. Written under peerPMTU.mu.
	above atomic.Int32
	// until is when the floor expires (Unix ns), 0: no floor. Written
	// under peerPMTU.mu.
	until  atomic.Int64
	txMark uint64 // the peer's tx bytes at the last refresh, guarded by peerPMTU.mu
	w      atomic.Pointer[tcpWatch]
}

// tcpWatch is allocated the first time a watched packet comes. mu is a
// leaf lock, only ever tried: a busy watch skips a packet.
type tcpWatch struct {
	mu sync.Mutex
	r  pmtu.Retransmits
}

// refreshTCPWatchLocked turns the watch on or off and lets an expired
// floor go, under p.pmtu.mu, once a second per busy peer.
func (p *Peer) refreshTCPWatchLocked(now time.Time) {
	st := p.pmtu.Load()
	w := &st.tcp
	tx := p.txBytes.Load()
	sent := tx - w.txMark
	w.txMark = tx
	if u := w.until.Load(); u != 0 {
		if now.UnixNano() < u {
			w.above.Store(0)
			return
		}
		w.until.Store(0)
		if st.dst.IsValid() {
			p.setPathMTU(st.dst)
		}
	}
	v6 := st.dst.Addr().Is6() && !st.dst.Addr().Is4In6()
	above := pmtu.InnerMTU(pmtuTCPFloor, v6)
	on := st.dst.IsValid() && st.probed.Load() == 0 && st.inner.Load() == 0 &&
		sent < pmtuWatchRate && int(p.d.mtu.Load()) > above
	if !on {
		above = 0
	}
	w.above.Store(int32(above))
}

// watchTCP feeds a full-size packet to p's watch and, when it reports a
// black hole and the peer was heard from lately, sets the floor.
func (d *Device) watchTCP(p *Peer, pkt []byte, now time.Time) {
	st := p.pmtu.Load()
	w := st.tcp.w.Load()
	if w == nil {
		st.tcp.w.CompareAndSwap(nil, new(tcpWatch))
		w = st.tcp.w.Load()
	}
	if !w.mu.TryLock() {
		return
	}
	hit := w.r.Sent(pkt, now)
	w.mu.Unlock()
	if hit {
		d.setPathFloor(p, now)
	}
}

// setPathFloor makes p's path MTU pmtuTCPFloor for pmtuTCPHold, after the
// inner TCP showed a black hole, if the peer was heard from lately.
func (d *Device) setPathFloor(p *Peer, now time.Time) {
	st := p.pmtu.Load()
	t := p.live.Load()
	if t == nil || now.Sub(time.Unix(t.lastRx.Load(), 0)) > pmtuAliveWithin {
		return // nothing passes: the path is down, not narrow
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.tcp.until.Load() != 0 || !st.dst.IsValid() {
		return
	}
	d.ctr.inc(cTxPMTUTCPBlackHoles)
	st.tcp.until.Store(now.Add(pmtuTCPHold).UnixNano())
	st.tcp.above.Store(0)
	p.setPathMTU(st.dst)
}
