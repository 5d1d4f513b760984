//go:build !linux

package conn

import (
	"errors"
	"fmt"
	"syscall"
)

// markControl fails the dial for any mark but 0: SO_MARK is Linux-only,
// and a connection without its mark could loop into the tunnel.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	if mark == 0 {
		return nil
	}
	return func(string, string, syscall.RawConn) error {
		return fmt.Errorf("conn: fwmark %d: %w", mark, errors.ErrUnsupported)
	}
}
