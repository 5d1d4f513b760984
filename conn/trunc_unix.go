//go:build unix

package conn

import "syscall"

// truncated reports a datagram cut short by a too-small buffer, which unix
// kernels flag with MSG_TRUNC.
func truncated(flags int, _ error) bool { return flags&syscall.MSG_TRUNC != 0 }
