package device

import (
	"math/rand/v2"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
)

// stagedFrom is where plaintext starts in an outbound buffer: the transport
// header is written into the headroom in front of it, so sealing is in place.
const stagedFrom = tun.Headroom

// routeOutbound sends the n packets in rb to their peers and returns the
// batch the reader should use next. When every packet goes to one peer (the
// common case) rb itself is handed over.
func (d *Device) routeOutbound(rb *batch, n int) *batch {
	var first *Peer
	mixed := false
	noRoute := 0
	d.aipMu.RLock()
	for i := 0; i < n; i++ {
		p, ok := d.aip.LookupPacketDst(rb.bufs[i][stagedFrom : stagedFrom+rb.sizes[i]])
		if !ok {
			p = nil
			noRoute++
		}
		rb.peers[i] = p
		if p == nil || (first != nil && p != first) {
			mixed = true
		}
		if first == nil {
			first = p
		}
	}
	d.aipMu.RUnlock()
	if noRoute > 0 {
		d.ctr.add(cTxNoRoute, uint64(noRoute))
	}
	now := d.now()
	if d.fitBatch(rb, n, now) {
		mixed = true // packets answered with ICMP are taken out
	}
	if !mixed && first != nil {
		if n <= smallBatch {
			if sb := d.getSmall(); sb != nil {
				d.ctr.add(cTxTooBig, uint64(copyInto(sb, rb, n, stagedFrom)))
				if sb.n > 0 {
					d.splitSparse(sb, first, now)
					first.sendBatch(sb, now)
				} else {
					sb.release()
				}
			}
			return rb
		}
		rb.n = n
		d.splitSparse(rb, first, now)
		first.sendBatch(rb, now)
		return d.getBatch()
	}
	for i := 0; i < n; i++ {
		p := rb.peers[i]
		if p == nil { // unroutable (counted above), or moved already
			continue
		}
		ob := d.getBatch()
		if ob == nil {
			break
		}
		// Move every packet of p into ob.
		for j := i; j < n; j++ {
			if rb.peers[j] != p {
				continue
			}
			rb.peers[j] = nil
			if !moveInto(ob, rb, j, stagedFrom) {
				d.ctr.inc(cTxTooBig)
			}
		}
		if ob.n == 0 {
			ob.release()
			continue
		}
		p.sendBatch(ob, now)
	}
	return rb
}

// sparseSize is the size up to which a packet counts as sparse: pure TCP
// ACKs, pings, DNS queries, keystrokes. Such packets go ahead of a bulk
// flow's backlog (fq_codel serves sparse flows first for the same reason)
// and are never given congestion signals (aqmOutbound).
const sparseSize = 128

func sparseCount(sizes []int) int {
	c := 0
	for _, s := range sizes {
		if s <= sparseSize {
			c++
		}
	}
	return c
}

// splitSparse takes the few sparse packets out of rb, a batch for p mixed
// with bulk packets, and sends them first in a small batch that goes
// direct (see goesDirect): a ping or a DNS query read along with a bulk
// flow's packets does not wait behind that flow's backlog. Only packets of
// flows with nothing queued qualify, and only those that no packet of
// their own flow staying in rb precedes, so no flow is ever reordered. rb
// keeps the rest in order. A batch of sparse packets only (the ACKs of a
// download) is left whole. Called without txMu: the flow counts it reads
// can only have dropped by the time the small batch is sent, and goesDirect
// checks them again.
func (d *Device) splitSparse(rb *batch, p *Peer, now time.Time) {
	c := sparseCount(rb.sizes[:rb.n])
	if c == 0 || c == rb.n || c > smallBatch {
		return
	}
	sb := d.pools.Load().small.tryGet()
	if sb == nil {
		return
	}
	t := p.live.Load() // nil: nothing ever queued, every count is zero
	var stay uint64    // buckets with a packet that stays in rb, so far
	w := 0
	for j := 0; j < rb.n; j++ {
		pkt := rb.bufs[j][stagedFrom : stagedFrom+rb.sizes[j]]
		h := flowBucket(pkt)
		if rb.sizes[j] <= sparseSize && stay&(1<<h) == 0 && (t == nil || t.flowq[h].Load() == 0) &&
			sb.n < smallBatch && appendPacket(sb, rb, j, stagedFrom, false) {
			continue
		}
		stay |= 1 << h
		if w != j {
			rb.bufs[w], rb.bufs[j] = rb.bufs[j], rb.bufs[w]
			rb.sizes[w], rb.eps[w] = rb.sizes[j], rb.eps[j]
		}
		w++
	}
	rb.n = w
	p.sendBatch(sb, now)
}

// sendBatch assigns nonces to b's packets in order and hands b to the crypto
// workers and to the peer's sequencer. With no usable session the packets
// are staged and a handshake is started; with one, packets staged earlier
// go first (sendBatchTxLocked), so that nothing newer overtakes them.
func (p *Peer) sendBatch(b *batch, now time.Time) {
	p.txMu.Lock()
	defer p.txMu.Unlock()
	p.sendBatchTxLocked(b, now)
}

// sendStagedNow sends the staged packets if a session is up (the timer
// goroutine's job once a handshake completes and no new packet comes).
// Taking the staged packets and giving them counters happen under txMu,
// so no other sender of this peer can slip in between.
func (p *Peer) sendStagedNow(now time.Time) {
	p.txMu.Lock()
	defer p.txMu.Unlock()
	p.mu.Lock()
	if len(p.staged) == 0 || p.currentSendKeypairLocked(now) == nil {
		p.mu.Unlock()
		return
	}
	pkts := p.takeStagedLocked()
	p.mu.Unlock()
	p.sendStaged(pkts, now)
}

func (p *Peer) sendBatchTxLocked(b *batch, now time.Time) {
	d := p.d
	b.peer = p
	direct := p.goesDirect(b)
	sendq := &p.carry().sendq
	// Room in the sequencer first, with no lock held: a full queue makes the
	// producer wait rather than drop.
	if !direct && !sendq.reserve(d.stop) {
		b.release()
		return
	}
	unreserve := func() {
		if !direct {
			sendq.unreserve()
		}
	}
	p.mu.Lock()
	kp := p.currentSendKeypairLocked(now)
	// The hold keeps the keys alive until seal has used every counter
	// taken below, whatever wipes them meanwhile; seal releases it.
	if kp == nil || p.removed.Load() || !kp.Hold() {
		if !p.removed.Load() {
			p.stageLocked(b.bufs[:b.n], b.sizes[:b.n])
		}
		p.mu.Unlock()
		unreserve()
		b.release()
		p.initiate(now, false)
		return
	}
	if len(p.staged) > 0 {
		// Packets staged before the session came up go first. Checked here,
		// under mu with the keypair in hand, because the handshake worker
		// installs a session under mu, not txMu: a look before taking mu
		// could miss one that appears meanwhile. sendStaged empties the
		// stage, and an exhausted keypair is not current, so the second
		// call below cannot come back here.
		pkts := p.takeStagedLocked()
		p.mu.Unlock()
		kp.Release()
		unreserve()
		p.sendStaged(pkts, now)
		p.sendBatchTxLocked(b, now)
		return
	}
	data := false
	for i := 0; i < b.n; i++ {
		c, ok := kp.NextCounter()
		if !ok {
			// Out of nonces: keep what is left for the next session.
			p.stageLocked(b.bufs[i:b.n], b.sizes[i:b.n])
			b.n = i
			break
		}
		b.counters[i] = c
		data = data || b.sizes[i] > 0
	}
	p.pickDFSample(b, now)
	b.sendKP = kp
	if data {
		p.timers.DataSent(now, jitter())
	}
	p.timers.AuthenticatedSent(now)
	p.timers.AuthenticatedTraversal(now)
	p.rescheduleLocked()
	// A peer on a stream by fallback also starts a handshake when a UDP
	// probe is due: its first initiation goes over UDP (fallback.go).
	rekey := d.tp.RekeyOnSend(kp.Created, kp.Initiator, kp.SendCount(), now) || p.fb.probeDue(now)
	queued := b.n > 0
	if queued && !direct {
		sendq.push(b)
	}
	p.mu.Unlock()
	switch {
	case queued && direct:
		d.seal(b)
		p.sendDirect(b)
	case queued:
		p.countFlows(b)
		d.dispatch(b)
	default:
		kp.Release()
		unreserve()
		b.release()
	}
	if rekey {
		p.initiate(now, false)
	}
}

// sendStaged sends packets that waited for a session, in batches, and
// returns their staging buffers. Callers hold txMu.
func (p *Peer) sendStaged(pkts [][]byte, now time.Time) {
	d := p.d
	defer func() {
		for _, b := range pkts {
			d.staging.put(b)
		}
	}()
	for len(pkts) > 0 {
		b := d.getBatch()
		if b == nil {
			return
		}
		for b.n < len(b.bufs) && len(pkts) > 0 {
			buf := b.bufs[b.n]
			pkt := pkts[0]
			pkts = pkts[1:]
			if len(pkt) > len(buf)-stagedFrom-noise.TagSize-15 {
				d.ctr.inc(cTxTooBig)
			} else {
				b.sizes[b.n] = copy(buf[stagedFrom:], pkt)
				b.n++
			}
			d.staging.put(pkt)
		}
		if b.n == 0 {
			b.release()
			return
		}
		p.sendBatchTxLocked(b, now)
	}
}

// sendKeepalive sends an empty data packet, which also confirms a new
// session or keeps a NAT mapping alive. If no batch is free the device is
// busy sending anyway, and the keepalive is not needed.
func (p *Peer) sendKeepalive(now time.Time) {
	b := p.d.pools.Load().small.tryGet()
	if b == nil {
		return
	}
	b.sizes[0] = 0
	b.n = 1
	p.d.ctr.inc(cKeepalivesSent)
	p.keepalives.Add(1)
	p.sendBatch(b, now)
}

// seal encrypts every packet of an outbound batch in place and ends the
// hold sendBatch took on the keypair. The queue manager looks at the batch
// first and may mark or drop packets (see aqmOutbound). A packet that would not fit its buffer
// sealed (one read before an MTU raise reached us), or whose output is not
// a full ciphertext, is dropped and counted (size 0): nothing but a whole
// ciphertext may ever reach the wire.
func (d *Device) seal(b *batch) {
	kp := b.sendKP
	mtu := int(d.mtu.Load())
	ob := d.obfs.Load()
	dropped := 0
	b.peer.aqmOutbound(b, d.now())
	for i := 0; i < b.n; i++ {
		buf := b.bufs[i]
		size := b.sizes[i]
		b.sizes[i] = 0
		if size < 0 { // dropped by the queue manager, counted there
			continue
		}
		if stagedFrom+size+noise.TagSize > len(buf) {
			d.ctr.inc(cTxTooBig)
			continue
		}
		padded := paddedSize(size, mtu)
		if stagedFrom+padded+noise.TagSize > len(buf) {
			padded = size
		}
		clear(buf[stagedFrom+size : stagedFrom+padded])
		noise.PutTransportHeader(buf[:noise.TransportHeaderSize], kp.RemoteIndex, b.counters[i])
		out := kp.Seal(&b.nonce, buf[stagedFrom:stagedFrom], b.counters[i], buf[stagedFrom:stagedFrom+padded])
		if len(out) != padded+noise.TagSize {
			dropped++
			continue
		}
		b.sizes[i] = stagedFrom + padded + noise.TagSize
		if ob != nil {
			if b.sizes[i] = disguise(ob, &b.rng, buf, b.sizes[i]); b.sizes[i] == 0 {
				d.ctr.inc(cTxTooBig)
			}
		}
	}
	kp.Release()
	if dropped > 0 {
		d.ctr.add(cTxSealFailed, uint64(dropped))
	}
}

// paddedSize rounds a plaintext up to a multiple of 16, as the protocol
// asks, without going past the MTU.
func paddedSize(size, mtu int) int {
	p := (size + 15) &^ 15
	if p > mtu && size <= mtu {
		return mtu
	}
	return p
}

// flushSend writes sealed batches to the peer's endpoint, in nonce order,
// in as few sends as the bind's batch size allows: a run of one-packet
// batches (a UDP stream read a packet at a time) costs one sendmmsg, not
// one each. Called by the peer's send sequencer, which serializes it.
func (p *Peer) flushSend(bs []*batch) {
	t := p.carry()
	if t.sendOut == nil { // first send: idle peers never pay for this
		t.sendOut = make([][]byte, 0, max(p.d.opts.batchSize, p.d.bind.BatchSize()))
	}
	t.sendOut = p.sendBatches(bs, t.sendOut)
}

// sendBatches sends bs's datagrams through out, a scratch slice whose
// capacity is the most datagrams per Bind.Send, releases the batches and
// returns the scratch (emptied) for reuse.
func (p *Peer) sendBatches(bs []*batch, out [][]byte) [][]byte {
	d := p.d
	ep, ok := p.endpoint()
	out = out[:0]
	var bytes uint64
	flush := func() {
		if len(out) == 0 {
			return
		}
		if err := d.send(out, ep); err != nil {
			d.ctr.add(cTxSendErrors, uint64(len(out)))
		} else {
			p.txBytes.Add(bytes)
			d.ctr.add(cTxPackets, uint64(len(out)))
		}
		clear(out)
		out, bytes = out[:0], 0
	}
	df, dfc := p.dfPick()
	for _, b := range bs {
		if !ok {
			d.ctr.add(cTxNoEndpoint, uint64(b.n))
			continue
		}
		if len(out)+b.n > cap(out) {
			flush()
		}
		for i := 0; i < b.n; i++ {
			if b.sizes[i] == 0 { // dropped by seal
				continue
			}
			if df != nil && b.counters[i]+1 == dfc && df.counter.CompareAndSwap(dfc, 0) {
				flush() // what was sealed before it leaves before it
				if p.sendDF(ep, b.bufs[i][:b.sizes[i]]) {
					continue
				}
			}
			out = append(out, b.bufs[i][:b.sizes[i]])
			bytes += uint64(b.sizes[i])
		}
	}
	flush()
	now := d.now()
	for _, b := range bs {
		p.uncountFlows(b)
		d.observe(stageTx, b, b.n, now)
		b.release()
	}
	return out
}

// directReorder bounds how far a sparse packet's direct send may overtake
// the packets queued before it: the receiver's replay window (8192
// counters in every implementation we know) must still accept them when
// they arrive after it.
const directReorder = 4096

// goesDirect reports whether b, a batch of a few packets, is sealed and
// sent by the goroutine that read it instead of by a crypto worker through
// the sequencer: when none of its packets' flows has a packet queued or
// being sent, and what is queued is few enough that the receiver's replay
// window covers the reordering. Idle, that saves a packet two goroutine
// hand-offs; under load, a sparse flow (a ping, an interactive session)
// does not wait behind a bulk flow's backlog. Every producer holds txMu
// and counts its queued packets under it (countFlows), so no packet of
// the flow can be queued meanwhile. The flow hash is computed again here
// rather than kept: these are a handful of packets.
func (p *Peer) goesDirect(b *batch) bool {
	t := p.carry()
	if b.n > smallBatch || int(t.queued.Load())+b.n > directReorder {
		return false
	}
	for i := 0; i < b.n; i++ {
		h := flowBucket(b.bufs[i][stagedFrom : stagedFrom+b.sizes[i]])
		if t.flowq[h].Load() != 0 {
			return false
		}
	}
	return true
}

// countFlows adds b's packets to the peer's per-flow counts of queued
// packets; uncountFlows takes them off once they are sent. Under txMu and
// before b can be flushed, so a direct send checking the counts under
// txMu never misses a packet queued ahead of it.
func (p *Peer) countFlows(b *batch) {
	t := p.carry()
	var m flowMemo
	var run int32 // packets of bucket last not yet added
	var last uint8
	for i := 0; i < b.n; i++ {
		h := m.bucket(b.bufs[i][stagedFrom : stagedFrom+b.sizes[i]])
		b.flows[i] = h
		if run > 0 && h != last {
			t.flowq[last].Add(run)
			run = 0
		}
		last = h
		run++
	}
	if run > 0 {
		t.flowq[last].Add(run)
	}
	t.queued.Add(int32(b.n))
	b.counted = true
}

func (p *Peer) uncountFlows(b *batch) {
	if !b.counted {
		return
	}
	t := p.carry()
	var run int32
	for i := 0; i < b.n; i++ {
		run++
		if i == b.n-1 || b.flows[i+1] != b.flows[i] {
			t.flowq[b.flows[i]].Add(-run)
			run = 0
		}
	}
	t.queued.Add(-int32(b.n))
	b.counted = false
}

// sendDirect sends a batch sealed on the reading goroutine, bypassing the
// sequencer (see goesDirect). Called under txMu, which keeps direct sends
// of the peer in nonce order among themselves.
func (p *Peer) sendDirect(b *batch) {
	// The batch's own slice headers are the scratch: b.n fit.
	one := [1]*batch{b}
	p.sendBatches(one[:], b.out[:0:len(b.bufs)])
}

func jitter() time.Duration {
	return time.Duration(rand.Int64N(int64(noise.RekeyTimeoutJitterMax) + 1))
}
