// Package tun is where packets enter and leave the tunnel on the local side:
// the Device contract every TUN serves, a real Linux TUN (opened through
// golang.zx2c4.com/wireguard/tun, read, split, coalesced and written by our
// own code), and, in sub-packages, our gVisor netstack backend and an
// in-memory TUN.
package tun

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Device is a TUN: the data path reads the packets the local side sends
// into the tunnel from it, and writes the packets that came out of the
// tunnel to it. Its methods mirror wireguard-go's tun.Device, so a device
// from that package fits, but the rules below are ours and every
// implementation here keeps them (each asserts var _ tun.Device).
//
// Batches. Read and Write move up to BatchSize packets per call. Read
// blocks until at least one packet is ready, then returns the packets it
// has without waiting for more: a batch is what one wake-up found.
//
// Offset and headroom. Packets sit at bufs[i][offset:]; the bytes in front
// are the caller's on Read and the Device's scratch on Write (a kernel TUN
// with offloads writes its virtio-net header there), so a caller leaves at
// least Headroom bytes in front of every packet it writes.
//
// Buffer ownership. bufs stay the caller's: a Device keeps no reference to
// them after Read or Write returns, and reads nothing of them but the
// packets, so a caller may reuse them at once.
//
// Too big. A packet larger than bufs[i][offset:] is never truncated and
// never a panic. Read either drops it (and, when it has no other packet to
// return, returns 0 and an error wrapping io.ErrShortBuffer), or, once,
// keeps it for the next call and returns 0 and an error wrapping neither,
// in case the caller's buffers grew meanwhile. A kernel TUN's offloaded
// super-packet is split into MTU-sized packets, so only the MTU matters.
//
// Waking a reader. After the MTU goes up, a reader should swap its buffers
// before the first packet at the new size arrives. WakeReader makes a
// blocked (or the next) Read return 0 and an error wrapping ErrWoken at
// once. A Device without a File cannot be woken this way; its reader wakes
// with the next packet instead, and a packet too big for the old buffers
// is handled as above.
//
// Gone. Once the Device is closed, or its interface deleted (ip link del,
// or the network namespace it lived in removed), Read returns an error
// wrapping ErrGone, and so does every later call. No other Read error means
// the Device is unusable: the caller counts it and reads on. Read never
// panics: a panic inside code a Device wraps comes back as an error
// wrapping ErrReadPanicked.
type Device interface {
	// File is the TUN's file, nil for a Device that has none (netstack,
	// memtun). Its read deadline is how WakeReader wakes a reader; other
	// uses belong to the tun package.
	File() *os.File
	// Read fills up to len(bufs) packets at bufs[i][offset:], sets
	// sizes[i] to each one's length and returns how many it filled.
	// len(sizes) must be at least len(bufs).
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write writes the packets at bufs[i][offset:], coalescing where it
	// can (GRO), and returns how many it wrote; on error the count may be
	// 0 even if some were written.
	Write(bufs [][]byte, offset int) (int, error)
	// MTU is the interface's MTU now, wherever the interface lives.
	MTU() (int, error)
	// Name is the interface's name.
	Name() (string, error)
	// Events reports state changes (EventUp, EventDown, EventMTUUpdate); it
	// is closed after Close.
	Events() <-chan Event
	// Close releases the TUN: blocked Reads return ErrGone, blocked
	// Writes an error, and Events is closed. Closing twice is not an
	// error.
	Close() error
	// BatchSize is the most packets one Read returns.
	BatchSize() int
}

// Event is a set of state changes a Device reports.
type Event int

// Events a Device reports.
const (
	EventUp Event = 1 << iota
	EventDown
	EventMTUUpdate
)

// Headroom is the space the data path leaves in front of every packet it
// reads from or writes to a Device: enough for the 16-byte WireGuard transport
// header, which also covers the 10-byte virtio-net header the kernel TUN needs.
const Headroom = 16

// ErrGone is wrapped by Read's error once the Device is closed or its
// interface is gone: the only read error after which reading again is
// pointless. It wraps os.ErrClosed, so a caller that stops on a closed file
// needs no second check.
var ErrGone = fmt.Errorf("tun: the interface is gone: %w", os.ErrClosed)

// ErrWoken is wrapped by the error of a Read that WakeReader woke.
var ErrWoken = errors.New("tun: read woken")

// ErrReadPanicked is wrapped by the error of a Read whose wrapped
// implementation panicked. The one cause known is wireguard-go's TUN
// splitting a super-packet into buffers too small for it (the MTU went up
// before the reader heard); the caller may re-read the MTU and read on, but
// a panic on every read is a bug that reading again will not cure.
var ErrReadPanicked = errors.New("tun: read panicked")

// WakeReader makes a Read that is waiting on d (or, if none is, the next
// Read) return 0 and an error wrapping ErrWoken, so its caller can swap its
// buffers. It does nothing for a Device without a File.
func WakeReader(d Device) {
	if f := d.File(); f != nil {
		f.SetReadDeadline(time.Now())
	}
}
