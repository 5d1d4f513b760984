package conn

import (
	"errors"
	"syscall"
)

// wsaeMsgSize is WSAEMSGSIZE, which Windows returns instead of a flag when
// a datagram does not fit the buffer.
const wsaeMsgSize = syscall.Errno(10040)

// truncated reports a datagram cut short by a too-small buffer.
func truncated(_ int, err error) bool { return errors.Is(err, wsaeMsgSize) }
