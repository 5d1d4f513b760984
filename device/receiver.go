package device

import (
	"errors"
	"net"
	"time"

	"github.com/fips-go/fips-go/conn"
)

// receiver reads datagram batches from one socket of the bind until the
// bind closes. Other errors are counted and survived, backing off while
// they persist so that a socket stuck in an error does not spin a core.
func (d *Device) receiver(fn conn.ReceiveFunc) {
	defer d.readersWG.Done()
	defer d.bindWG.Done()
	rb := d.getBatch()
	var retry retryPolicy
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
			if errors.Is(err, net.ErrClosed) || errors.Is(err, conn.ErrBindClosed) || d.stopping() {
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
		rb.born = d.now()
		rb = d.routeInbound(rb, n)
	}
	if rb != nil {
		rb.release()
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
