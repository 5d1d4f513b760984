package tun

import (
	"os"

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

func (d *kernelDevice) mtuWhereItLives() (mtu int, err error) {
	err = d.askWhereItLives(true, func(f *os.File, name string) error {
		ifr, err := ifreqGet(f, name, unix.SIOCGIFMTU)
		if err == nil {
			mtu = int(ifr.Uint32())
		}
		return err
	})
	return mtu, err
}

// askWhereItLives runs ask with an rtnetlink socket in the namespace the
// interface lives in now and the interface's name there. With share, and
// while that namespace is ours, the socket is the link listener's, used
// under d.mu, which suits ioctls only (a request would race the
// listener's reads for the answer); otherwise it is opened for the call
// and closed after, since keeping a socket in another namespace would
// keep that namespace alive.
func (d *kernelDevice) askWhereItLives(share bool, ask func(f *os.File, name string) error) error {
	name, err := devName(d.file)
	if err != nil {
		return err
	}
	nsfd, err := devNetns(d.file)
	if err != nil {
		return err
	}
	defer unix.Close(nsfd)
	id, err := nsIDOf(nsfd)
	if err != nil {
		return err
	}
	if share {
		d.mu.Lock()
		if d.cur != nil && d.cur.id == id {
			defer d.mu.Unlock()
			return ask(d.cur.f, name)
		}
		d.mu.Unlock()
	}
	f, err := d.routeSocket(nsfd, id, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return ask(f, name)
}
