package device

import (
	"encoding/binary"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/obfs"
	"github.com/fips-go/fips-go/device/internal/ratelimit"
	"github.com/fips-go/fips-go/device/noise"
)

// hsMsg is a queued handshake message, copied out of the receive batch so
// that a handshake flood cannot hold data buffers.
type hsMsg struct {
	buf [noise.InitiationSize]byte
	n   int
	ep  conn.Endpoint
	// slot says why triage queued an initiation without MAC2 under load
	// (see handleHandshake).
	slot hsSlot
}

// hsSlot is why triage queued a handshake message.
type hsSlot uint8

const (
	slotPlain  hsSlot = iota // not under load, with MAC2, or not an initiation
	slotKnown                // an initiation from where a configured peer is
	slotAnon                 // an initiation that may be answered within Options.anonymousHandshakeTime
	slotCookie               // an initiation that may earn a cookie reply and no more
)

// queueHandshake copies a handshake message to the handshake workers, or
// drops it when it fails triage or its queue is full.
func (d *Device) queueHandshake(msg []byte, ep conn.Endpoint) {
	d.queueHandshakeAs(noise.PeekType(msg), msg, ep)
}

// queueHandshakeAs is queueHandshake for a message of standard type typ,
// whose type word may be an obfuscated one.
func (d *Device) queueHandshakeAs(typ uint32, msg []byte, ep conn.Endpoint) {
	want := 0
	switch typ {
	case noise.TypeInitiation:
		want = noise.InitiationSize
	case noise.TypeResponse:
		want = noise.ResponseSize
	case noise.TypeCookieReply:
		want = noise.CookieReplySize
	}
	if len(msg) != want {
		d.ctr.inc(cRxGarbage)
		return
	}
	now := d.now()
	q, drop, slot := d.triage(typ, msg, ep, now)
	if q == nil {
		d.ctr.inc(drop)
		return
	}
	if q.put(msg, ep, slot, false) {
		return
	}
	// While the initiations worked on are mostly answered (a restart
	// storm: every road warrior at once), the anonymous queue takes a
	// backlog of up to hsBacklog times its size rather than leave the
	// kernel to drop what the workers would answer within seconds.
	// A message that can earn a cookie reply and no more is not worth
	// the wait. Asked only once the queue is at its base size: Yield
	// takes a lock the workers share.
	if q == d.flood.hsq && slot != slotCookie && d.flood.yield.Productive(now) && q.put(msg, ep, slot, true) {
		return
	}
	d.ctr.inc(cRxHandshakeQueueFull)
}

// underLoad reports whether handshakes arrive faster than they are handled,
// now or within the last ratelimit.LoadHold; then MAC2 (a cookie proving
// the source address) is required.
func (d *Device) underLoad(now time.Time) bool {
	return d.flood.load.Observe(len(d.flood.hsq.q), d.flood.hsq.base, now)
}

// handshakeWorker handles queued handshake messages until the device
// stops, the priority queue's first. The cookie replies it makes wait in
// out until the queues are empty or out is full, and then go out together.
func (d *Device) handshakeWorker() {
	defer d.helpersWG.Done()
	var out replies
	for {
		var m *hsMsg
		from := d.flood.hsqPrio
		select {
		case m = <-d.flood.hsqPrio.q:
		default:
			select {
			case <-d.stop:
				return
			case m = <-d.flood.hsqPrio.q:
			case m = <-d.flood.hsq.q:
				from = d.flood.hsq
			}
		}
		d.handleHandshake(m, &out)
		from.release(m)
		if len(d.flood.hsqPrio.q)+len(d.flood.hsq.q) == 0 {
			d.flushReplies(&out)
		}
	}
}

// replyBatch is the most cookie replies a handshake worker holds before
// it sends them.
const replyBatch = 64

// replies are one handshake worker's cookie replies waiting to be sent.
type replies struct {
	n    int
	msgs [replyBatch][noise.CookieReplySize]byte
	bufs [replyBatch][]byte
	eps  [replyBatch]conn.Endpoint
}

// flushReplies sends the waiting replies, in one call when the bind can
// send each to its own endpoint (a flood's replies cost a syscall apiece
// otherwise, a large share of the victim's CPU).
func (d *Device) flushReplies(out *replies) {
	if out.n == 0 {
		return
	}
	sent := 0
	if es, ok := d.bind.(conn.EachSender); ok && !anyStream(out.eps[:out.n]) {
		sent, _ = es.SendEach(out.bufs[:out.n], out.eps[:out.n])
	} else {
		for i := range out.n {
			if d.send(out.bufs[i:i+1], out.eps[i]) == nil {
				sent++
			}
		}
	}
	d.ctr.add(cCookieRepliesSent, uint64(sent))
	clear(out.bufs[:out.n])
	out.n = 0
}

// knownUnprovenTime is the share of each second (and the burst) that
// initiations without MAC2 from configured peers' endpoints may take under
// load when they are not answered (a spoofer's; the peer's own are answered
// and not charged); past it they get cookie replies like anyone else. A
// spoofer of those addresses gets a few slots a second per address from
// triage (limitKnown) and no more than this in all: 2% of one core.
const knownUnprovenTime = 20 * time.Millisecond

func (d *Device) handleHandshake(m *hsMsg, out *replies) {
	msg, ep := m.buf[:m.n], m.ep
	now := d.now()
	typ, ok := d.standardType(noise.PeekType(msg))
	if !ok {
		d.ctr.inc(cRxObfsDropped)
		return
	}
	if typ == noise.TypeCookieReply {
		obfs.Standard(msg, typ)
		d.handleCookieReply(msg, now)
		return
	}
	checker := d.checker.Load()
	if checker == nil || !checker.CheckMAC1(msg) {
		d.ctr.inc(cRxHandshakeBadMAC)
		return
	}
	stranger := false
	var unproven *ratelimit.Share // charged for an unproven initiation not answered
	if d.underLoad(now) {
		switch {
		case checker.CheckMAC2(msg, ep.Dst, now):
			if !d.flood.limit.Allow(ep.Dst.Addr(), now) {
				d.ctr.inc(cRxHandshakeRateLimited)
				return
			}
			stranger = typ == noise.TypeInitiation && !d.known.has(ep.Dst)
		case m.slot == slotPlain && typ == noise.TypeInitiation:
			// Queued before the load began: it was let in then, and is
			// answered rather than sent for a cookie, which would cost
			// its peer Rekey-Timeout. At most a quarter of the queue
			// gets in so before the load shows. Charged like the
			// anonymous ones if it is not answered.
			unproven = d.flood.anonTime
		case m.slot == slotKnown && typ == noise.TypeInitiation && d.flood.knownTime.Allow(now):
			// From where a configured peer is: answered at once rather
			// than after the cookie round trip, which a standard
			// initiator completes only at its next attempt, Rekey-Timeout
			// later. Bounded in time in all (knownUnprovenTime) and per
			// address by triage.
			unproven = d.flood.knownTime
		case m.slot == slotAnon && typ == noise.TypeInitiation && d.flood.anonTime != nil && d.flood.anonTime.Allow(now):
			// From anywhere, within what unanswered ones may cost
			// (Options.anonymousHandshakeTime): a flood's never are
			// answered, so it spends the share at once and gets cookie
			// replies; a restarted gateway's road warriors always are,
			// so they are never charged and get their sessions without
			// the cookie round trip.
			unproven = d.flood.anonTime
		default:
			// Triage did not charge an anonymous slot to the cookie
			// replies' budgets; it pays now.
			if m.slot == slotAnon && (!d.flood.limitCookies.Allow(ep.Dst.Addr(), now) || !d.flood.cookieBudget.Allow(now)) {
				d.ctr.inc(cRxHandshakeRateLimited)
				return
			}
			d.queueCookieReply(checker, msg, ep, now, out)
			return
		}
	}
	// The MACs are checked: the parsers get the standard type word.
	obfs.Standard(msg, typ)
	switch typ {
	case noise.TypeInitiation:
		d.ctr.inc(cHandshakeInitiationsReceived)
		answered := d.handleInitiation(msg, ep, now)
		d.flood.yield.Record(answered, now)
		// Charged the wall time it took: on a CPU that a flood contends
		// that is more than the CPU time, and fewer pass.
		switch {
		case stranger && answered:
			// A configured peer writing from an address we did not know
			// (a road warrior after a restart): not the work the
			// strangers' budget bounds, which only a peer's own key can
			// prove (a replayed initiation is not answered). Its token
			// goes back and its time is not charged.
			d.flood.strangers.Refund()
		case stranger:
			d.flood.strangerTime.Charge(d.now().Sub(now))
		case unproven != nil && !answered:
			unproven.Charge(d.now().Sub(now))
		}
	case noise.TypeResponse:
		d.ctr.inc(cHandshakeResponsesReceived)
		d.handleResponse(msg, ep, now)
	}
}

// queueCookieReply adds the cookie reply to msg to out, sending what out
// holds first if it is full; the worker sends the rest once its queues are
// empty (see flushReplies).
func (d *Device) queueCookieReply(checker *noise.CookieChecker, msg []byte, ep conn.Endpoint, now time.Time, out *replies) {
	if out.n == replyBatch {
		d.flushReplies(out)
	}
	// The sender index sits right after the type in both handshake messages.
	sender := binary.LittleEndian.Uint32(msg[4:8])
	reply, err := checker.CreateReply(msg, sender, ep.Dst, now)
	if err != nil {
		return
	}
	ob := d.obfs.Load()
	b, _, err := wrapHandshake(ob, noise.TypeCookieReply, out.msgs[out.n][:0], d.opts.Rand, reply.AppendTo)
	if err != nil {
		return
	}
	maskHandshake(ob, b, noise.TypeCookieReply)
	out.bufs[out.n] = b
	out.eps[out.n] = ep
	out.n++
}

func (d *Device) handleCookieReply(msg []byte, now time.Time) {
	r, err := noise.ParseCookieReply(msg)
	if err != nil {
		d.ctr.inc(cRxGarbage)
		return
	}
	e, ok := d.index.Lookup(r.Receiver)
	if !ok {
		d.ctr.inc(cRxUnknownIndex)
		return
	}
	if err := e.peer.cookies.ConsumeReply(&r, now); err != nil {
		d.ctr.inc(cRxHandshakeRejected)
		return
	}
	d.ctr.inc(cRxCookieReplies)
	e.peer.retryWithCookie(now)
}

// retryWithCookie sends the initiation again at once now that it can carry
// MAC2, instead of waiting out Rekey-Timeout: a responder under load asks
// for the cookie precisely so that it can answer the retry. Only once per
// attempt: a cookie reply to the retry itself waits for the timer, so a
// responder cannot keep us initiating at network speed.
func (p *Peer) retryWithCookie(now time.Time) {
	p.mu.Lock()
	again := p.hsIndex != 0 && !p.initByCookie
	p.mu.Unlock()
	if again {
		p.initiateAttempt(now, true, true)
	}
}

// handleInitiation answers a valid initiation from a known peer, and
// reports whether it did. Unknown keys, replays and floods are dropped
// without a reply.
func (d *Device) handleInitiation(msg []byte, ep conn.Endpoint, now time.Time) bool {
	static := d.static.Load()
	init, err := noise.ParseInitiation(msg)
	if err != nil || static == nil {
		d.ctr.inc(cRxHandshakeRejected)
		return false
	}
	info, err := noise.OpenInitiation(static, &init)
	if err != nil {
		d.ctr.inc(cRxHandshakeRejected)
		return false
	}
	p := d.lookupPeer(info.Remote)
	if p == nil {
		d.ctr.inc(cRxHandshakeRejected)
		return false
	}
	var out [obfs.MaxDatagram]byte
	resp, ok := p.answerInitiation(&info, now, out[:0])
	if !ok {
		d.ctr.inc(cRxHandshakeRejected)
		return false
	}
	// Handshake messages count as transfer, as in wireguard-go and the kernel.
	p.rxBytes.Add(uint64(len(msg)))
	p.setEndpoint(ep)
	p.txBytes.Add(uint64(len(resp)))
	if err := d.send([][]byte{resp}, ep); err == nil {
		d.ctr.inc(cHandshakeResponsesSent)
	} else {
		p.txBytes.Add(-uint64(len(resp)))
	}
	d.flood.answered.Add(1)
	return true
}

// answerInitiation accepts an opened initiation and derives the responder's
// session, which waits in Next until the initiator's first data confirms it.
func (p *Peer) answerInitiation(info *noise.InitiationInfo, now time.Time, out []byte) ([]byte, bool) {
	d := p.d
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed.Load() {
		return nil, false
	}
	if err := p.hs.AcceptInitiation(info, now); err != nil {
		return nil, false
	}
	idx, err := d.index.Insert(indexEntry{peer: p})
	if err != nil {
		return nil, false
	}
	resp, err := p.hs.CreateResponse(d.opts.Rand, idx)
	if err != nil {
		d.index.Delete(idx)
		return nil, false
	}
	nkp, err := p.hs.DeriveKeypair(now)
	if err != nil {
		d.index.Delete(idx)
		return nil, false
	}
	ob := d.obfs.Load()
	out, msg, err := wrapHandshake(ob, noise.TypeResponse, out, d.opts.Rand, resp.AppendTo)
	if err != nil {
		d.index.Delete(idx)
		nkp.Wipe()
		return nil, false
	}
	p.installLocked(nkp, idx)
	p.timers.SessionDerived(now)
	p.timers.AuthenticatedSent(now)
	p.timers.AuthenticatedTraversal(now)
	p.rescheduleLocked()
	p.cookies.AddMACs(msg, now)
	maskHandshake(ob, out, noise.TypeResponse)
	return out, true
}

// installLocked registers a new keypair under its index and rotates the
// peer's keypairs, freeing the indices of the ones that fall out.
func (p *Peer) installLocked(nkp *noise.Keypair, idx uint32) {
	d := p.d
	if p.hsIndex != 0 && p.hsIndex != idx {
		d.index.Delete(p.hsIndex)
	}
	p.hsIndex = 0
	if d.opts.keyLog != nil {
		d.opts.keyLog(nkp)
	}
	d.index.Replace(idx, indexEntry{peer: p, kp: &keypair{Keypair: nkp, peer: p}})
	for _, old := range p.kps.Install(nkp) {
		if old != nil {
			d.index.Delete(old.LocalIndex)
			old.Wipe()
		}
	}
}

func (d *Device) handleResponse(msg []byte, ep conn.Endpoint, now time.Time) {
	r, err := noise.ParseResponse(msg)
	if err != nil {
		d.ctr.inc(cRxHandshakeRejected)
		return
	}
	e, ok := d.index.Lookup(r.Receiver)
	if !ok || e.kp != nil {
		d.ctr.inc(cRxUnknownIndex)
		return
	}
	p := e.peer
	p.mu.Lock()
	if p.removed.Load() || p.hs.ConsumeResponse(&r, now) != nil {
		p.mu.Unlock()
		d.ctr.inc(cRxHandshakeRejected)
		return
	}
	nkp, err := p.hs.DeriveKeypair(now)
	if err != nil {
		p.mu.Unlock()
		d.ctr.inc(cRxHandshakeRejected)
		return
	}
	p.installLocked(nkp, r.Receiver)
	// Counted before anything can use the session, so that a reader who has
	// seen data under it also sees the handshake in the transfer bytes and
	// in handshakes_completed.
	p.rxBytes.Add(uint64(len(msg)))
	d.ctr.inc(cHandshakesCompleted)
	p.timers.HandshakeComplete(now)
	p.timers.SessionDerived(now)
	p.timers.AuthenticatedReceived(now)
	p.timers.AuthenticatedTraversal(now)
	p.rescheduleLocked()
	p.lastHSAt = now
	if p.resuming {
		p.resuming = false
		d.ctr.inc(cSessionsResumed)
	}
	haveStaged := len(p.staged) > 0
	p.sendStagedSoonLocked(now)
	p.mu.Unlock()
	for _, t := range p.fb.answeredAt(ep.Transport, now) {
		d.stream.Drop(conn.Endpoint{Dst: ep.Dst, Transport: t})
	}
	p.setEndpoint(ep)
	p.carry().lastRx.Store(now.Unix())
	p.emit(HandshakeCompleted, now)
	if !haveStaged {
		// The responder needs data under the new keys to confirm them.
		p.sendKeepalive(now)
	}
}

// initiate sends a handshake initiation. Unless retry is set (the timer's
// retransmission), it does nothing while a recent initiation is in flight.
func (p *Peer) initiate(now time.Time, retry bool) { p.initiateAttempt(now, retry, false) }

// initiateAttempt is initiate; byCookie says it answers a cookie reply.
func (p *Peer) initiateAttempt(now time.Time, retry, byCookie bool) {
	d := p.d
	ep, hasEp := p.endpoint()
	p.mu.Lock()
	if p.removed.Load() || !hasEp || d.static.Load() == nil {
		p.mu.Unlock()
		return
	}
	if !retry && p.hsIndex != 0 && now.Sub(p.lastInitAt) < d.tp.RekeyTimeout {
		p.mu.Unlock()
		return
	}
	if p.hsIndex != 0 {
		d.index.Delete(p.hsIndex)
		p.hsIndex = 0
	}
	idx, err := d.index.Insert(indexEntry{peer: p})
	if err != nil {
		p.mu.Unlock()
		return
	}
	init, err := p.hs.CreateInitiation(now, d.opts.Rand, idx)
	if err != nil {
		d.index.Delete(idx)
		p.mu.Unlock()
		return
	}
	ob := d.obfs.Load()
	out, msg, err := wrapHandshake(ob, noise.TypeInitiation, nil, d.opts.Rand, init.AppendTo)
	if err != nil {
		d.index.Delete(idx)
		p.mu.Unlock()
		return
	}
	p.hsIndex = idx
	p.lastInitAt = now
	p.initByCookie = byCookie
	p.cookies.AddMACs(msg, now)
	maskHandshake(ob, out, noise.TypeInitiation)
	p.timers.HandshakeInitiated(now, jitter())
	p.timers.AuthenticatedSent(now)
	p.timers.AuthenticatedTraversal(now)
	p.rescheduleLocked()
	p.mu.Unlock()
	at := p.fb.pick(ep)
	p.sendInitiation(ob, out, at.first)
	if at.race.Dst.IsValid() {
		time.AfterFunc(raceDelay, func() {
			p.mu.Lock()
			pending := p.hsIndex == idx && !p.removed.Load()
			p.mu.Unlock()
			if pending {
				p.sendInitiation(ob, out, at.race)
			}
		})
	}
}

// sendInitiation sends an initiation (and its junk) to ep.
func (p *Peer) sendInitiation(ob *obfs.Params, out []byte, ep conn.Endpoint) {
	d := p.d
	d.sendJunk(ob, ep)
	p.txBytes.Add(uint64(len(out)))
	if err := d.send([][]byte{out}, ep); err == nil {
		d.ctr.inc(cHandshakeInitiationsSent)
	} else {
		p.txBytes.Add(-uint64(len(out)))
		d.ctr.inc(cTxSendErrors)
	}
}

func (d *Device) lookupPeer(pub noise.PublicKey) *Peer {
	d.peersMu.RLock()
	defer d.peersMu.RUnlock()
	return d.peers[pub]
}
