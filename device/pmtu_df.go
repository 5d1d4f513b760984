package device

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/pmtu"
)

// Samples, for a peer that answers no probes and whose path MTU nothing
// else knows (pmtu.DFSamples). Over IPv4, fips-go's datagrams leave with
// DF clear, so a path narrower than the tunnel has every full-size
// datagram fragmented by a router, which sends no ICMP and leaves the
// kernel's path MTU at the link's: the tunnel carries a quarter of what
// it could, and nothing tells the inner stacks. Up to four times a
// second, the datagram of one full-size TCP segment goes with DF set: a
// router's ICMP then teaches the kernel the path MTU (refreshKernelLocked
// reads it soon after), and where that ICMP is filtered the inner TCP's
// resends of the samples show the black hole, which sets the same floor
// as the TCP watch (pmtu_tcp.go). Over IPv6 the samples are only
// followed: a path that narrows mid-transfer is a black hole for every
// full-size datagram, and the stalled inner TCP's resends show it within
// a few retransmission timeouts, busy peer or not.
//
// The send path pays an atomic load per batch; each full-size packet sent
// costs a look at its sequence number while samples are followed.

// peerDF is a peer's sampling state.
type peerDF struct {
	// want: sampling is on (refreshDFLocked); sendBatchTxLocked picks
	// samples.
	want atomic.Bool
	// mark: samples are sent with DF set (an IPv4 path); over IPv6, whose
	// routers never fragment, every datagram is a sample as it is sent.
	mark atomic.Bool
	// above is the inner size above which a packet would not fit the
	// path's floor, for the endpoint's family: only those are samples.
	above atomic.Int32
	// watch: a sample awaits its verdict; fitOutbound shows it the
	// full-size packets sent. Written under mu.
	watch atomic.Bool
	// counter is the nonce counter of the packet to send with DF set,
	// plus one; 0: none. A stale one (the packet dropped before the
	// send) only ever matches a packet of a later session.
	counter atomic.Uint64

	mu sync.Mutex // guards s; a leaf
	s  pmtu.DFSamples
}

const (
	// dfKernelLook is how soon after a sample the kernel's path MTU is
	// read: a router's ICMP has had a round trip to arrive.
	dfKernelLook = 50 * time.Millisecond
)

// refreshDFLocked turns p's sampling on or off and judges the samples
// that waited long enough, under p.pmtu.mu, once a second per busy peer.
func (p *Peer) refreshDFLocked(now time.Time) {
	st := p.pmtu.Load()
	df := &st.df
	v4 := st.dst.Addr().Is4() || st.dst.Addr().Is4In6()
	above := pmtu.InnerMTU(pmtuTCPFloor, !v4)
	on := st.dst.IsValid() && st.inner.Load() == 0 && st.probed.Load() == 0 &&
		st.tcp.until.Load() == 0 && int(p.d.mtu.Load()) > above
	if on {
		ep, ok := p.endpoint()
		on = ok && ep.Transport == conn.TransportUDP && (!v4 || p.d.probeConn(ep) != nil)
	}
	df.mark.Store(v4)
	df.above.Store(int32(above))
	df.mu.Lock()
	defer df.mu.Unlock()
	df.s.Expire(now)
	if !on {
		df.s.Reset()
	}
	df.want.Store(on)
	df.watch.Store(df.s.Pending())
}

// resetDFLocked forgets p's samples and verdict, for a new endpoint;
// under p.pmtu.mu.
func (st *peerPMTU) resetDFLocked() {
	st.df.mu.Lock()
	st.df.s.Reset()
	st.df.watch.Store(false)
	st.df.mu.Unlock()
}

// pickDFSample makes one full-size TCP segment of b, whose counters are
// taken, the next sample when one is due. Called under p.mu.
func (p *Peer) pickDFSample(b *batch, now time.Time) {
	st := p.pmtu.Load()
	if st == nil || !st.df.want.Load() {
		return
	}
	df := &st.df
	df.mu.Lock()
	defer df.mu.Unlock()
	if !df.s.Due(now) {
		return
	}
	above := int(df.above.Load())
	for i := 0; i < b.n; i++ {
		if b.sizes[i] <= above || !df.s.Take(b.bufs[i][stagedFrom:stagedFrom+b.sizes[i]], now) {
			continue
		}
		df.watch.Store(true)
		if df.mark.Load() {
			df.counter.Store(b.counters[i] + 1)
			st.next.Store(now.Add(dfKernelLook).UnixNano())
		}
		return
	}
}

// dfPick is the packet of the batches being flushed to send with DF set:
// its nonce counter plus one, 0 for none.
func (p *Peer) dfPick() (*peerDF, uint64) {
	st := p.pmtu.Load()
	if st == nil {
		return nil, 0
	}
	if c := st.df.counter.Load(); c != 0 {
		return &st.df, c
	}
	return nil, 0
}

// sendDF sends one sealed datagram with DF set through ep's connected
// socket, reporting false (send it as usual) when it cannot.
func (p *Peer) sendDF(ep conn.Endpoint, dgram []byte) bool {
	if ep.Transport != conn.TransportUDP {
		return false
	}
	pc := p.d.probeConn(ep)
	if pc == nil || pc.SendProbe(dgram) != nil {
		return false
	}
	p.txBytes.Add(uint64(len(dgram)))
	p.d.ctr.inc(cTxPackets)
	p.d.ctr.inc(cTxPMTUDFSamples)
	return true
}

// seenDF shows a full-size packet sent to p to its samples; three lost in
// a row set the floor.
func (d *Device) seenDF(p *Peer, st *peerPMTU, pkt []byte, now time.Time) {
	st.df.mu.Lock()
	hole := st.df.s.Seen(pkt, now)
	st.df.mu.Unlock()
	if hole {
		d.setPathFloor(p, now)
	}
}
