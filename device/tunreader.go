package device

import (
	"errors"
	"io"
	"time"

	"github.com/fips-go/fips-go/tun"
)

// tunReader reads batches from the TUN and routes them to peers. It stops
// the device when the TUN goes away (tun.ErrGone: ip link del, Close), or
// when its Read keeps panicking (tun.ErrReadPanicked); any other error
// costs only the packets it concerns.
func (d *Device) tunReader() {
	defer d.readersWG.Done()
	rb := d.getBatch()
	var retry retryPolicy
	for rb != nil {
		if rb = d.current(rb); rb == nil {
			break
		}
		n, err := d.tun.Read(rb.bufs, rb.sizes, tun.Headroom)
		if n == 0 && errors.Is(err, tun.ErrWoken) {
			continue // woken by mtuChanged: go round so current swaps the batch
		}
		if err != nil && !d.tunReadFailed(&retry, err, n > 0) {
			break
		}
		if n == 0 {
			continue
		}
		retry.ok()
		d.countTUNRead(rb.sizes[:n])
		d.traffic()
		rb.born = d.now()
		rb = d.routeOutbound(rb, n)
	}
	if rb != nil {
		rb.release()
	}
}

// countTUNRead counts one read that returned packets and their bytes. Their
// ratio is the size of what the kernel hands the TUN: a super-packet of
// tens of KiB when TSO reaches the interface, one MTU when the kernel cut
// it up in software first (a GSO maximum below the forwarded packets'
// size does that), which costs a read per packet.
func (d *Device) countTUNRead(sizes []int) {
	var b int
	for _, s := range sizes {
		b += s
	}
	d.ctr.inc(cTxTUNReads)
	d.ctr.add(cTxTUNReadBytes, uint64(b))
}

// tunReadFailed counts a failed read and waits as retry says; false means
// the reader must stop. progress says the read returned packets as well
// (wireguard-go's TUN reports a super-packet it could not split in full
// along with the segments it did split).
func (d *Device) tunReadFailed(retry *retryPolicy, err error, progress bool) bool {
	if d.stopping() {
		return false
	}
	if errors.Is(err, tun.ErrGone) {
		d.opts.Logf("device: TUN gone, stopping: %v", err)
		d.shutdown(err)
		return false
	}
	if errors.Is(err, tun.ErrReadPanicked) {
		return d.tunReadPanicked(retry, err)
	}
	if errors.Is(err, io.ErrShortBuffer) {
		// A TUN that refuses to truncate (memtun, netstack) says a packet
		// outgrew our buffers.
		d.ctr.inc(cTxTooBig)
	}
	// The likeliest cause of a read error is a packet that outgrew our
	// buffers because the MTU went up before we heard of it (wireguard-go's
	// TUN reports that as a plain "overflows" error, and an interface in
	// another namespace is only polled for its MTU): look again, at most
	// every mtuProbeEvery, so that an error that comes with packets (and so
	// with no back-off) does not cost an MTU syscall per read.
	d.probeMTU()
	d.ctr.inc(cTxTUNReadErrors)
	if progress {
		return true
	}
	wait := retry.failed()
	if retry.persistent() {
		d.opts.Logf("device: TUN reads keep failing, retrying every %v: %v", wait, err)
	}
	return d.pause(wait)
}

// tunReadPanicked handles a panic in the TUN's Read, which the tun package
// recovered and reported as tun.ErrReadPanicked. The one cause we know
// is a packet that outgrew our buffers because the MTU went up and its
// event has not reached us yet: re-read the MTU and read on. If that does
// not cure it, the panic is deterministic and re-reading would only burn a
// core, so after maxReadPanics in a row the device stops with the error.
func (d *Device) tunReadPanicked(retry *retryPolicy, err error) bool {
	d.ctr.inc(cTxTUNReadPanics)
	d.ctr.inc(cTxTooBig)
	wait, giveUp := retry.panicked()
	if giveUp {
		d.opts.Logf("device: TUN read panicked %d times in a row, stopping: %v", retry.panics, err)
		d.shutdown(err)
		return false
	}
	if retry.panics == 1 {
		d.opts.Logf("device: TUN read panicked, re-reading the MTU: %v", err)
	}
	d.mtuChanged()
	return d.pause(wait)
}

// pause sleeps for wait, or less if the device stops; false if it stopped.
func (d *Device) pause(wait time.Duration) bool {
	if wait <= 0 {
		return !d.stopping()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.stop:
		return false
	}
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
