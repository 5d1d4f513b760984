package device

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/fips-go/fips-go/tun"
)

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

func tunGone(err error) bool {
	return errors.Is(err, os.ErrClosed) ||
		errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.EIO)
}
