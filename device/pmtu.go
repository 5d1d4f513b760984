package device

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/pmtu"
	"github.com/fips-go/fips-go/tun"
)

// Path MTU: what each peer's path carries, and the inner stacks told of it
// (docs/architecture.md, "Paths narrower than the tunnel"). A peer whose
// path MTU is unknown is treated as today: full-size packets leave and the
// kernel fragments their datagrams.

// pmtuSource says how a peer's path MTU was learned.
type pmtuSource uint32

const (
	pmtuUnknown pmtuSource = iota // no path MTU: nothing is clamped
	pmtuKernel                    // the kernel's route MTU for the peer's connected socket (local link, ICMP)
	pmtuProbe                     // confirmed by padded probes the peer answered
	pmtuTCP                       // a floor, after inner TCP resent full-size segments in vain (pmtu_tcp.go)
)

func (s pmtuSource) String() string {
	switch s {
	case pmtuKernel:
		return "kernel"
	case pmtuProbe:
		return "probe"
	case pmtuTCP:
		return "tcp"
	}
	return "unknown"
}

// pmtuRefresh is how often a peer's kernel path MTU is looked at again: a
// getsockopt, done by whichever data-path goroutine finds it due.
const (
	pmtuRefresh     = time.Second
	pmtuRefreshSoon = 50 * time.Millisecond
)

// peerPMTU is a peer's path MTU state. inner is read per packet.
type peerPMTU struct {
	inner  atomic.Int32 // largest inner packet that fits, 0: unknown or at least the tunnel's MTU
	path   atomic.Int32 // path MTU (outer datagram), 0: unknown
	source atomic.Uint32
	next   atomic.Int64 // Unix ns of the next kernel look
	kernel atomic.Int32 // last kernel figure, 0: none
	probed atomic.Int32 // path MTU the probes confirmed, 0: none
	// probedCap: a larger probe was lost, so probed is the path's limit;
	// otherwise it is a floor (the tunnel's MTU, or a search under way)
	// and limits nothing.
	probedCap atomic.Bool
	probe     atomic.Pointer[peerProbe]

	mu  sync.Mutex     // held by the one goroutine refreshing
	dst netip.AddrPort // the endpoint kernel is for, guarded by mu

	tcp peerTCPWatch // pmtu_tcp.go
	df  peerDF       // pmtu_df.go
}

// pmtuSignals is the device's budget for telling inner senders: a token
// bucket, so that a flood of full-size packets costs at most pmtuICMPRate
// ICMP errors a second, and the one buffer they are built in.
type pmtuSignals struct {
	mu     sync.Mutex
	bucket pmtu.Bucket
	buf    []byte
	out    [1][]byte
}

const (
	pmtuICMPRate  = 100
	pmtuICMPBurst = 50
)

// refreshPMTU looks at the kernel's path MTU for p's endpoint when due,
// and has a probe sent when one is due (kickProbe).
func (p *Peer) refreshPMTU(now time.Time) {
	st := p.pathState()
	if now.UnixNano() < st.next.Load() {
		return
	}
	if !st.mu.TryLock() {
		return // another goroutine is looking
	}
	ep, ok := p.refreshKernelLocked(now)
	p.refreshTCPWatchLocked(now)
	p.refreshDFLocked(now)
	st.mu.Unlock()
	if ok {
		p.kickProbe(now, ep)
	}
}

// pathState returns p's path state, allocating it on first use.
func (p *Peer) pathState() *peerPMTU {
	if st := p.pmtu.Load(); st != nil {
		return st
	}
	p.pmtu.CompareAndSwap(nil, new(peerPMTU))
	return p.pmtu.Load()
}

// pathMTU is p's path MTU and how it was learned, for status.
func (p *Peer) pathMTU() (int, pmtuSource) {
	st := p.pmtu.Load()
	if st == nil {
		return 0, pmtuUnknown
	}
	return int(st.path.Load()), pmtuSource(st.source.Load())
}

// refreshKernelLocked is refreshPMTU's look at the kernel, under
// p.pmtu.mu. It reports p's endpoint, if it has one.
func (p *Peer) refreshKernelLocked(now time.Time) (conn.Endpoint, bool) {
	st := p.pmtu.Load()
	st.next.Store(now.Add(pmtuRefresh).UnixNano())
	ep, ok := p.endpoint()
	if !ok {
		return ep, false
	}
	mtu := -1
	if pc := p.d.socks.pathConn(ep.Dst); pc != nil {
		if m, err := pc.PathMTU(); err == nil {
			mtu = m
		}
	}
	switch {
	case mtu > 0:
	case ep.Dst == st.dst:
		// No socket to ask for now (being replaced, or past the cap):
		// what the same endpoint's socket said still holds.
		return ep, true
	default:
		// A new endpoint whose socket may be moments away: look again
		// soon rather than let a session's first second go unclamped.
		st.next.Store(now.Add(pmtuRefreshSoon).UnixNano())
		mtu = 0
	}
	if ep.Dst != st.dst {
		st.probed.Store(0) // found for another path
		st.tcp.until.Store(0)
		st.resetDFLocked()
	}
	st.dst = ep.Dst
	st.kernel.Store(int32(mtu))
	p.setPathMTU(ep.Dst)
	return ep, true
}

// setPathMTU recomputes p's path MTU from what is known of it: the lower
// of the kernel's figure and the probes'. A probe figure that is only a
// floor is shown but limits nothing: after the tunnel's MTU grows, what
// carried the old one says nothing about the new. Logged when it changes.
// Called under p.pmtu.mu.
func (p *Peer) setPathMTU(dst netip.AddrPort) {
	st := p.pmtu.Load()
	path, src := int(st.kernel.Load()), pmtuKernel
	limit := path
	if pr := int(st.probed.Load()); pr > 0 && (path == 0 || pr <= path) {
		path, src = pr, pmtuProbe
		if st.probedCap.Load() {
			limit = pr
		}
	}
	if st.tcp.until.Load() != 0 && st.probed.Load() == 0 && (limit == 0 || pmtuTCPFloor < limit) {
		path, src, limit = pmtuTCPFloor, pmtuTCP, pmtuTCPFloor
	}
	if path == 0 {
		src = pmtuUnknown
	}
	v6 := dst.Addr().Is6() && !dst.Addr().Is4In6()
	inner := pmtu.InnerMTU(limit, v6)
	if tm := int(p.d.mtu.Load()); inner >= tm {
		inner = 0
	}
	// Below the tunnel MTU, rounded down to the 16 bytes WireGuard pads
	// each packet to: a packet just under the path's figure would be
	// padded into a datagram the path fragments.
	inner &^= 15
	old := st.path.Swap(int32(path))
	oldSrc := st.source.Swap(uint32(src))
	st.inner.Store(int32(inner))
	if int(old) != path || pmtuSource(oldSrc) != src {
		limit := "the tunnel MTU fits it"
		if inner > 0 {
			limit = fmt.Sprintf("inner packets up to %d", inner)
		}
		p.d.opts.Logf("device: peer %s: path MTU %d (%s), %s", p.pub.Base64()[:8], path, src, limit)
	}
}

// pathConn is the connected socket of dst, nil when it has none that
// knows its path MTU.
func (s *peerSockets) pathConn(dst netip.AddrPort) conn.PathMTUConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[dst]
	if e == nil || e.pc == nil {
		return nil
	}
	pc, _ := e.pc.(conn.PathMTUConn)
	return pc
}

// fitOutbound applies p's path MTU to a packet read from the TUN before it
// is sent: a SYN's MSS is clamped, and a packet too big for the path is
// answered as a router would, with an ICMP error written back to the TUN,
// and reported false (not to be sent). Without a budget for the error the
// packet is sent as it is, fragmented outside: never worse than today.
func (d *Device) fitOutbound(p *Peer, pkt []byte, now time.Time) bool {
	st := p.pmtu.Load()
	if st == nil {
		return true // nothing known of the path yet (fitBatch refreshes first)
	}
	inner := int(st.inner.Load())
	if inner == 0 {
		if above := int(st.tcp.above.Load()); above > 0 && len(pkt) > above {
			d.watchTCP(p, pkt, now)
		}
		if st.df.watch.Load() && len(pkt) > int(st.df.above.Load()) {
			d.seenDF(p, st, pkt, now)
		}
		if inner = int(st.inner.Load()); inner == 0 {
			return true
		}
		// This very resend showed the black hole: it is answered now,
		// not at the inner TCP's next timeout.
	}
	if len(pkt) <= inner {
		if pmtu.ClampMSS(pkt, inner) {
			d.ctr.inc(cTxMSSClamped)
		}
		return true
	}
	s := &d.pmtuSig
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		s.bucket = pmtu.NewBucket(pmtuICMPRate, pmtuICMPBurst)
		s.buf = make([]byte, tun.Headroom, tun.Headroom+1280)
	}
	r, ok := pmtu.TooBig(s.buf[:tun.Headroom], pkt, inner)
	if !ok || !s.bucket.Allow(now) {
		return true
	}
	s.out[0] = r
	if _, err := d.tun.Write(s.out[:], tun.Headroom); err != nil {
		return true
	}
	d.ctr.inc(cTxPMTUSignals)
	return false
}

// fitInbound clamps the MSS of a SYN that came through the tunnel from p,
// so the local end never sends segments the path will not carry.
func (d *Device) fitInbound(p *Peer, pkt []byte, now time.Time) {
	p.refreshPMTU(now)
	if inner := int(p.pmtu.Load().inner.Load()); inner > 0 && pmtu.ClampMSS(pkt, inner) {
		d.ctr.inc(cRxMSSClamped)
	}
}

// fitBatch applies fitOutbound to the n packets of rb, refreshing each
// peer's path MTU first when it is due. It reports whether it took a
// packet out (its peer set to nil).
func (d *Device) fitBatch(rb *batch, n int, now time.Time) bool {
	var last *Peer
	taken := false
	for i := 0; i < n; i++ {
		p := rb.peers[i]
		if p == nil {
			continue
		}
		if p != last {
			p.refreshPMTU(now)
			last = p
		}
		if !d.fitOutbound(p, rb.bufs[i][stagedFrom:stagedFrom+rb.sizes[i]], now) {
			rb.peers[i] = nil
			taken = true
		}
	}
	return taken
}
