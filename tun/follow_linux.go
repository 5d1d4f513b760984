package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nsSocket is an rtnetlink socket subscribed to link events in our
// namespace, with the interface's index here.
type nsSocket struct {
	id    nsID
	f     *os.File
	index int32
}

// errMoving says the interface was between namespaces when we looked: the
// kernel sends RTM_DELLINK in the old namespace before the interface shows
// up in the new one, and TUNGETDEVNETNS may name either meanwhile.
var errMoving = errors.New("tun: interface is moving between namespaces")

// errAway says the interface lives in a namespace other than ours, where
// subscribe will not open a socket: it would keep that namespace alive.
var errAway = errors.New("tun: interface lives in another namespace")

// errClosing says the device was closed while following.
var errClosing = errors.New("tun: device closing")

// subscribeTries bounds how long subscribe waits for a move to settle; a
// move takes microseconds, so a second of retries only runs out when
// something else is wrong.
const (
	subscribeTries = 100
	subscribeWait  = 10 * time.Millisecond
)

// subscribe opens a link-event socket in our namespace, where the
// interface must live (errAway otherwise).
func (d *kernelDevice) subscribe() (*nsSocket, error) {
	for try := 1; ; try++ {
		s, err := d.subscribeOnce()
		if !errors.Is(err, errMoving) || try == subscribeTries {
			return s, err
		}
		select {
		case <-d.done:
			return nil, err
		case <-time.After(subscribeWait):
		}
	}
}

func (d *kernelDevice) subscribeOnce() (*nsSocket, error) {
	nsfd, err := devNetns(d.file)
	if err != nil {
		return nil, err
	}
	defer unix.Close(nsfd)
	id, err := nsIDOf(nsfd)
	if err != nil {
		return nil, err
	}
	if id != d.own {
		return nil, errAway
	}
	f, err := d.routeSocket(nsfd, id, unix.RTMGRP_LINK)
	if err != nil {
		return nil, err
	}
	s := &nsSocket{id: id, f: f}
	if err := d.checkSubscribed(s); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// checkSubscribed finds the interface's index through s, and checks that
// the interface had not moved on before s was listening: from then on,
// every change to it is heard on s.
func (d *kernelDevice) checkSubscribed(s *nsSocket) error {
	name, err := devName(d.file)
	if err != nil {
		return err
	}
	ifr, err := ifreqGet(s.f, name, unix.SIOCGIFINDEX)
	if errors.Is(err, unix.ENODEV) {
		return errMoving
	}
	if err != nil {
		return fmt.Errorf("tun: index of %q: %w", name, err)
	}
	s.index = int32(ifr.Uint32())
	nsfd, err := devNetns(d.file)
	if err != nil {
		return err
	}
	defer unix.Close(nsfd)
	if id, err := nsIDOf(nsfd); err != nil || id != s.id {
		return errMoving
	}
	return nil
}

// follow reports the interface's link events wherever it lives, until
// Close or until it is gone. In our namespace it listens on s for instant
// events; in any other it polls (whileAway), because a socket or
// namespace descriptor held there would keep the namespace alive: `ip
// netns del` would then no longer destroy the interface, and the daemon,
// which must stop when its TUN goes, would run on. s is nil when the
// interface already lives elsewhere.
func (d *kernelDevice) follow(s *nsSocket) {
	var t linkTracker
	for {
		var err error
		if s != nil {
			s, err = d.whileHome(s, &t)
		} else {
			s, err = d.whileAway(&t)
		}
		if err != nil {
			d.stopFollowing(err)
			return
		}
	}
}

// whileHome reports events heard on s until the interface leaves our
// namespace, then returns a new socket if it is already back, or nil to
// poll it where it went.
func (d *kernelDevice) whileHome(s *nsSocket, t *linkTracker) (*nsSocket, error) {
	// Whatever happened while we were not listening (coming home, or an
	// MTU set before the socket existed) is reported now.
	d.reportState(s, t)
	if !d.listen(s, t) {
		if d.closing() {
			return nil, errClosing
		}
		return nil, errors.New("tun: link-event socket failed")
	}
	next, err := d.subscribe()
	if errors.Is(err, errAway) {
		return nil, d.setCur(nil)
	}
	if err != nil {
		return nil, err
	}
	return next, d.setCur(next)
}

// stopFollowing ends following for good. When the device closed or the
// interface is gone (its namespace was deleted, or `ip link del`) there is
// nothing left to report: the TUN's Read fails, the daemon stops and Close
// closes Events. Otherwise (setns refused, say) wireguard-go's events take
// over.
func (d *kernelDevice) stopFollowing(err error) {
	d.setCur(nil)
	if errors.Is(err, errClosing) || errors.Is(err, unix.EBADFD) {
		return
	}
	d.following.Store(false)
	d.send(EventMTUUpdate)
}

func (d *kernelDevice) closing() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// setCur makes next (nil for none) the current socket and closes the old
// one; errClosing, and next closed, when the device closed meanwhile.
func (d *kernelDevice) setCur(next *nsSocket) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing() {
		if next != nil {
			next.f.Close()
		}
		return errClosing
	}
	if d.cur != nil {
		d.cur.f.Close()
	}
	d.cur = next
	return nil
}

// reportState sends EventUp or EventDown for the interface's state as s
// sees it, then EventMTUUpdate.
func (d *kernelDevice) reportState(s *nsSocket, t *linkTracker) {
	name, err := devName(d.file)
	if err == nil {
		var ifr *unix.Ifreq
		if ifr, err = ifreqGet(s.f, name, unix.SIOCGIFFLAGS); err == nil {
			d.sendAll(t.runningNow(uint32(ifr.Uint16())&unix.IFF_RUNNING != 0, nil))
		}
	}
	d.send(EventMTUUpdate)
}

func (d *kernelDevice) sendAll(evs []Event) {
	for _, e := range evs {
		d.send(e)
	}
}

// listen reads link messages from s until the interface leaves s's
// namespace (moved reports true: it was moved or deleted) or the socket
// fails or is closed (false).
func (d *kernelDevice) listen(s *nsSocket, t *linkTracker) (moved bool) {
	rc, err := s.f.SyscallConn()
	if err != nil {
		return false
	}
	buf := make([]byte, 1<<16)
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		})
		if err == nil && errors.Is(rerr, unix.ENOBUFS) {
			// The kernel dropped messages for us: assume the worst.
			d.send(EventMTUUpdate)
			continue
		}
		if err != nil || rerr != nil {
			return false
		}
		if d.handleLink(s, buf[:n], t) {
			return true
		}
	}
}

// handleLink acts on one read's worth of rtnetlink messages; true when our
// interface left the namespace.
func (d *kernelDevice) handleLink(s *nsSocket, b []byte, t *linkTracker) (gone bool) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		// struct ifinfomsg: family u8, pad u8, type u16, index s32,
		// flags u32, change u32.
		if len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		if int32(binary.NativeEndian.Uint32(m.Data[4:8])) != s.index {
			continue
		}
		switch m.Header.Type {
		case unix.RTM_NEWLINK:
			flags := binary.NativeEndian.Uint32(m.Data[8:12])
			d.sendAll(t.runningNow(flags&unix.IFF_RUNNING != 0, nil))
			d.send(EventMTUUpdate)
		case unix.RTM_DELLINK:
			return true
		}
	}
	return false
}
