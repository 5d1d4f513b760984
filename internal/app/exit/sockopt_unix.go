//go:build unix

package exit

import "syscall"

// noBroadcast clears SO_BROADCAST on the socket fd.
func noBroadcast(fd uintptr) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 0)
}
