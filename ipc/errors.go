package ipc

import (
	"errors"
	"fmt"
	"syscall"
)

// Errno values sent in "errno=N" replies. They are negative, as wireguard-go
// sends them and as wg(8) expects from a set reply.
const (
	ErrnoIO        = -int64(syscall.EIO)
	ErrnoProtocol  = -int64(syscall.EPROTO)
	ErrnoInvalid   = -int64(syscall.EINVAL)
	ErrnoAddrInUse = -int64(syscall.EADDRINUSE)
	ErrnoTooBig    = -int64(syscall.EMSGSIZE)
)

// Error is a UAPI failure with the errno the protocol reports for it.
type Error struct {
	// Errno is a negative errno such as -EINVAL (-22) or -EPROTO (-71).
	Errno int64
	// Msg says what was wrong, for logs and the CLI.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("uapi: %s: %v (errno %d)", e.Msg, e.Err, e.Errno)
	}
	return fmt.Sprintf("uapi: %s (errno %d)", e.Msg, e.Errno)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, syscall.EINVAL) and the like match the errno.
func (e *Error) Is(target error) bool {
	var t syscall.Errno
	if errors.As(target, &t) {
		return int64(t) == -e.Errno
	}
	return false
}

func errorf(errno int64, format string, args ...any) *Error {
	return &Error{Errno: errno, Msg: fmt.Sprintf(format, args...)}
}

func wrapError(errno int64, err error, format string, args ...any) *Error {
	return &Error{Errno: errno, Msg: fmt.Sprintf(format, args...), Err: err}
}

// ErrnoOf maps an error to the negative errno a reply carries: 0 for nil, the
// Errno of an *Error, the negated value of a syscall.Errno (so a bind that
// fails with EADDRINUSE reports -EADDRINUSE), and -EINVAL for anything else,
// because a handler that refuses a configuration without saying why has,
// in practice, found it invalid.
func ErrnoOf(err error) int64 {
	if err == nil {
		return 0
	}
	var ie *Error
	if errors.As(err, &ie) {
		return normalizeErrno(ie.Errno)
	}
	var se syscall.Errno
	if errors.As(err, &se) && se != 0 {
		return -int64(se)
	}
	return ErrnoInvalid
}

// normalizeErrno makes errno negative; 0 becomes -EINVAL because an error
// must never be reported as success.
func normalizeErrno(n int64) int64 {
	switch {
	case n > 0:
		return -n
	case n == 0:
		return ErrnoInvalid
	}
	return n
}
