package device

import (
	"errors"
	"net"
	"time"

	"github.com/fips-go/fips-go/conn"
	"github.com/fips-go/fips-go/device/internal/ratelimit"
)

// receiver reads datagram batches from one socket of the bind until the
// bind closes. Other errors are counted and survived, backing off while
// they persist so that a socket stuck in an error does not spin a core.
// The bind's receivers are counted in bindWG by their callers, the stream
// transport's is not: a rebind does not stop it. Under load, if paced, it paces itself to opts.HandshakeReads handshake
// messages a second (see Options) and tells the bind to shed.
//
// The connected sockets' reader (conn.ConnectBind's ConnectedReceiveFuncs)
// runs unpaced: a flood lands on the shared sockets, and pacing a reader
// that serves every known peer would let one spoofer of a known endpoint
// slow all of them down (the bind gives each ready socket its turn
// instead).
func (d *Device) receiver(fn conn.ReceiveFunc, paced bool) {
	defer d.readersWG.Done()
	rb := d.getBatch()
	var retry retryPolicy
	pace := ratelimit.NewPacer(d.opts.handshakeReads, d.opts.handshakeReads/20)
	answered := d.flood.answered.Load()
	for rb != nil {
		if rb = d.current(rb); rb == nil {
			break
		}
		n, err := fn(rb.bufs, rb.sizes, rb.eps)
		if errors.Is(err, conn.ErrOversize) {
			// Our buffers may predate an MTU raise we have not heard of
			// yet (an interface in another namespace is only polled):
			// look, then go round so that current swaps them.
			d.probeMTU()
			continue
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || d.stopping() {
				break
			}
			d.ctr.inc(cRxReceiveErrors)
			if n == 0 {
				if !d.pause(d.receiveRetry(&retry, err)) {
					break
				}
				continue
			}
		}
		retry.ok()
		d.traffic()
		now := d.now()
		rb.born = now
		if !paced {
			rb, _ = d.routeInbound(rb, n)
			continue
		}
		var hs int
		rb, hs = d.routeInbound(rb, n)
		// Load that is being answered (a restart storm) is read in full:
		// pacing and shedding are for load that is not (see
		// ratelimit.Yield).
		load := false
		if hs > 0 || d.flood.shedding.Load() {
			load = d.underLoad(now) && !d.flood.yield.Productive(now)
			d.shed(load)
		}
		if hs > 0 && load {
			// Initiations the workers answered since the last look were
			// configured peers' (a restarted gateway's road warriors all
			// at once), not the flood the pacing is for: they give their
			// reads back, so their retries are read rather than left to
			// the kernel to drop. Only a peer's key makes an initiation
			// that is answered.
			if a := d.flood.answered.Load(); a != answered {
				pace.Refund(int(min(a-answered, 1<<20)))
				answered = a
			}
			if wait := pace.Spend(hs, now); wait > 0 {
				d.ctr.inc(cRxHandshakeReadsPaused)
				if !d.pause(wait) {
					break
				}
			}
		}
	}
	if rb != nil {
		rb.release()
	}
}

// shed tells the bind, if it can shed a flood (conn.Shedder), whether the
// device is under load, once per change: while it is, the reader above
// takes in a few thousand handshake messages a second, and in a full-size
// socket buffer those would wait seconds, so every cookie reply would
// answer an initiation its sender has given up on. The receivers call it
// as they see handshakes, and while shedding on every batch, so it ends
// with the first batch after the load does.
func (d *Device) shed(on bool) {
	if d.flood.shedding.Load() == on {
		return
	}
	d.flood.shedMu.Lock()
	defer d.flood.shedMu.Unlock()
	if d.flood.shedding.Load() == on {
		return
	}
	d.flood.shedding.Store(on)
	if s, ok := d.bind.(conn.Shedder); ok {
		s.Shed(on)
	}
}

// receiveRetry is the pause after a failed receive, logged once a streak
// of failures turns out to be persistent.
func (d *Device) receiveRetry(retry *retryPolicy, err error) time.Duration {
	wait := retry.failed()
	if retry.persistent() {
		d.opts.Logf("device: UDP receive keeps failing, retrying every %v: %v", wait, err)
	}
	return wait
}
