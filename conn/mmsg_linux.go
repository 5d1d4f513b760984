package conn

import (
	"errors"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgCall runs recvmmsg or sendmmsg on a socket through its RawConn, so
// the runtime poller parks the goroutine while the socket is not ready and
// Close wakes it. The callbacks are method values bound once in
// newMmsgCall: a call allocates nothing. (x/net's ipv4.PacketConn.ReadBatch
// would, since it returns each peer address as a fresh *net.UDPAddr.)
type mmsgCall struct {
	msgs   []unix.Mmsghdr
	n      int
	errno  syscall.Errno
	recvFn func(fd uintptr) bool
	sendFn func(fd uintptr) bool
	peekFn func(fd uintptr) bool
	// nonblock makes recvmmsg return 0 messages instead of waiting when
	// the socket has none (the connected sockets' reader waits in their
	// epoll instance and takes turns between them).
	nonblock bool
}

// errNoProgress guards the send loop against a kernel that reports success
// for zero messages.
var errNoProgress = errors.New("conn: sendmmsg sent nothing")

func newMmsgCall() *mmsgCall {
	c := &mmsgCall{}
	c.recvFn = c.recv
	c.sendFn = c.send
	c.peekFn = c.peek
	return c
}

// peek reports readiness without taking anything: a zero-length MSG_PEEK
// read succeeds when a datagram is queued and fails with the pending
// socket error (an ICMP error on a connected socket), which it clears.
func (c *mmsgCall) peek(fd uintptr) bool {
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, 0, 0, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		return true
	}
}

// waitReadable blocks until the socket has a datagram or an error to
// report; a closed socket yields an error wrapping net.ErrClosed.
func (c *mmsgCall) waitReadable(rc syscall.RawConn) error {
	return rc.Read(c.peekFn)
}

func (c *mmsgCall) recv(fd uintptr) bool { return c.do(unix.SYS_RECVMMSG, fd) }
func (c *mmsgCall) send(fd uintptr) bool { return c.do(unix.SYS_SENDMMSG, fd) }

// do runs one syscall on the non-blocking fd; false asks the poller to wait
// for readiness and call again.
//
// The calls here are raw (unix.RawSyscall6): they skip the runtime's
// syscall bookkeeping, which is safe because MSG_DONTWAIT makes each
// return at once, even on a socket someone made blocking, so none holds
// its P for long. It saves the data path the latency of waking the
// runtime's monitor thread: when every P has been idle for a while sysmon
// sleeps, and the first ordinary system call after that wakes it with a
// futex, on the path of the packet that ended the quiet (in each daemon
// on each way of an idle ping; docs/architecture.md, "Queues and
// latency").
func (c *mmsgCall) do(trap, fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&c.msgs[0])), uintptr(len(c.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if c.nonblock && trap == unix.SYS_RECVMMSG {
				c.n, c.errno = 0, 0
				return true
			}
			return false
		case 0:
			c.n, c.errno = int(n), 0
		default:
			c.n, c.errno = 0, e
		}
		return true
	}
}

// recvmmsg reads up to len(msgs) messages, blocking until at least one is
// there. A closed socket yields an error wrapping net.ErrClosed.
func (c *mmsgCall) recvmmsg(rc syscall.RawConn, msgs []unix.Mmsghdr) (int, error) {
	c.msgs, c.n, c.errno = msgs, 0, 0
	err := rc.Read(c.recvFn)
	c.msgs = nil
	if err != nil {
		return 0, err
	}
	if c.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", c.errno)
	}
	return c.n, nil
}

// sendmmsg writes msgs in order and returns how many went out. The kernel
// stops at the first message that fails; its errno is returned bare (a
// syscall.Errno) so the caller can decide on a fallback, while a closed
// socket yields an error wrapping net.ErrClosed.
func (c *mmsgCall) sendmmsg(rc syscall.RawConn, msgs []unix.Mmsghdr) (int, error) {
	sent := 0
	for sent < len(msgs) {
		c.msgs, c.n, c.errno = msgs[sent:], 0, 0
		err := rc.Write(c.sendFn)
		c.msgs = nil
		if err != nil {
			return sent, err
		}
		if c.errno != 0 {
			return sent, c.errno
		}
		if c.n <= 0 {
			return sent, errNoProgress
		}
		sent += c.n
	}
	return sent, nil
}
