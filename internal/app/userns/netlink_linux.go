package userns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// The rtnetlink requests that configure the namespace's interfaces: the
// child has CAP_NET_ADMIN there, and no ip(8) may be installed.

// rtnl is a NETLINK_ROUTE socket that sends one request at a time and
// waits for its acknowledgement.
type rtnl struct {
	fd  int
	seq uint32
}

func openRtnl() (*rtnl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &rtnl{fd: fd}, nil
}

func (r *rtnl) close() { unix.Close(r.fd) }

// do sends one request (header added here) and returns the kernel's error.
func (r *rtnl) do(typ, flags uint16, body []byte) error {
	r.seq++
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], r.seq)
	if err := unix.Sendto(r.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != r.seq || m.Header.Type != syscall.NLMSG_ERROR {
				continue
			}
			if len(m.Data) < 4 {
				return errors.New("short netlink error message")
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
}

// attr appends one rtnetlink attribute, padded to 4 bytes.
func attr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// linkUpMsg brings interface index up and, unless mtu is 0, sets its MTU.
func linkUpMsg(index int, mtu int) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	// ifinfomsg: family, pad, type, index, flags, change
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	binary.NativeEndian.PutUint32(b[8:], unix.IFF_UP)
	binary.NativeEndian.PutUint32(b[12:], unix.IFF_UP)
	if mtu > 0 {
		b = attr(b, unix.IFLA_MTU, u32(uint32(mtu)))
	}
	return b
}

// addrMsg adds p to interface index; IPv6 addresses skip duplicate
// address detection, which would hold them back for a second or more on a
// link where no other host can exist.
func addrMsg(index int, p netip.Prefix) []byte {
	a := p.Addr()
	fam := byte(unix.AF_INET)
	if a.Is6() {
		fam = unix.AF_INET6
	}
	// ifaddrmsg: family, prefixlen, flags, scope, index
	b := []byte{fam, byte(p.Bits()), 0, 0}
	b = binary.NativeEndian.AppendUint32(b, uint32(index))
	b = attr(b, unix.IFA_LOCAL, a.AsSlice())
	b = attr(b, unix.IFA_ADDRESS, a.AsSlice())
	if a.Is6() {
		b = attr(b, unix.IFA_FLAGS, u32(unix.IFA_F_NODAD))
	}
	return b
}

// routeMsg routes p through interface index in the main table.
func routeMsg(index int, p netip.Prefix) []byte {
	p = p.Masked()
	fam := byte(unix.AF_INET)
	if p.Addr().Is6() {
		fam = unix.AF_INET6
	}
	// rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
	b := []byte{fam, byte(p.Bits()), 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_LINK, unix.RTN_UNICAST, 0, 0, 0, 0}
	if p.Bits() > 0 {
		b = attr(b, unix.RTA_DST, p.Addr().AsSlice())
	}
	b = attr(b, unix.RTA_OIF, u32(uint32(index)))
	return b
}

// configure brings lo up, sets the TUN's MTU, addresses and routes.
func configure(name string, index, mtu int, addrs, routes []netip.Prefix) error {
	r, err := openRtnl()
	if err != nil {
		return err
	}
	defer r.close()
	if err := r.do(unix.RTM_NEWLINK, 0, linkUpMsg(1, 0)); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	for _, p := range addrs {
		if err := r.do(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, addrMsg(index, p)); err != nil {
			return fmt.Errorf("add address %v to %s: %w", p, name, err)
		}
	}
	if err := r.do(unix.RTM_NEWLINK, 0, linkUpMsg(index, mtu)); err != nil {
		return fmt.Errorf("set %s up with MTU %d: %w", name, mtu, err)
	}
	for _, p := range routes {
		// REPLACE: an allowed IP may equal an address's own subnet route.
		if err := r.do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, routeMsg(index, p)); err != nil {
			return fmt.Errorf("add route %v via %s: %w", p, name, err)
		}
	}
	return nil
}
