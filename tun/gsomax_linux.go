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

// gsoMaxTimeout bounds the wait for the kernel's answer to a link change.
const gsoMaxTimeout = 2 * time.Second

// SetGSOMaxSize sets the interface's GSO maximum (`ip link set IFACE
// gso_max_size SIZE`), which bounds the TSO super-packets the kernel's TCP
// sends through it, in the namespace the interface lives in now. It needs
// CAP_NET_ADMIN there. TCP reads the value when a connection picks its
// route, so set it before traffic starts.
func (d *kernelDevice) SetGSOMaxSize(size int) error {
	if size <= 0 || size > 1<<16 {
		return fmt.Errorf("tun: GSO maximum %d outside 1..65536", size)
	}
	return d.askWhereItLives(false, func(f *os.File, name string) error {
		ifr, err := ifreqGet(f, name, unix.SIOCGIFINDEX)
		if err != nil {
			return fmt.Errorf("tun: index of %q: %w", name, err)
		}
		if err := linkRequest(f, setGSOMaxMsg(int32(ifr.Uint32()), uint32(size))); err != nil {
			return fmt.Errorf("tun: GSO maximum of %q: %w", name, err)
		}
		return nil
	})
}

// setGSOMaxMsg is an RTM_NEWLINK request that changes only the GSO maximum
// of interface index: nlmsghdr, ifinfomsg, one u32 attribute.
func setGSOMaxMsg(index int32, size uint32) []byte {
	const n = unix.SizeofNlMsghdr + unix.SizeofIfInfomsg + unix.SizeofRtAttr + 4
	b := make([]byte, n)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], n)
	ne.PutUint16(b[4:], unix.RTM_NEWLINK)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(b[8:], 1) // sequence number; the socket is ours alone
	ifi := b[unix.SizeofNlMsghdr:]
	// family (AF_UNSPEC), pad, type, index, flags, change: all zero but
	// the index, so nothing else about the link changes.
	ne.PutUint32(ifi[4:], uint32(index))
	attr := ifi[unix.SizeofIfInfomsg:]
	ne.PutUint16(attr[0:], unix.SizeofRtAttr+4)
	ne.PutUint16(attr[2:], unix.IFLA_GSO_MAX_SIZE)
	ne.PutUint32(attr[unix.SizeofRtAttr:], size)
	return b
}

// linkRequest sends one rtnetlink request on f and waits for the kernel's
// acknowledgement, returning the error it carries.
func linkRequest(f *os.File, req []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if err := f.SetReadDeadline(time.Now().Add(gsoMaxTimeout)); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if rerr != nil {
			return rerr
		}
		done, err := parseAck(buf[:n])
		if done {
			return err
		}
	}
}

// parseAck looks for the NLMSG_ERROR answer to our request in one read:
// done once it is found, with the errno it carries (nil for 0).
func parseAck(b []byte) (done bool, err error) {
	msgs, perr := syscall.ParseNetlinkMessage(b)
	if perr != nil {
		return true, fmt.Errorf("bad answer: %w", perr)
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.NLMSG_ERROR {
			continue
		}
		if len(m.Data) < 4 {
			return true, errors.New("short NLMSG_ERROR")
		}
		if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
			return true, unix.Errno(-e)
		}
		return true, nil
	}
	return false, nil
}
