package device

// The crypto workers serve both directions: a queued batch is sealed for
// sending or opened on receipt here, then handed to its peer's sequencer.

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
		p.carry().sendq.complete(b, p.flushSend)
	} else {
		d.open(b)
		p.carry().recvq.complete(b, p.deliverAll)
	}
}

// cryptoWorker seals or opens batches until the device stops.
func (d *Device) cryptoWorker() {
	defer d.workersWG.Done()
	for b := range d.work {
		d.crypt(b)
	}
}
