package conn

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

var _ PathMTUConn = (*connSocket)(nil)

// PathMTU implements PathMTUConn: IP_MTU or IPV6_MTU, which a connected
// socket answers with the route's MTU as ICMP left it.
//
// An IPv6 socket whose cached route went stale (a packet-too-big added a
// route exception) drops it at its next send, and since its sends carry
// IPV6_PKTINFO (checkedSource) the kernel treats them as unconnected and
// never caches the new one: IPV6_MTU then says ENOTCONN for good. Connecting
// again to the same destination caches the current route, exception and
// all.
func (cs *connSocket) PathMTU() (int, error) {
	var mtu int
	err := sockoptControl(cs.sock.conn, func(fd int) (err error) {
		if !cs.sock.v6 {
			mtu, err = unix.GetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU)
			return err
		}
		mtu, err = unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU)
		if errors.Is(err, unix.ENOTCONN) {
			if cerr := unix.Connect(fd, sockaddrOf(cs.ep.Dst, scopeOf(cs.ep.Dst.Addr(), cs.ep.SrcIfIndex))); cerr != nil {
				return cerr
			}
			mtu, err = unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("conn: path MTU to %v: %w", cs.ep.Dst, err)
	}
	return mtu, nil
}

// SendProbe implements PathMTUConn. The socket's fragmentation setting
// (allowFragments) is switched to IP_PMTUDISC_PROBE (DF set, the known
// path MTU ignored) for the one send and back after it; probeMu keeps two
// probers of one socket from restoring it under each other.
func (cs *connSocket) SendProbe(b []byte) error {
	cs.probeMu.Lock()
	defer cs.probeMu.Unlock()
	level, opt, probe, dont := unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE, unix.IP_PMTUDISC_DONT
	if cs.sock.v6 {
		level, opt, probe, dont = unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_PROBE, unix.IPV6_PMTUDISC_DONT
	}
	set := func(v, frag int) error {
		return sockoptControl(cs.sock.conn, func(fd int) error {
			if cs.sock.v6 {
				if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, frag); err != nil {
					return err
				}
			}
			return unix.SetsockoptInt(fd, level, opt, v)
		})
	}
	if err := set(probe, 1); err != nil {
		return fmt.Errorf("conn: probe: %w", err)
	}
	_, err := cs.sock.conn.Write(b)
	if rerr := set(dont, 0); rerr != nil {
		// Left with DF, big datagrams would be lost instead of
		// fragmented: the socket is not to be used again.
		cs.broken.Store(true)
		return fmt.Errorf("conn: probe: restoring fragmentation: %w", rerr)
	}
	if errors.Is(err, unix.EMSGSIZE) {
		return fmt.Errorf("%w: %d bytes", ErrProbeTooBig, len(b))
	}
	return err
}
