package tun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
)

// nullDevice is a Device with nothing behind it, for readErr.
type nullDevice struct{ Device }

func (nullDevice) File() *os.File { return nil }

func TestReadErrGone(t *testing.T) {
	for _, err := range []error{
		os.ErrClosed,
		fmt.Errorf("read: %w", os.ErrClosed),
		&os.PathError{Op: "read", Path: "/dev/net/tun", Err: syscall.ENODEV},
		syscall.EIO,
		ErrGone,
	} {
		got := readErr(nullDevice{}, err)
		if !errors.Is(got, ErrGone) {
			t.Errorf("readErr(%v) = %v, want ErrGone", err, got)
		}
		if !errors.Is(got, err) {
			t.Errorf("readErr(%v) = %v, lost the cause", err, got)
		}
	}
}

func TestReadErrNotGone(t *testing.T) {
	for _, err := range []error{
		io.ErrShortBuffer,
		errors.New("tun: packet kept for the next read"),
		syscall.EAGAIN,
		syscall.EINVAL,
		errors.New("too many segments"),
	} {
		if got := readErr(nullDevice{}, err); got != err {
			t.Errorf("readErr(%v) = %v, want it unchanged", err, got)
		}
	}
	if got := readErr(nullDevice{}, nil); got != nil {
		t.Errorf("readErr(nil) = %v", got)
	}
}

// ErrGone wraps os.ErrClosed, so callers that stopped on a closed file
// before the contract existed still stop.
func TestErrGoneIsErrClosed(t *testing.T) {
	if !errors.Is(ErrGone, os.ErrClosed) {
		t.Fatal("ErrGone does not wrap os.ErrClosed")
	}
}

func TestRecoverRead(t *testing.T) {
	read := func() (n int, err error) {
		defer recoverRead(&n, &err)
		var bufs [][]byte
		n = 3
		_ = bufs[n] // index out of range, as wireguard-go's split can
		return n, nil
	}
	n, err := read()
	if n != 0 || !errors.Is(err, ErrReadPanicked) {
		t.Fatalf("read = %d, %v; want 0 and ErrReadPanicked", n, err)
	}
}
