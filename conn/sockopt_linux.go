package conn

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setSocketBuffers sets SO_RCVBUF and SO_SNDBUF to size. The FORCE variants
// come first: with CAP_NET_ADMIN they ignore net.core.{r,w}mem_max, which
// on most hosts caps the plain ones far below what a 1 Gbit/s+ burst needs.
func setSocketBuffers(c *net.UDPConn, size int) error {
	if size < 0 {
		return nil
	}
	return sockoptControl(c, func(fd int) error {
		if err := setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, size); err != nil {
			return err
		}
		return setBuffer(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, size)
	})
}

// setRecvBuffer sets SO_RCVBUF alone, as setSocketBuffers does.
func setRecvBuffer(c *net.UDPConn, size int) error {
	return sockoptControl(c, func(fd int) error {
		return setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, size)
	})
}

// setBuffer sets one buffer size, with the FORCE option when allowed.
func setBuffer(fd, force, plain, size int) error {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, size) == nil {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, size); err != nil {
		return fmt.Errorf("conn: socket buffer %d: %w", size, err)
	}
	return nil
}

// socketDrops is how many datagrams the kernel dropped on the socket's way
// in, mostly for a full receive buffer (SO_MEMINFO's SK_MEMINFO_DROPS, a
// wrapping 32-bit count); false when the kernel does not say (a kernel
// too old to report that field returns fewer).
func socketDrops(rc syscall.RawConn) (uint32, bool) {
	const skMeminfoDrops = 8 // SK_MEMINFO_DROPS
	var info [skMeminfoDrops + 1]uint32
	n := uint32(unsafe.Sizeof(info))
	var errno syscall.Errno
	err := rc.Control(func(fd uintptr) {
		// Raw, as the reads it runs between (see mmsgCall.do): a
		// getsockopt never blocks.
		_, _, errno = unix.RawSyscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
	})
	if err != nil || errno != 0 || n < uint32(unsafe.Sizeof(info)) {
		return 0, false
	}
	return info[skMeminfoDrops], true
}

// setMark sets SO_MARK, the fwmark policy routing uses to keep the tunnel's
// own packets out of the tunnel.
func setMark(c *net.UDPConn, mark uint32) error {
	return sockoptControl(c, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
			return fmt.Errorf("conn: SO_MARK %d: %w", mark, err)
		}
		return nil
	})
}

// sockoptControl runs f on c's file descriptor.
func sockoptControl(c *net.UDPConn, f func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// allowFragments lets the kernel fragment outer datagrams, as kernel
// WireGuard does (it never sets DF on them). Linux's default for UDP,
// IP_PMTUDISC_WANT, already fragments a datagram above the route's known
// MTU locally, but it sets DF on everything else: a hop further on with a
// smaller MTU drops the datagram and only tells us by ICMP, so the first
// datagrams are lost while the kernel learns the path MTU, and all of them
// are lost when that ICMP is filtered. With DF clear the router fragments
// instead. IPv6 routers never fragment, so there the point is only that the
// source keeps fragmenting (IPV6_DONTFRAG off, its default, made explicit).
func allowFragments(c *net.UDPConn, v6 bool) error {
	return sockoptControl(c, func(fd int) error {
		if !v6 {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT); err != nil {
				return fmt.Errorf("conn: IP_MTU_DISCOVER: %w", err)
			}
			return nil
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DONT); err != nil {
			return fmt.Errorf("conn: IPV6_MTU_DISCOVER: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 0); err != nil {
			return fmt.Errorf("conn: IPV6_DONTFRAG: %w", err)
		}
		return nil
	})
}

// setReusePort sets SO_REUSEPORT, which lets a connected socket share the
// port. It is set on the shared sockets after they are bound, so that a
// second process that wants the port still gets EADDRINUSE on its first
// bind, as before; only a process of the same user that sets it before
// binding could join.
func setReusePort(c *net.UDPConn) error {
	return sockoptControl(c, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fmt.Errorf("conn: SO_REUSEPORT: %w", err)
		}
		return nil
	})
}
