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

// nsSocket is an rtnetlink socket in the namespace the interface lived in
// when it was opened, with the interface's index there.
type nsSocket struct {
	id    nsID
	f     *os.File
	index int32
}

// errMoving says the interface was between namespaces when we looked: the
// kernel sends RTM_DELLINK in the old namespace before the interface shows
// up in the new one, and TUNGETDEVNETNS may name either meanwhile.
var errMoving = errors.New("tun: interface is moving between namespaces")

// subscribeTries bounds how long subscribe waits for a move to settle; a
// move takes microseconds, so a second of retries only runs out when
// something else is wrong.
const (
	subscribeTries = 100
	subscribeWait  = 10 * time.Millisecond
)

// subscribe opens a link-event socket in the interface's current namespace.
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
	f, err := routeSocket(nsfd, id, d.own, unix.RTMGRP_LINK)
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

// follow reports the interface's link events from its current namespace,
// moving its socket along when the interface moves, until Close. If the
// interface ends up where we cannot follow, wireguard-go's events take
// over.
//
// The price: a socket holds a reference to its namespace, so while the
// interface lives in a namespace other than ours, `ip netns del` of that
// namespace no longer destroys it (and with it the interface, which would
// stop the daemon); the namespace goes when the daemon does.
func (d *kernelDevice) follow(s *nsSocket) {
	wasUp := false
	for {
		// Whatever happened while we were not listening (the move itself,
		// or an MTU set before the socket existed) is reported now.
		d.reportState(s, &wasUp)
		moved := d.listen(s, &wasUp)
		if d.closing() {
			return
		}
		var next *nsSocket
		var err error
		if moved {
			next, err = d.subscribe()
		}
		if !moved || err != nil {
			d.following.Store(false)
			d.send(EventMTUUpdate)
			return
		}
		if !d.swap(next) {
			return
		}
		s = next
	}
}

func (d *kernelDevice) closing() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// swap makes next the current socket and closes the old one; false when
// the device closed meanwhile.
func (d *kernelDevice) swap(next *nsSocket) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing() {
		next.f.Close()
		return false
	}
	if d.cur != nil {
		d.cur.f.Close()
	}
	d.cur = next
	return true
}

// reportState sends EventUp or EventDown for the interface's state as s
// sees it, then EventMTUUpdate.
func (d *kernelDevice) reportState(s *nsSocket, wasUp *bool) {
	name, err := devName(d.file)
	if err == nil {
		var ifr *unix.Ifreq
		if ifr, err = ifreqGet(s.f, name, unix.SIOCGIFFLAGS); err == nil {
			d.upDown(uint32(ifr.Uint16()), wasUp)
		}
	}
	d.send(EventMTUUpdate)
}

// upDown reports the running state as wireguard-go does: EventUp whenever
// the interface is running, EventDown only after it has been up once.
func (d *kernelDevice) upDown(flags uint32, wasUp *bool) {
	if flags&unix.IFF_RUNNING != 0 {
		d.send(EventUp)
		*wasUp = true
	} else if *wasUp {
		d.send(EventDown)
	}
}

// listen reads link messages from s until the interface leaves s's
// namespace (moved reports true: it was moved or deleted) or the socket
// fails or is closed (false).
func (d *kernelDevice) listen(s *nsSocket, wasUp *bool) (moved bool) {
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
		if d.handleLink(s, buf[:n], wasUp) {
			return true
		}
	}
}

// handleLink acts on one read's worth of rtnetlink messages; true when our
// interface left the namespace.
func (d *kernelDevice) handleLink(s *nsSocket, b []byte, wasUp *bool) (gone bool) {
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
			d.upDown(binary.NativeEndian.Uint32(m.Data[8:12]), wasUp)
			d.send(EventMTUUpdate)
		case unix.RTM_DELLINK:
			return true
		}
	}
	return false
}
