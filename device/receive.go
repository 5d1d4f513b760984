package device

import (
	"encoding/binary"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/pmtu"
	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/internal/packet"
	"github.com/fips-go/fips-go/tun"
)

// routeInbound sorts a received batch: handshake messages to the handshake
// queue, transport data grouped by keypair to the crypto workers, anything
// else dropped and counted. It returns the batch the receiver reads into next
// and how many datagrams were not transport data (what a handshake flood
// sends; the receiver paces on it), counted here because classifying an
// obfuscated datagram is not free.
func (d *Device) routeInbound(rb *batch, n int) (next *batch, handshakes int) {
	var first *keypair
	mixed := false
	ob := d.obfs.Load()
	pad := 0 // S4: transport messages stay behind their padding until opened
	if ob != nil {
		pad = ob.S4
	}
	for i := 0; i < n; i++ {
		rb.kps[i] = nil
		typ, msg, ok := unwrap(ob, rb.bufs[i][:rb.sizes[i]])
		if !ok {
			d.ctr.inc(cRxObfsDropped)
			mixed = true
			handshakes++
			continue
		}
		switch typ {
		case noise.TypeTransport:
			if len(msg) < noise.TransportOverhead {
				d.ctr.inc(cRxGarbage)
				mixed = true
				continue
			}
			e, ok := d.index.Lookup(binary.LittleEndian.Uint32(msg[4:8]))
			if !ok || e.kp == nil {
				d.ctr.inc(cRxUnknownIndex)
				mixed = true
				continue
			}
			rb.kps[i] = e.kp
			if first == nil {
				first = e.kp
			} else if e.kp != first {
				mixed = true
			}
		case noise.TypeInitiation, noise.TypeResponse, noise.TypeCookieReply:
			d.queueHandshakeAs(typ, msg, rb.eps[i])
			mixed = true
			handshakes++
		default:
			d.ctr.inc(cRxGarbage)
			mixed = true
			handshakes++
		}
	}
	if first == nil {
		return rb, handshakes
	}
	if !mixed {
		if n <= smallBatch {
			if sb := d.getSmall(); sb != nil {
				d.ctr.add(cRxTooBig, uint64(copyInto(sb, rb, n, 0)))
				if sb.n > 0 {
					d.queueInbound(sb, first, pad)
				} else {
					sb.release()
				}
			}
			return rb, handshakes
		}
		rb.n = n
		d.queueInbound(rb, first, pad)
		return d.getBatch(), handshakes
	}
	for i := 0; i < n; i++ {
		kp := rb.kps[i]
		if kp == nil {
			continue
		}
		ob := d.getBatch()
		if ob == nil {
			break
		}
		for j := i; j < n; j++ {
			if rb.kps[j] != kp {
				continue
			}
			rb.kps[j] = nil
			if !moveInto(ob, rb, j, 0) {
				d.ctr.inc(cRxTooBig)
			}
		}
		if ob.n == 0 {
			ob.release()
			continue
		}
		d.queueInbound(ob, kp, pad)
	}
	return rb, handshakes
}

// queueInbound hands b to kp's peer; pad is the S4 padding in front of
// each of its transport messages, which open takes off.
func (d *Device) queueInbound(b *batch, kp *keypair, pad int) {
	b.recvKP = kp
	b.rxPad = pad
	b.peer = kp.peer
	recvq := &kp.peer.carry().recvq
	if !recvq.reserve(d.stop) {
		b.release()
		return
	}
	recvq.push(b)
	d.dispatch(b)
}

// open decrypts every datagram of an inbound batch in place; ok[i] says
// which authenticated. Transport padding (S4) is taken off here, on a
// crypto worker, rather than on the single receive goroutine.
func (d *Device) open(b *batch) {
	kp := b.recvKP
	for i := 0; i < b.n; i++ {
		msg := b.bufs[i][:b.sizes[i]]
		if b.rxPad > 0 {
			msg = msg[:copy(msg, msg[min(b.rxPad, len(msg)):])]
		}
		_, ctr, err := noise.ParseTransportHeader(msg)
		if err != nil {
			b.ok[i] = false
			continue
		}
		b.counters[i] = ctr
		pt, err := kp.Open(&b.nonce, msg[stagedFrom:stagedFrom], ctr, msg[noise.TransportHeaderSize:])
		b.ok[i] = err == nil
		b.sizes[i] = len(pt)
	}
}

// deliverAll delivers batches in order; called by the receive sequencer.
func (p *Peer) deliverAll(bs []*batch) {
	for _, b := range bs {
		p.deliver(b)
	}
}

// deliver runs in nonce-arrival order per peer: replay check, source check
// against the peer's allowed IPs, then one batched TUN write. It also does
// the bookkeeping an authenticated packet triggers: key confirmation,
// roaming, timers.
func (p *Peer) deliver(b *batch) {
	d := p.d
	kp := b.recvKP
	now := d.now()
	if d.tp.Expired(kp.Created, now) {
		d.ctr.add(cRxExpiredKeypair, uint64(b.n))
		b.release()
		return
	}
	b.out = b.out[:0]
	valid, data := 0, 0
	var last int
	var rx uint64
	probeWake := false
	d.aipMu.RLock()
	if p.removed.Load() {
		// Opened before the removal wiped the keys: the peer's routes are
		// gone (or belong to a re-added peer of the same key), so nothing
		// of it may reach the TUN. Checked under aipMu, which the removal
		// takes after setting removed: a batch either sees the peer's
		// routes whole or sees it removed.
		d.aipMu.RUnlock()
		d.ctr.add(cRxPeerRemoved, uint64(b.n))
		b.release()
		return
	}
	sojourn := now.Sub(b.born)
	aqmOn := !d.aqmOff && !b.born.IsZero()
	behind := len(p.carry().recvq.slots) > 0
	for i := 0; i < b.n; i++ {
		if !b.ok[i] {
			d.ctr.inc(cRxDecryptFailed)
			continue
		}
		if !kp.replay.Accept(b.counters[i]) {
			d.ctr.inc(cRxReplayed)
			continue
		}
		valid++
		last = i
		rx += uint64(b.sizes[i] + noise.TransportOverhead)
		if b.sizes[i] == 0 {
			continue // keepalive
		}
		pkt := b.bufs[i][stagedFrom : stagedFrom+b.sizes[i]]
		if pmtu.IsControl(pkt) { // a path MTU probe or its answer (pmtu_probe.go)
			data++
			probeWake = d.pmtuControl(p, pkt, now) || probeWake
			continue
		}
		size, ok := innerLength(pkt)
		if !ok {
			d.ctr.inc(cRxMalformedInner)
			continue
		}
		if owner, ok := d.aip.LookupPacketSrc(pkt); !ok || owner != p {
			d.ctr.inc(cRxBadSource)
			continue
		}
		data++
		d.fitInbound(p, pkt[:size], now)
		if aqmOn && !p.aqmInbound(pkt, sojourn, now, !behind && i == b.n-1) {
			continue
		}
		b.out = append(b.out, b.bufs[i][:stagedFrom+size])
	}
	d.aipMu.RUnlock()
	if probeWake {
		p.wakeAt(now)
	}
	if valid > 0 {
		p.rxBytes.Add(rx)
		p.authenticatedReceive(kp, b.eps[last], data > 0, now)
	}
	if len(b.out) > 0 {
		if _, err := d.tun.Write(b.out, tun.Headroom); err == nil {
			d.ctr.add(cRxPackets, uint64(len(b.out)))
		} else if !d.stopping() {
			// Counted, not logged per batch: the data path never logs
			// per packet. The first one is logged so its cause is seen.
			if d.ctr[cRxTUNWriteErrors].Add(1) == 1 {
				d.opts.Logf("device: TUN write (logged once, then counted in rx_tun_write_errors): %v", err)
			}
		}
		d.observe(stageRx, b, len(b.out), d.now())
	}
	b.release()
}

// authenticatedReceive does what any authenticated data packet triggers.
func (p *Peer) authenticatedReceive(kp *keypair, ep conn.Endpoint, data bool, now time.Time) {
	d := p.d
	p.setEndpointIfChanged(ep)
	p.mu.Lock()
	confirmed := p.kps.Next == kp.Keypair
	if confirmed {
		// Key confirmation: the initiator used the session we answered.
		if old := p.kps.Confirm(kp.Keypair); old != nil {
			d.index.Delete(old.LocalIndex)
			old.Wipe()
		}
		p.timers.HandshakeComplete(now)
		p.lastHSAt = now
		p.sendStagedSoonLocked(now)
	}
	p.timers.AuthenticatedReceived(now)
	p.timers.AuthenticatedTraversal(now)
	p.carry().lastRx.Store(now.Unix())
	if data {
		p.timers.DataReceived(now)
	}
	p.rescheduleLocked()
	rekey := d.tp.RekeyOnReceive(kp.Created, kp.Initiator, now) && p.kps.Current == kp.Keypair
	p.mu.Unlock()
	if confirmed {
		p.emit(HandshakeCompleted, now)
	}
	if rekey {
		p.initiate(now, false)
	}
}

func (p *Peer) setEndpointIfChanged(ep conn.Endpoint) {
	p.epMu.RLock()
	same := p.hasEp && p.ep == ep
	p.epMu.RUnlock()
	if !same {
		p.setEndpoint(ep)
	}
}

// innerLength is the length the IP header claims, if the packet holds it.
func innerLength(pkt []byte) (int, bool) {
	switch packet.Version(pkt) {
	case 4:
		if len(pkt) < packet.IPv4HeaderLen {
			return 0, false
		}
		n := packet.IPv4Header(pkt).TotalLen()
		if n < packet.IPv4HeaderLen || n > len(pkt) {
			return 0, false
		}
		return n, true
	case 6:
		if len(pkt) < packet.IPv6HeaderLen {
			return 0, false
		}
		n := packet.IPv6HeaderLen + packet.IPv6Header(pkt).PayloadLen()
		if n > len(pkt) {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
