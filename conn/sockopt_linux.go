package conn

import (
	"fmt"
	"net"

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
		for _, o := range [...]struct{ force, plain int }{
			{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF},
			{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF},
		} {
			if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.force, size) == nil {
				continue
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.plain, size); err != nil {
				return fmt.Errorf("conn: socket buffer %d: %w", size, err)
			}
		}
		return nil
	})
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
