package pcap

import (
	"github.com/fips-go/fips-go/tun"
)

// device is a tun.Device that records every packet read from or written
// to the Device it wraps.
type device struct {
	tun.Device
	w *Writer
}

// gsoSizer is the optional method a kernel TUN has beside tun.Device (the
// device package sets the TUN's GSO maximum through it); the wrapper must
// not hide it.
type gsoSizer interface {
	SetGSOMaxSize(size int) error
}

// gsoDevice is a device around a TUN with SetGSOMaxSize.
type gsoDevice struct {
	*device
	gso gsoSizer
}

var (
	_ tun.Device = (*device)(nil)
	_ tun.Device = (*gsoDevice)(nil)
	_ gsoSizer   = (*gsoDevice)(nil)
)

// Wrap returns a Device that records in w every packet dev's Read returns
// (what the local side sends into the tunnel) and every packet given to
// its Write (what comes out of the tunnel), then passes them on unchanged.
// A nil w returns dev itself, so a tunnel without a capture pays nothing.
//
// Records are single IP packets, never offload super-packets: the
// tun.Device contract already has the TUN split what the kernel hands
// over before Read returns and coalesce only inside Write. A written batch
// is recorded before it reaches dev, because a kernel TUN rewrites the
// head of each run it coalesces in place; a packet the TUN then fails to
// write is still in the capture.
//
// The returned Device owns w: its Close closes dev, then w.
func Wrap(dev tun.Device, w *Writer) tun.Device {
	if w == nil {
		return dev
	}
	d := &device{Device: dev, w: w}
	if g, ok := dev.(gsoSizer); ok {
		return &gsoDevice{device: d, gso: g}
	}
	return d
}

// Read implements tun.Device.
func (d *device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := d.Device.Read(bufs, sizes, offset)
	if n > 0 && n <= len(bufs) && n <= len(sizes) {
		d.w.writeBatch(bufs[:n], sizes[:n], offset)
	}
	return n, err
}

// Write implements tun.Device.
func (d *device) Write(bufs [][]byte, offset int) (int, error) {
	d.w.writeBatch(bufs, nil, offset)
	return d.Device.Write(bufs, offset)
}

// Close implements tun.Device: it closes the wrapped Device, then flushes
// and closes the capture.
func (d *device) Close() error {
	err := d.Device.Close()
	d.w.Close()
	return err
}

// SetGSOMaxSize passes the call on to the wrapped kernel TUN.
func (d *gsoDevice) SetGSOMaxSize(size int) error { return d.gso.SetGSOMaxSize(size) }
