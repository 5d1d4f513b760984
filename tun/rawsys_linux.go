package tun

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The TUN's reads and writes on the data path are raw system calls
// (unix.RawSyscall) made inside the file's RawConn callbacks, so the
// runtime's poller still parks the goroutine while the TUN has nothing and
// Close and deadlines still wake it. A raw call skips the runtime's
// syscall bookkeeping (entersyscall and exitsyscall), which is safe only
// because the descriptor is non-blocking: the call returns at once, so it
// never holds its P for long. What that saves is the latency of an idle
// tunnel: when every P has been idle for a while the runtime's monitor
// thread (sysmon) sleeps, and the first ordinary system call after that
// wakes it with a futex, on the path of the packet that ended the quiet;
// an idle ping met one in each daemon on each way (docs/architecture.md,
// "Queues and latency").

// fdCalls makes the data path's system calls on a TUN descriptor: raw
// where they cannot block (see above), ordinary otherwise.
type fdCalls struct{ raw bool }

func (c fdCalls) call(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	if c.raw {
		r, _, e := unix.RawSyscall(trap, a1, a2, a3)
		return r, e
	}
	r, _, e := unix.Syscall(trap, a1, a2, a3)
	return r, e
}

// tunCalls returns f's RawConn and how to call into it: raw if f's
// descriptor is non-blocking and the runtime's poller watches it. A file
// opened blocking is not watched, and a raw read on it would hold a P
// until a packet came; it gets ordinary calls, which may block.
func tunCalls(f *os.File) (syscall.RawConn, fdCalls, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fdCalls{}, err
	}
	if f.SetReadDeadline(time.Time{}) != nil {
		return rc, fdCalls{}, nil // not pollable
	}
	nonblock := false
	if rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	}) != nil {
		return rc, fdCalls{}, nil
	}
	return rc, fdCalls{raw: nonblock}, nil
}

// rawConnErr maps an error of an os.File's RawConn to what the file's own
// Read or Write would have returned: a deadline stays as it is, and the
// poller's "use of closed file" becomes os.ErrClosed, which the data path
// reads as "the TUN is gone".
func rawConnErr(err error) error {
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, os.ErrClosed) {
		return err
	}
	// The only other error the poller gives is that the file was closed
	// (or, for a file it does not watch, that it cannot wait, which a
	// blocking descriptor never asks it to).
	return fmt.Errorf("%w: %v", os.ErrClosed, err)
}
