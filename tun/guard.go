package tun

import (
	"errors"
	"fmt"
	"os"
	"time"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

// readErr maps what a TUN file's read returned to the Device contract: a
// deadline WakeReader set becomes ErrWoken (and is cleared, so that the
// next Read blocks again), and the errors of an interface that is gone
// become ErrGone. Others pass unchanged.
func readErr(d Device, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		if f := d.File(); f != nil {
			f.SetReadDeadline(time.Time{})
		}
		return fmt.Errorf("%w: %w", ErrWoken, err)
	case errors.Is(err, ErrGone):
		return err
	case gone(err):
		return fmt.Errorf("%w: %w", ErrGone, err)
	}
	return err
}

// gone reports whether err says the TUN's interface no longer exists. A
// Linux TUN's descriptor answers EBADFD once its netdev is unregistered (ip
// link del, or its namespace deleted); other systems answer ENODEV or EIO,
// and a file the poller saw closed answers os.ErrClosed.
func gone(err error) bool {
	if errors.Is(err, os.ErrClosed) {
		return true
	}
	for _, e := range goneErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// recoverRead, deferred by a Read that calls code it does not own
// (wireguard-go's TUN), turns a panic there into an error wrapping
// ErrReadPanicked, so that the contract's "Read never panics" holds.
func recoverRead(n *int, err *error) {
	if r := recover(); r != nil {
		*n, *err = 0, fmt.Errorf("%w: %v", ErrReadPanicked, r)
	}
}

// readWG reads through wireguard-go's TUN, whose Read splits offloaded
// super-packets without checking that the segments fit the buffers, and so
// panics if the MTU grew before the caller heard of it.
func readWG(dev wgtun.Device, bufs [][]byte, sizes []int, offset int) (n int, err error) {
	defer recoverRead(&n, &err)
	return dev.Read(bufs, sizes, offset)
}
