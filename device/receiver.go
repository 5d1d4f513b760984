package device

import (
	"errors"
	"net"

	"github.com/fips-go/fips-go/conn"
)

// receiver reads datagram batches from one socket of the bind until the
// bind closes.
func (d *Device) receiver(fn conn.ReceiveFunc) {
	defer d.readersWG.Done()
	defer d.bindWG.Done()
	rb := d.getBatch()
	for rb != nil {
		if rb = d.current(rb); rb == nil {
			break
		}
		n, err := fn(rb.bufs, rb.sizes, rb.eps)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, conn.ErrBindClosed) || d.stopping() {
				break
			}
			if n == 0 {
				continue
			}
		}
		rb = d.routeInbound(rb, n)
	}
	if rb != nil {
		rb.release()
	}
}
