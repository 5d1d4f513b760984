package device

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/pmtu"
	"github.com/fips-go/fips-go/device/noise"
)

// Path MTU probes (docs/architecture.md, "Paths narrower than the
// tunnel"): the search that needs no ICMP. The data path only notices,
// once a second per peer (refreshPMTU), that a probe is due and wakes the
// timer wheel; the wheel's goroutine sends the probes and the answers.
// The receive path recognises both (pmtuControl) before anything would
// count them as malformed packets.

// peerProbe is a peer's probe state, allocated when the peer first
// carries traffic over a socket that can send probes, or first receives
// one. mu is a leaf lock.
type peerProbe struct {
	mu      sync.Mutex
	pr      *pmtu.Prober   // nil until the peer is probed
	dst     netip.AddrPort // the endpoint pr searches
	max     int            // the tunnel MTU pr searches up to
	answers pmtu.Bucket    // the peer's probes we answer
	// kicked: the data path found a probe due. Between searches the
	// wheel probes only then, so that a confirmation, whose answer is
	// data, never keeps an idle session alive by itself.
	kicked bool
	// ackOwed is the size of a probe to answer (0: none): the receive
	// path notes it, the wheel sends the answer. One at a time; a newer
	// probe replaces an older one.
	ackOwed atomic.Int32
}

// pmtuAnswerRate bounds the answers to one peer's probes: a search sends
// one probe at a time, so an honest peer needs a few a second at most.
const (
	pmtuAnswerRate  = 10
	pmtuAnswerBurst = 10
)

// pmtuConfirm is how often a busy peer's path is probed at the size found
// (one probe, each way): a path that shrinks is noticed within seconds,
// not at the next search ten minutes later, for at most one datagram of
// the tunnel's MTU per interval.
const pmtuConfirm = 3 * time.Second

// A peer's own probe setting (PeerConfig.PathProbes).
const (
	probesDefault uint32 = iota
	probesOn
	probesOff
)

// probesOn reports whether p's path is probed.
func (p *Peer) probesOn() bool {
	switch p.probeMode.Load() {
	case probesOn:
		return true
	case probesOff:
		return false
	}
	return p.d.opts.PathProbes
}

// setPathProbes records p's own probe setting. Turned off, what the
// probes found is forgotten with the search (a stock peer's path is the
// kernel's business); turned on, the next kick starts a search.
func (p *Peer) setPathProbes(on bool) {
	mode := probesOff
	if on {
		mode = probesOn
	}
	p.probeMode.Store(mode)
	st := p.pmtu.Load()
	if on || st == nil {
		return
	}
	pp := st.probe.Load()
	if pp == nil {
		return
	}
	pp.mu.Lock()
	dst := pp.dst
	pp.pr, pp.kicked = nil, false
	pp.mu.Unlock()
	p.setProbed(dst, 0, false)
}

// probeSender sends one datagram that the path may not fragment.
type probeSender interface{ SendProbe(b []byte) error }

// sendFunc adapts a test's function to probeSender.
type sendFunc func(b []byte) error

func (f sendFunc) SendProbe(b []byte) error { return f(b) }

// probeConn is how probes reach dst: its connected socket, or (tests) the
// bind through opts.probeSend; nil when neither exists.
func (d *Device) probeConn(ep conn.Endpoint) probeSender {
	if pc := d.socks.pathConn(ep.Dst); pc != nil {
		return pc
	}
	if f := d.opts.probeSend; f != nil {
		return sendFunc(func(b []byte) error { return f(d.bind, b, ep) })
	}
	return nil
}

// probeState returns p's probe state, allocating it on first use.
func (p *Peer) probeState() *peerProbe {
	st := p.pathState()
	if pp := st.probe.Load(); pp != nil {
		return pp
	}
	pp := &peerProbe{answers: pmtu.NewBucket(pmtuAnswerRate, pmtuAnswerBurst)}
	if st.probe.CompareAndSwap(nil, pp) {
		return pp
	}
	return st.probe.Load()
}

// probeBase is the base size of a search: what an IPv6 path must carry
// (1280 bytes), as plaintext, in 16-byte steps.
func probeBase(v6 bool) int { return (1280 - pmtu.Overhead(v6)) &^ 15 }

// kickProbe is refreshPMTU's part, under p.pmtu.mu, once a second per
// peer that carries traffic: it starts a search for a new endpoint (or a
// new tunnel MTU) and wakes the wheel when a probe is due. A completed
// search is repeated only when its time has come and the peer is busy, so
// idle peers cost the wheel nothing.
func (p *Peer) kickProbe(now time.Time, ep conn.Endpoint) {
	d := p.d
	if !p.probesOn() || d.probeConn(ep) == nil {
		return
	}
	pp := p.probeState()
	tm := int(d.mtu.Load())
	pp.mu.Lock()
	switch {
	case pp.pr == nil || pp.dst != ep.Dst:
		v6 := ep.Dst.Addr().Is6() && !ep.Dst.Addr().Is4In6()
		pp.pr = pmtu.NewProber(pmtu.ProberOptions{Min: min(probeBase(v6), tm), Max: tm, ConfirmInterval: pmtuConfirm}, now)
		pp.dst, pp.max = ep.Dst, tm
	case pp.max != tm:
		// What carried the old MTU is a floor the search goes up from.
		pp.pr.SetMax(tm, now)
		pp.max = tm
	}
	due := !now.Before(pp.pr.Due())
	pp.kicked = pp.kicked || due
	result, capped := pp.pr.Result(), pp.pr.Capped()
	pp.mu.Unlock()
	p.setProbed(ep.Dst, result, capped)
	if due {
		p.wakeAt(now)
	}
}

// wakeAt has the timer wheel visit p at at (or earlier).
func (p *Peer) wakeAt(at time.Time) {
	p.mu.Lock()
	if p.scheduledAt.IsZero() || at.Before(p.scheduledAt) {
		p.scheduledAt = at
		p.d.wheel.schedule(p, at)
	}
	p.mu.Unlock()
}

// runProbe is the wheel's part: answer a probe the peer sent, then send
// the next probe of a search when it is due, and come back for the one
// after. Probes go only while a session is up and the send queue is short
// enough for the receiver's replay window to take the probe's counter
// ahead of the queued packets (see directReorder).
func (p *Peer) runProbe(now time.Time) {
	st := p.pmtu.Load()
	if st == nil || p.removed.Load() {
		return
	}
	pp := st.probe.Load()
	if pp == nil {
		return
	}
	if size := pp.ackOwed.Swap(0); size > 0 {
		p.sendProbeAck(int(size), now)
	}
	if !p.probesOn() || !p.canProbe(now) {
		return // the next kick, with traffic, tries again
	}
	pp.mu.Lock()
	if pp.pr == nil || !pp.pr.Searching() && !pp.kicked {
		pp.mu.Unlock()
		return
	}
	dst := pp.dst
	size := pp.pr.Poll(now)
	pp.kicked = false
	next, searching, result, capped := pp.pr.Due(), pp.pr.Searching(), pp.pr.Result(), pp.pr.Capped()
	pp.mu.Unlock()
	p.setProbed(dst, result, capped)
	if size > 0 {
		if ep, ok := p.endpoint(); ok && ep.Dst == dst {
			p.sendProbe(ep, size, now)
		}
	}
	if searching {
		p.wakeAt(next)
	}
}

func (p *Peer) canProbe(now time.Time) bool {
	if t := p.live.Load(); t != nil && int(t.queued.Load()) >= directReorder {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.currentSendKeypairLocked(now) != nil
}

// sendProbe seals a probe of size bytes (plaintext) under the current
// session and sends it with don't-fragment set. It takes a counter but
// leaves the timers alone: a lost probe is not a lost packet, and must
// not start a handshake.
func (p *Peer) sendProbe(ep conn.Endpoint, size int, now time.Time) {
	d := p.d
	pc := d.probeConn(ep)
	if pc == nil {
		return
	}
	b := d.pools.Load().small.tryGet()
	if b == nil {
		return // busy: the probe counts as lost, and is sent again
	}
	defer b.release()
	buf := b.bufs[0]
	if stagedFrom+size+noise.TagSize > len(buf) {
		return
	}
	clear(buf[stagedFrom : stagedFrom+size])
	pmtu.AppendProbe(buf[stagedFrom:stagedFrom], size)
	b.sizes[0], b.n = size, 1
	p.mu.Lock()
	kp := p.currentSendKeypairLocked(now)
	if kp == nil || p.removed.Load() || !kp.Hold() {
		p.mu.Unlock()
		return
	}
	c, ok := kp.NextCounter()
	p.mu.Unlock()
	if !ok {
		kp.Release()
		return
	}
	b.counters[0], b.sendKP, b.peer = c, kp, p
	d.seal(b) // releases kp
	if b.sizes[0] == 0 {
		return
	}
	if err := pc.SendProbe(b.bufs[0][:b.sizes[0]]); err == nil {
		d.ctr.inc(cTxPMTUProbes)
		p.txBytes.Add(uint64(b.sizes[0]))
	}
}

// sendProbeAck answers a probe of size: a 16-byte plaintext, sent as any
// data packet is.
func (p *Peer) sendProbeAck(size int, now time.Time) {
	b := p.d.pools.Load().small.tryGet()
	if b == nil {
		return
	}
	ack := pmtu.AppendAck(b.bufs[0][stagedFrom:stagedFrom], size)
	b.sizes[0], b.n = len(ack), 1
	p.d.ctr.inc(cRxPMTUProbes)
	p.sendBatch(b, now)
}

// pmtuControl handles a plaintext that is not an IP packet (its version
// nibble is 0), on the receive path with d.aipMu held: a probe is noted
// for the wheel to answer, an answer moves the search on. It reports
// whether the wheel should run for p now (p.wakeAt, after aipMu). A
// plaintext that is neither is counted malformed, as before.
func (d *Device) pmtuControl(p *Peer, pt []byte, now time.Time) (wake bool) {
	size, probe, err := pmtu.ParseControl(pt)
	if err != nil {
		d.ctr.inc(cRxMalformedInner)
		return false
	}
	pp := p.probeState()
	if probe {
		pp.mu.Lock()
		ok := pp.answers.Allow(now)
		pp.mu.Unlock()
		if ok {
			pp.ackOwed.Store(int32(size))
		}
		return ok
	}
	d.ctr.inc(cRxPMTUAcks)
	pp.mu.Lock()
	if pp.pr == nil {
		pp.mu.Unlock()
		return false
	}
	more := pp.pr.Acked(size, now)
	dst, result, capped := pp.dst, pp.pr.Result(), pp.pr.Capped()
	pp.mu.Unlock()
	p.setProbed(dst, result, capped)
	return more
}

// setProbed records what the probes found for dst (a plaintext size, 0:
// nothing; capped: the path's limit, not a floor) and recomputes the path
// MTU when it changed.
func (p *Peer) setProbed(dst netip.AddrPort, result int, capped bool) {
	st := p.pathState()
	path := 0
	if result > 0 {
		v6 := dst.Addr().Is6() && !dst.Addr().Is4In6()
		path = result + pmtu.Overhead(v6)
	}
	if int(st.probed.Load()) == path && st.probedCap.Load() == capped {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dst != dst {
		return // the endpoint moved meanwhile: a new search comes
	}
	st.probed.Store(int32(path))
	st.probedCap.Store(capped)
	p.setPathMTU(dst)
}
