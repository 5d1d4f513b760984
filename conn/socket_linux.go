package conn

import (
	"net"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// udpSocket is one of the Linux bind's sockets (IPv4 or IPv6) with the
// offloads it negotiated with the kernel.
type udpSocket struct {
	conn *net.UDPConn
	rc   syscall.RawConn
	v6   bool
	// gro is fixed at open: the receiver reads into 64 KiB buffers and
	// splits only when the kernel accepted UDP_GRO.
	gro bool
	// gso starts true when the kernel knows UDP_SEGMENT and is cleared for
	// good the first time it refuses a segmented send, unless it refused
	// only because the segments were too big for the path (see segLimit).
	gso atomic.Bool
	// segLimit is the smallest GSO segment size the kernel refused as too
	// big for the path (0: none yet). Segments at least that big go as
	// plain datagrams, which the kernel fragments; smaller ones still
	// coalesce. It only shrinks, and is per socket, not per destination:
	// one peer behind a small path MTU costs the others GSO for their big
	// segments only.
	segLimit atomic.Int32
	// pktinfo is whether the kernel reports each datagram's local address,
	// which sticky source addresses need.
	pktinfo bool
	// shed is set on the shared sockets while the bind sheds a flood (see
	// Shedder): their receiver drops datagrams older than ShedMaxAge.
	shed atomic.Bool
	// drops is the kernel's count of datagrams the socket dropped, as last
	// read at dropsAt (ns); see receiver.countDrops. Only the socket's
	// reader touches them.
	drops   uint32
	dropsAt int64
}

// newUDPSocket sets up c: buffers, PKTINFO, and the offloads the options
// allow. Only a failure that makes the socket unusable is an error; a
// missing optional feature is logged and counted.
func newUDPSocket(c *net.UDPConn, v6 bool, o Options, mark uint32, st *counters) (*udpSocket, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &udpSocket{conn: c, rc: rc, v6: v6}
	if err := setSocketBuffers(c, o.socketBuffer); err != nil {
		o.Logf("conn: %v", err)
	}
	if mark != 0 {
		if err := setMark(c, mark); err != nil {
			return nil, err
		}
	}
	if err := allowFragments(c, v6); err != nil {
		// Not fatal: the kernel default still fragments locally.
		o.Logf("conn: outer datagrams keep DF: %v", err)
	}
	level, opt := unix.IPPROTO_IP, unix.IP_PKTINFO
	if v6 {
		level, opt = unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO
	}
	if err := sockoptControl(c, func(fd int) error { return unix.SetsockoptInt(fd, level, opt, 1) }); err != nil {
		o.Logf("conn: no packet info, sticky source addresses off: %v", err)
	} else {
		s.pktinfo = true
	}
	// Kernel receive timestamps measure how long datagrams wait in the
	// socket's queue (Stats.RxSojourn): the standing queue of a loaded
	// tunnel sits there, and the only way to see it is to time it.
	err = sockoptControl(c, func(fd int) error {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_NEW, 1) == nil {
			return nil
		}
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_OLD, 1)
	})
	if err != nil {
		o.Logf("conn: no receive timestamps, socket sojourn not measured: %v", err)
	}
	if !o.DisableGRO {
		err := sockoptControl(c, func(fd int) error { return unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1) })
		if err != nil {
			st.groFallbacks.Add(1)
			o.Logf("conn: UDP_GRO unavailable, receiving one datagram per message: %v", err)
		} else {
			s.gro = true
		}
	}
	if !o.DisableGSO {
		// A kernel that knows UDP_SEGMENT answers the getsockopt; one that
		// does not would reject the cmsg on every send.
		err := sockoptControl(c, func(fd int) error {
			_, err := unix.GetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT)
			return err
		})
		if err != nil {
			o.Logf("conn: UDP_SEGMENT unavailable, sending one datagram per message: %v", err)
		} else {
			s.gso.Store(true)
		}
	}
	return s, nil
}

// lowerSegLimit records that the kernel refused segments of seg bytes.
func (s *udpSocket) lowerSegLimit(seg int) {
	for {
		cur := s.segLimit.Load()
		if cur != 0 && int(cur) <= seg {
			return
		}
		if s.segLimit.CompareAndSwap(cur, int32(seg)) {
			return
		}
	}
}
