package tun

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// detachedDevice is a kernel TUN whose interface is out of reach: the
// inner device only reads, writes and sets offloads on the file
// descriptor, and MTU and Events are answered here instead of by name in
// our namespace, where the name means some other interface or none.
type detachedDevice struct {
	wgtun.Device
	mtu       int
	events    chan Event
	closeOnce sync.Once
}

func createDetached(fd int, mtu int) (Device, error) {
	inner, _, err := wgtun.CreateUnmonitoredTUNFromFD(fd)
	if err != nil {
		closeFD(fd)
		return nil, fmt.Errorf("tun: open TUN from descriptor %d: %w", fd, err)
	}
	d := &detachedDevice{Device: inner, mtu: mtu, events: make(chan Event, 1)}
	d.events <- EventUp
	return d, nil
}

func closeFD(fd int) { unix.Close(fd) }

// MTU implements Device.
func (d *detachedDevice) MTU() (int, error) { return d.mtu, nil }

// Events implements Device: EventUp once, closed by Close.
func (d *detachedDevice) Events() <-chan Event { return d.events }

// Read implements Device.
func (d *detachedDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := readWG(d.Device, bufs, sizes, offset)
	return n, readErr(d, err)
}

// Write implements Device with a packet count, as kernelDevice does.
func (d *detachedDevice) Write(bufs [][]byte, offset int) (int, error) {
	if _, err := d.Device.Write(bufs, offset); err != nil {
		return 0, err
	}
	return len(bufs), nil
}

// Close implements Device.
func (d *detachedDevice) Close() error {
	err := d.Device.Close()
	d.closeOnce.Do(func() { close(d.events) })
	return err
}
