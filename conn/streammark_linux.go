package conn

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// markControl sets SO_MARK on a socket before it connects, so that policy
// routing keeps the tunnel's own TCP out of the tunnel; nil for mark 0.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	if mark == 0 {
		return nil
	}
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("conn: SO_MARK %d: %w", mark, serr)
		}
		return nil
	}
}
