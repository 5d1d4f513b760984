package device

import "time"

// idleMark is how the timer wheel tells that a peer has gone quiet: its
// count of queued batches as last seen, and since when that count has not
// moved. Only the wheel's goroutine (runTimers) touches it.
type idleMark struct {
	pushes uint64
	since  time.Time
}

// observe records the count seen at now. It reports whether the count has
// stood still for at least after and, if not, when to look again.
func (m *idleMark) observe(pushes uint64, now time.Time, after time.Duration) (idle bool, again time.Time) {
	if m.since.IsZero() || pushes != m.pushes {
		*m = idleMark{pushes: pushes, since: now}
		return false, now.Add(after)
	}
	if at := m.since.Add(after); now.Before(at) {
		return false, at
	}
	return true, time.Time{}
}

// idleRetry is how soon the wheel tries again when an idle peer's
// sequencer was busy (a flush or a reservation in progress).
const idleRetry = time.Second

// releaseIfIdle gives back the buffers a peer took to carry traffic (both
// sequencers' rings and scratch, and the send scratch, about 11 KiB) once
// the wheel has seen it carry nothing for KeepaliveTimeout: by then the
// protocol itself treats the peer as quiet (its passive keepalive is due),
// and a flow that pauses longer pays a few small allocations to resume,
// which is nothing next to 110 MiB held by 10,000 idle peers. The wheel
// looks only at its visits, and the last keepalive counts as traffic, so
// in practice the buffers go 20 to 30 s after the last data packet. It returns when the wheel
// should look again (zero: nothing to free). Called by the wheel without
// Peer.mu: the sequencers' flush locks rank above it.
func (p *Peer) releaseIfIdle(now time.Time) time.Time {
	t := p.live.Load()
	if t == nil {
		return time.Time{} // never carried a packet: nothing to free
	}
	sp, sHeld := t.sendq.usage()
	rp, rHeld := t.recvq.usage()
	if !sHeld && !rHeld {
		t.idle = idleMark{}
		return time.Time{}
	}
	idle, again := t.idle.observe(sp+rp, now, p.d.tp.KeepaliveTimeout)
	if !idle {
		return again
	}
	if !t.sendq.shrink(p.dropSendOut) || !t.recvq.shrink(nil) {
		return now.Add(idleRetry)
	}
	t.idle = idleMark{}
	return time.Time{}
}

// dropSendOut frees the send scratch; sendq.shrink calls it under
// sendq.flushMu, which guards sendOut. flushSend allocates it again.
func (p *Peer) dropSendOut() { p.carry().sendOut = nil }
