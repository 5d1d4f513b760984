//go:build !linux

package conn

import (
	"errors"
	"fmt"
	"net"
)

// setSocketBuffers sets the receive and send buffers to size (capped by the
// system's limits; there is no FORCE variant outside Linux).
func setSocketBuffers(c *net.UDPConn, size int) error {
	if size < 0 {
		return nil
	}
	if err := c.SetReadBuffer(size); err != nil {
		return fmt.Errorf("conn: socket buffer %d: %w", size, err)
	}
	if err := c.SetWriteBuffer(size); err != nil {
		return fmt.Errorf("conn: socket buffer %d: %w", size, err)
	}
	return nil
}

// setMark fails for any mark but 0: SO_MARK is Linux-only, and silently
// ignoring a mark would let tunnel traffic loop into the tunnel.
func setMark(_ *net.UDPConn, mark uint32) error {
	if mark == 0 {
		return nil
	}
	return fmt.Errorf("conn: fwmark %d: %w", mark, errors.ErrUnsupported)
}

// allowFragments does nothing outside Linux: the BSDs and Windows leave DF
// clear on UDP unless a program asks for it.
func allowFragments(*net.UDPConn, bool) error { return nil }
