package tun

import (
	"golang.org/x/sys/unix"
)

// MTU implements Device: the MTU of the interface in the namespace it lives
// in now. Where that namespace cannot be entered (no privilege, or a
// kernel before 5.2 without TUNGETDEVNETNS) it is wireguard-go's answer,
// asked by name in our own namespace.
func (d *kernelDevice) MTU() (int, error) {
	if mtu, err := d.mtuWhereItLives(); err == nil {
		return mtu, nil
	}
	return d.Device.MTU()
}

func (d *kernelDevice) mtuWhereItLives() (int, error) {
	name, err := devName(d.file)
	if err != nil {
		return 0, err
	}
	nsfd, err := devNetns(d.file)
	if err != nil {
		return 0, err
	}
	defer unix.Close(nsfd)
	id, err := nsIDOf(nsfd)
	if err != nil {
		return 0, err
	}
	// While the interface is in our namespace the listener's socket is
	// there already; elsewhere a throwaway one is needed, since keeping a
	// socket there would keep the namespace alive.
	d.mu.Lock()
	if d.cur != nil && d.cur.id == id {
		ifr, err := ifreqGet(d.cur.f, name, unix.SIOCGIFMTU)
		d.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return int(ifr.Uint32()), nil
	}
	d.mu.Unlock()
	f, err := routeSocket(nsfd, id, d.own, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ifr, err := ifreqGet(f, name, unix.SIOCGIFMTU)
	if err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}
