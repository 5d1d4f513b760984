package device

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/fips-go/fips-go/tun"
)

// stagedFrom is where plaintext starts in an outbound buffer: the transport
// header is written into the headroom in front of it, so sealing is in place.
const stagedFrom = tun.Headroom

// tunReader reads batches from the TUN and routes them to peers. It stops
// the device when the TUN goes away (ip link del, Close).
func (d *Device) tunReader() {
	defer d.readersWG.Done()
	rb := d.getBatch()
	failures := 0
	for rb != nil {
		if rb = d.current(rb); rb == nil {
			break
		}
		n, err := d.readTUN(rb)
		if errors.Is(err, errTUNPanic) {
			// A packet outgrew our buffers: the MTU went up and its event
			// has not reached us yet. Catch up and read on.
			d.ctr.inc(cTxTooBig)
			d.mtuChanged()
			continue
		}
		if err != nil {
			if d.stopping() {
				break
			}
			if tunGone(err) || failures > 100 {
				d.opts.Logf("device: TUN read failed, stopping: %v", err)
				d.shutdown(err)
				break
			}
			failures++
			if n == 0 {
				continue
			}
		} else {
			failures = 0
		}
		rb = d.routeOutbound(rb, n)
	}
	if rb != nil {
		rb.release()
	}
}

// errTUNPanic wraps a panic inside the TUN's Read. wireguard-go's TUN
// splits an offloaded super-packet into our buffers without checking their
// size, which panics if the MTU grew before we heard of it.
var errTUNPanic = errors.New("device: TUN read panicked")

func (d *Device) readTUN(rb *batch) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("%w: %v", errTUNPanic, r)
		}
	}()
	return d.tun.Read(rb.bufs, rb.sizes, tun.Headroom)
}

// current swaps a batch from a retired pool (the MTU grew) for a new one.
// Readers keep their batch across reads, so without this they would go on
// reading into buffers too small for the new MTU.
func (d *Device) current(b *batch) *batch {
	if !b.pool.retired.Load() {
		return b
	}
	b.release()
	return d.getBatch()
}

// tunGone tells read errors that mean the TUN will never read again. Once
// its netdev is unregistered (ip link del, or ip netns del of the
// namespace it lives in) a Linux TUN fd answers EBADFD, which
// wireguard-go's Read reports as os.ErrClosed; a TUN that passes it
// through must stop the device just the same.
func tunGone(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EBADFD) ||
		errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.EIO)
}

// routeOutbound sends the n packets in rb to their peers and returns the
// batch the reader should use next. When every packet goes to one peer (the
// common case) rb itself is handed over.
func (d *Device) routeOutbound(rb *batch, n int) *batch {
	var first *Peer
	mixed := false
	d.aipMu.RLock()
	for i := 0; i < n; i++ {
		p, ok := d.aip.LookupPacketDst(rb.bufs[i][stagedFrom : stagedFrom+rb.sizes[i]])
		if !ok {
			p = nil
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
	now := d.now()
	if !mixed && first != nil {
		if n <= smallBatch {
			if sb := d.getSmall(); sb != nil {
				copyInto(sb, rb, n, stagedFrom)
				first.sendBatch(sb, now)
			}
			return rb
		}
		rb.n = n
		first.sendBatch(rb, now)
		return d.getBatch()
	}
	for i := 0; i < n; i++ {
		p := rb.peers[i]
		if p == nil {
			d.ctr.inc(cTxNoRoute)
			continue
		}
		ob := d.getBatch()
		if ob == nil {
			break
		}
		// Move every packet of p into ob by swapping buffers.
		for j := i; j < n; j++ {
			if rb.peers[j] != p {
				continue
			}
			rb.peers[j] = nil
			ob.bufs[ob.n], rb.bufs[j] = rb.bufs[j], ob.bufs[ob.n]
			ob.sizes[ob.n] = rb.sizes[j]
			ob.n++
		}
		p.sendBatch(ob, now)
	}
	return rb
}

// sendBatch assigns nonces to b's packets in order and hands b to the crypto
// workers and to the peer's sequencer. With no usable session the packets
// are staged and a handshake is started.
func (p *Peer) sendBatch(b *batch, now time.Time) {
	d := p.d
	b.peer = p
	// Room in the sequencer first, with no lock held: a full queue makes the
	// producer wait rather than drop.
	if !p.sendq.reserve(d.stop) {
		b.release()
		return
	}
	p.mu.Lock()
	kp := p.currentSendKeypairLocked(now)
	if kp == nil || p.removed {
		if !p.removed {
			p.stageLocked(b.bufs[:b.n], b.sizes[:b.n])
		}
		p.mu.Unlock()
		p.sendq.unreserve()
		b.release()
		p.initiate(now, false)
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
	b.sendKP = kp
	if data {
		p.timers.DataSent(now, jitter())
	}
	p.timers.AuthenticatedSent(now)
	p.timers.AuthenticatedTraversal(now)
	p.rescheduleLocked()
	rekey := d.tp.RekeyOnSend(kp.Created, kp.Initiator, kp.SendCount(), now)
	queued := b.n > 0
	if queued {
		p.sendq.push(b)
	}
	p.mu.Unlock()
	if queued {
		d.dispatch(b)
	} else {
		p.sendq.unreserve()
		b.release()
	}
	if rekey {
		p.initiate(now, false)
	}
}

// sendStaged sends packets that waited for a session, in batches, and
// returns their staging buffers.
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
		p.sendBatch(b, now)
	}
}

// sendKeepalive sends an empty data packet, which also confirms a new
// session or keeps a NAT mapping alive. If no batch is free the device is
// busy sending anyway, and the keepalive is not needed.
func (p *Peer) sendKeepalive(now time.Time) {
	b := p.d.small.Load().tryGet()
	if b == nil {
		return
	}
	b.sizes[0] = 0
	b.n = 1
	p.d.ctr.inc(cKeepalivesSent)
	p.sendBatch(b, now)
}

// seal encrypts every packet of an outbound batch in place.
func (d *Device) seal(b *batch) {
	kp := b.sendKP
	mtu := int(d.mtu.Load())
	for i := 0; i < b.n; i++ {
		buf := b.bufs[i]
		size := b.sizes[i]
		padded := paddedSize(size, mtu)
		if stagedFrom+padded+noise.TagSize > len(buf) {
			padded = size
		}
		clear(buf[stagedFrom+size : stagedFrom+padded])
		noise.PutTransportHeader(buf[:noise.TransportHeaderSize], kp.RemoteIndex, b.counters[i])
		kp.Seal(buf[stagedFrom:stagedFrom], b.counters[i], buf[stagedFrom:stagedFrom+padded])
		b.sizes[i] = stagedFrom + padded + noise.TagSize
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
	d := p.d
	ep, ok := p.endpoint()
	if p.sendOut == nil { // first send: idle peers never pay for this
		p.sendOut = make([][]byte, 0, max(d.opts.BatchSize, d.bind.BatchSize()))
	}
	out := p.sendOut[:0]
	var bytes uint64
	flush := func() {
		if len(out) == 0 {
			return
		}
		if err := d.bind.Send(out, ep); err != nil {
			d.ctr.add(cTxSendErrors, uint64(len(out)))
		} else {
			p.txBytes.Add(bytes)
		}
		clear(out)
		out, bytes = out[:0], 0
	}
	for _, b := range bs {
		if !ok {
			d.ctr.add(cTxNoEndpoint, uint64(b.n))
			continue
		}
		if len(out)+b.n > cap(out) {
			flush()
		}
		for i := 0; i < b.n; i++ {
			out = append(out, b.bufs[i][:b.sizes[i]])
			bytes += uint64(b.sizes[i])
		}
	}
	flush()
	p.sendOut = out
	for _, b := range bs {
		b.release()
	}
}

// inlineMax is the largest batch the producing goroutine seals or opens
// itself. Handing a lone ACK or keepalive to a worker costs a wakeup and
// more latency than the crypto it moves.
const inlineMax = 4

// dispatch does the crypto for a queued batch: inline when it is small and
// inbound, else on a worker. Outbound batches always go to a worker: the TUN
// reader must stay free to drain the TUN, or a stream read one packet at a
// time overflows the TUN's queue while the reader sits in sendmmsg.
func (d *Device) dispatch(b *batch) {
	if b.n <= inlineMax && b.sendKP == nil {
		d.crypt(b)
		return
	}
	d.work <- b
}

// crypt seals or opens b and hands it to its peer's sequencer.
func (d *Device) crypt(b *batch) {
	p := b.peer
	if b.sendKP != nil {
		d.seal(b)
		p.sendq.complete(b, p.flushSend)
	} else {
		d.open(b)
		p.recvq.complete(b, p.deliverAll)
	}
}

// cryptoWorker seals or opens batches until the device stops.
func (d *Device) cryptoWorker() {
	defer d.workersWG.Done()
	for b := range d.work {
		d.crypt(b)
	}
}

func jitter() time.Duration {
	return time.Duration(rand.Int64N(int64(noise.RekeyTimeoutJitterMax) + 1))
}
