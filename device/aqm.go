package device

import (
	"sync"
	"time"

	"github.com/fips-go/fips-go/device/internal/aqm"
)

// peerAQM is a peer's queue management, one controller per direction
// (RFC 8289 CoDel on the time a packet has spent in the device). The
// outbound one decides as a crypto worker starts sealing a batch, so a
// signal can still be an ECN mark on the plaintext; the inbound one as the
// receive sequencer delivers, after opening.
type peerAQM struct {
	txMu sync.Mutex // guards tx: seal runs on any crypto worker
	tx   aqm.CoDel
	rx   aqm.CoDel // guarded by recvq.flushMu (deliver)
}

func (a *peerAQM) init(p aqm.Params) {
	a.tx, a.rx = aqm.New(p), aqm.New(p)
}

// aqmOutbound runs the outbound controller over b's packets before they
// are sealed. A packet it signals is marked CE if its flow is ECN-capable
// and otherwise dropped (its size set to -1, which seal skips). Keepalives
// and other sparse packets (sparseSize) are never signalled: dropping one
// frees next to no queue, and theirs is the latency the controller is there
// to protect.
func (p *Peer) aqmOutbound(b *batch, now time.Time) {
	d := p.d
	if d.aqmOff || b.born.IsZero() {
		return
	}
	sojourn := now.Sub(b.born)
	t := p.carry()
	behind := len(t.sendq.slots) > 1
	var marks, drops uint64
	t.aqm.txMu.Lock()
	for i := 0; i < b.n; i++ {
		size := b.sizes[i]
		if size <= sparseSize {
			continue
		}
		empty := !behind && i == b.n-1
		if !t.aqm.tx.Signal(sojourn, now, empty) {
			continue
		}
		if aqm.Mark(b.bufs[i][stagedFrom : stagedFrom+size]) {
			marks++
		} else {
			b.sizes[i] = -1
			drops++
		}
	}
	t.aqm.txMu.Unlock()
	if marks > 0 {
		d.ctr.add(cTxAQMMarks, marks)
	}
	if drops > 0 {
		d.ctr.add(cTxAQMDrops, drops)
	}
}

// aqmInbound runs the inbound controller on one opened packet about to be
// delivered; false means drop it. Called in nonce order under recvq's
// flushMu.
func (p *Peer) aqmInbound(pkt []byte, sojourn time.Duration, now time.Time, empty bool) bool {
	if len(pkt) <= sparseSize || !p.carry().aqm.rx.Signal(sojourn, now, empty) {
		return true
	}
	if aqm.Mark(pkt) {
		p.d.ctr.inc(cRxAQMMarks)
		return true
	}
	p.d.ctr.inc(cRxAQMDrops)
	return false
}
