package tun

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often the interface is looked at while it lives in
// another namespace. Events there cannot be heard without a socket that
// would keep the namespace alive, so a change is noticed up to this late.
// That is harmless for the MTU: the data path re-reads MTU() itself as soon
// as a packet outgrows its buffers, so the event only saves it that first
// oversized packet. A second costs one thread and two sockets per look.
const pollInterval = time.Second

// whileAway polls the interface while it lives in another namespace,
// holding nothing there between looks, and returns a socket subscribed to
// our namespace once it is back here.
func (d *kernelDevice) whileAway(t *linkTracker) (*nsSocket, error) {
	t.forget()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		s, err := d.pollOnce(t)
		if s != nil || err != nil {
			return s, err
		}
		select {
		case <-d.done:
			return nil, errClosing
		case <-tick.C:
		}
	}
}

// pollOnce looks at the interface once and sends the events for what
// changed since the last look; a socket when the interface is home again.
func (d *kernelDevice) pollOnce(t *linkTracker) (*nsSocket, error) {
	l, err := d.look()
	if errors.Is(err, errMoving) {
		return nil, nil // settled by the next look
	}
	if err != nil {
		return nil, err
	}
	if l.ns != d.own {
		d.sendAll(t.observe(l))
		return nil, nil
	}
	s, err := d.subscribe()
	if errors.Is(err, errAway) || errors.Is(err, errMoving) {
		return nil, nil // it left again before we could listen
	}
	if err != nil {
		return nil, err
	}
	return s, d.setCur(s)
}

// look finds the interface's namespace and, when that is not ours, its
// MTU and running state there, through a socket closed before returning.
// When the interface is gone, the TUN answers EBADFD.
func (d *kernelDevice) look() (linkLook, error) {
	nsfd, err := devNetns(d.file)
	if err != nil {
		return linkLook{}, err
	}
	defer unix.Close(nsfd)
	id, err := nsIDOf(nsfd)
	if err != nil || id == d.own {
		return linkLook{ns: id}, err
	}
	name, err := devName(d.file)
	if err != nil {
		return linkLook{}, err
	}
	sock, err := d.routeSocket(nsfd, id, 0)
	if err != nil {
		return linkLook{}, err
	}
	defer sock.Close()
	mtu, err := ifreqGet(sock, name, unix.SIOCGIFMTU)
	var flags *unix.Ifreq
	if err == nil {
		flags, err = ifreqGet(sock, name, unix.SIOCGIFFLAGS)
	}
	if errors.Is(err, unix.ENODEV) {
		return linkLook{}, errMoving
	}
	if err != nil {
		return linkLook{}, fmt.Errorf("tun: state of %q: %w", name, err)
	}
	running := uint32(flags.Uint16())&unix.IFF_RUNNING != 0
	return linkLook{ns: id, mtu: int(mtu.Uint32()), running: running}, nil
}
